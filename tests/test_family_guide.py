"""docs/FAMILY_GUIDE.md, executed: its steps are the steps that work.

The guide adds FrozenLake from a folder of its own. Its fenced blocks that start
with ``# file: <path>`` are written to that path, and those that start with
``# run`` are run by bash, in document order, in an empty folder, with ``vical`` on
the PATH as this checkout's command line; each ``# expect: <text>`` line of a run
block must appear in what that block's commands print. Variables a block exports
carry over to the next. The blocks a test of its own needs (the files, for
``tests/test_external_env.py``) are read by :func:`guide_files`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

GUIDE = Path(__file__).parents[1] / "docs" / "FAMILY_GUIDE.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    kind: str  # "file" or "run"
    text: str  # the block without its marker line
    path: str = ""  # a file block's path
    line: int = 0  # where the block starts in the guide


def guide_blocks(text: str | None = None) -> list[Block]:
    """The guide's marked blocks, in order (unmarked blocks are shown, not run)."""
    text = GUIDE.read_text() if text is None else text
    blocks = []
    for m in FENCE.finditer(text):
        first, _, rest = m.group(2).partition("\n")
        line = text.count("\n", 0, m.start()) + 1
        if first.startswith("# file: "):
            blocks.append(Block("file", rest, first.removeprefix("# file: ").strip(), line))
        elif first.strip() == "# run":
            blocks.append(Block("run", rest, line=line))
    return blocks


def guide_files(root: Path) -> list[Path]:
    """Write the guide's files under ``root`` (the folders the guide makes first); returns them."""
    written = []
    for b in guide_blocks():
        if b.kind == "file":
            path = root / b.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(b.text)
            written.append(path)
    return written


def vical_on_path(bin_dir: Path) -> dict[str, str]:
    """An environment whose ``vical`` is this checkout's command line and whose ``python``
    is this Python, both with the checkout importable after the guide's own PYTHONPATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).parents[1]
    shim = bin_dir / "vical"
    shim.write_text(
        f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{repo}" '
        f'exec {sys.executable} -m vical.cli "$@"\n'
    )
    shim.chmod(0o755)
    python = bin_dir / "python"  # the guide's python: this one, with this checkout importable
    python.write_text(
        f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{repo}" exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VICAL_TASKS_DIR", "VICAL_GAME_PACKAGES", "VICAL_BUILTIN_TASKS_DIR")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def run_guide(root: Path, blocks: list[Block]) -> list[tuple[Block, str]]:
    """Run ``blocks`` in order in ``root``; each run block's output. Fails at the first
    block that exits non-zero or does not print what it expects."""
    env = vical_on_path(root / ".bin")
    state = root / ".bin" / "exports.sh"
    state.write_text("")
    outputs = []
    for b in blocks:
        if b.kind == "file":
            path = root / b.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(b.text)
            continue
        script = f"set -euo pipefail\n. {state}\n{b.text}\nexport -p > {state}\n"
        done = subprocess.run(
            ["bash", "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=600
        )
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"guide line {b.line}: exit {done.returncode}\n{out[-3000:]}"
        for want in re.findall(r"^# expect: (.+)$", b.text, re.M):
            assert want.strip() in out, f"guide line {b.line}: {want.strip()!r} not in\n{out}"
        outputs.append((b, out))
    return outputs


def test_the_guide_runs_as_written(tmp_path):
    blocks = guide_blocks()
    assert sum(b.kind == "file" for b in blocks) == 4 and sum(b.kind == "run" for b in blocks) >= 6
    run_guide(tmp_path, blocks)
    folder = tmp_path / "lakegames"
    assert {p.name for p in folder.iterdir()} >= {
        "frozenlake.yaml",
        "frozenlake.py",
        "recipes",
        "fingerprints.json",
        "doctor.json",
        "expert-plans.json",
    }
    assert "demos:" in (folder / "frozenlake.yaml").read_text()  # written by vical demos make
    for run in ("lake", "expert"):  # the random agent's run and the expert baseline
        results = list((tmp_path / "runs" / run).rglob("eval_result.json"))
        assert len(results) == 2, (run, results)
    expert = [
        json.loads(p.read_text()) for p in (tmp_path / "runs/expert").rglob("eval_result.json")
    ]
    assert all(r["passed"] for r in expert), expert


def test_a_failing_block_or_a_missing_expectation_stops_the_run(tmp_path):
    text = (
        "```bash\n# run\necho hello\n# expect: hello\n```\n"
        "```bash\n# run\necho other\n# expect: absent\n```\n"
    )
    blocks = guide_blocks(text)
    assert [b.kind for b in blocks] == ["run", "run"]
    with pytest.raises(AssertionError, match="'absent' not in"):
        run_guide(tmp_path, blocks)
    with pytest.raises(AssertionError, match="exit 3"):
        run_guide(tmp_path, guide_blocks("```bash\n# run\nexit 3\n```\n"))


def test_unmarked_blocks_are_not_run_and_exports_carry_over(tmp_path):
    text = (
        "```bash\npython -m pytest\n```\n"
        "```bash\n# run\nexport GUIDE_VALUE=7\n```\n"
        "```python\n# file: pkg/m.py\nX = 1\n```\n"
        "```bash\n# run\necho value=$GUIDE_VALUE\ncat pkg/m.py\n# expect: value=7\n```\n"
    )
    blocks = guide_blocks(text)
    assert [(b.kind, b.path) for b in blocks] == [("run", ""), ("file", "pkg/m.py"), ("run", "")]
    outputs = run_guide(tmp_path, blocks)
    assert "X = 1" in outputs[-1][1]
