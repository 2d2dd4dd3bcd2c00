"""The suite's own health: no test asserts how long something took, and the durations
record that keeps the default suite inside its budget is present and current.

A bound on elapsed time fails on a loaded machine for reasons that have nothing to do
with the code; the suite waits on events instead (a process's exit status, a record
written, a marker file) with a generous hang guard (``conftest.HANG``, pytest-timeout),
and speed is measured in ``benchmarks/``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Names that, compared with <, <=, > or >=, are a bound on elapsed time.
TIME_NAMES = frozenset({"took", "elapsed", "seconds", "dt", "duration", "wall", "t_elapsed"})
CLOCKS = frozenset({"time", "monotonic", "perf_counter", "process_time"})
ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _is_clock_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCKS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "time"
    )


def _is_time_value(node: ast.AST) -> bool:
    """A clock reading, a difference involving one, or a variable named for a duration."""
    if isinstance(node, ast.Name):
        return node.id in TIME_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in TIME_NAMES
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return _is_clock_call(node.left) or _is_clock_call(node.right)
    return _is_clock_call(node)


def _is_deadline(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return "deadline" in name


def timing_assertions(source: str, filename: str = "<test>") -> list[str]:
    """``file:line`` of every assert that orders a duration against something."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in ast.walk(node.test):
            if not isinstance(cmp, ast.Compare):
                continue
            sides = [cmp.left, *cmp.comparators]
            if any(_is_deadline(s) for s in sides):
                continue  # polling for an event until a deadline: a hang guard
            if any(isinstance(op, ORDER) for op in cmp.ops) and any(
                _is_time_value(s) for s in sides
            ):
                found.append(f"{filename}:{node.lineno}")
                break
    return found


def _test_files() -> list[Path]:
    files = sorted(TESTS.rglob("*.py"))
    return [f for f in files if "__pycache__" not in f.parts]


def test_no_test_asserts_how_long_something_took():
    found = []
    for f in _test_files():
        found += timing_assertions(f.read_text(), str(f.relative_to(TESTS.parent)))
    assert not found, (
        "wall-clock assertions (wait on an event with a HANG guard instead, or measure "
        f"in benchmarks/): {found}"
    )


@pytest.mark.parametrize(
    "snippet",
    [
        "assert took < 10",
        "assert rc == 130 and took < 10, took",
        "assert time.time() - t0 < 5",
        "assert time.perf_counter() - t0 <= 1.0",
        "assert r.took < SECONDS",
        "assert elapsed >= 1.0",
        "assert 2 > time.monotonic() - start",
    ],
)
def test_the_scan_finds_a_timing_assertion(snippet):
    assert timing_assertions(f"def test_x():\n    {snippet}\n") == ["<test>:2"]


@pytest.mark.parametrize(
    "snippet",
    [
        "assert rc == 130, took",
        "assert len(waits) == 3 and all(0 < w <= 0.05 for w in waits)",
        "assert r.seconds_played == 3",
        "assert proc.poll() is None and time.monotonic() < deadline, err",
    ],
)
def test_the_scan_lets_other_assertions_be(snippet):
    assert timing_assertions(f"def test_x():\n    {snippet}\n") == []


def test_the_durations_record_covers_the_default_suite():
    """tests/data/durations.json (``nox -s durations``) is a record of the README's test
    command on two workers, and the tests it names are still tests of the suite (a
    renamed file means a stale record). The 12-minute budget itself is measured, not
    asserted here: ``benchmarks/durations.py`` exits 1 over it."""
    rec = json.loads((TESTS / "data" / "durations.json").read_text())
    assert rec["command"] == "pytest -n 2" and rec["workers"] == 2
    assert rec["tests"] > 1000 and rec["total_seconds"] > 0 and rec["wall_seconds"] > 0
    assert rec["budget_seconds"] == 12 * 60
    slowest = rec["slowest"]
    assert len(slowest) >= 20 and slowest == sorted(slowest, key=lambda r: -r["seconds"])
    files = {r["id"].split("::")[0] for r in slowest}
    missing = [f for f in files if not (TESTS.parent / f).is_file()]
    assert not missing, f"the durations record names files that are gone: {missing}"
