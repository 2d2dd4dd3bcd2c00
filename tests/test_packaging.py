"""The wheel carries every data file the code reads at run time."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_wheel_contains_runtime_data(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    (wheel,) = tmp_path.glob("vical-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    yamls = {p.name for p in (ROOT / "vical" / "tasks").glob("*.yaml")}
    assert {f"vical/tasks/{n}" for n in yamls} <= names
    for required in (
        "vical/dataset/card_template.md",
        "vical/agent/prices.yaml",
        "vical/requirements.lock",
        "vical/cli.py",
    ):
        assert required in names, required
    assert not any(n.startswith(("tests/", "docker/")) for n in names)
