"""Smoke run of benchmarks/faults.py with tiny parameters: both experiments, both checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "faults.py"


def test_fault_benchmark_quick_mode_holds_its_invariants(tmp_path):
    # a near-certain fault rate makes the single episode end in an infrastructure
    # failure at its first decision, so the re-run path is exercised in seconds
    r = subprocess.run(
        [
            sys.executable, str(SCRIPT), "--quick", "--kills", "2",
            "--fault-tasks", "cliffwalking/base", "--fault-rate", "0.95",
            "--fault-kinds", "429,500", "--keep", str(tmp_path),
        ],
        env={**os.environ, "SDL_VIDEODRIVER": "dummy"},
        capture_output=True, text=True, timeout=600,  # a hang guard
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "2 kills (1 of the process group, 1 of the main process alone)" in out
    for label in ("lost episodes", "duplicated episodes", "truncated episodes"):
        assert f"| {label} | 0 | 0 |" in out
    assert "| orphaned processes after a kill | 0 | 0 |" in out
    assert "| infrastructure failures, first pass | 1 |" in out
    assert "| retried on the re-run (fault rate 0) | 1 |" in out
    assert "| unaccounted | 0 |" in out
    assert "exit status 1 then 0 on the re-run" in out
    assert out.rstrip().endswith("all invariants hold")
    assert list((tmp_path / "faults" / "failed-attempts").iterdir())
