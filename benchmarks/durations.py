"""Record how long the default test suite takes: ``tests/data/durations.json``.

Runs the README's test command (``pytest -n 2``) with a JUnit report, or reads one
already written (``--junit FILE --wall SECONDS``), and keeps the wall time, the summed
test time, the test count and the slowest tests. ``nox -s durations`` runs it on an idle
machine; it exits 1 when the wall time is over the 12-minute budget, and
``tests/test_suite_health.py`` checks that the tests the record names still exist.

    python benchmarks/durations.py                      # run the suite and record it
    python benchmarks/durations.py --junit j.xml --wall 700   # record a finished run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "durations.json"
SLOWEST = 60
BUDGET = 12 * 60  # seconds: the default suite on two cores (the project's convention)


def _test_id(case: ET.Element) -> str:
    """``tests/test_x.py::test_name[param]`` from a JUnit testcase's classname and name."""
    classname = case.get("classname", "")
    parts = classname.split(".")
    # classname is the dotted module path, then any test classes
    for i in range(len(parts), 0, -1):
        path = Path(*parts[:i]).with_suffix(".py")
        if (ROOT / path).is_file():
            return "::".join([path.as_posix(), *parts[i:], case.get("name", "")])
    return f"{classname}::{case.get('name', '')}"


def summarise(junit: Path, wall: float, workers: int) -> dict:
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    rows = [
        {"id": _test_id(c), "seconds": round(float(c.get("time") or 0.0), 2)}
        for c in cases
        if c.find("skipped") is None
    ]
    rows.sort(key=lambda r: (-r["seconds"], r["id"]))
    by_file: dict[str, float] = {}
    for r in rows:
        f = r["id"].split("::")[0]
        by_file[f] = by_file.get(f, 0.0) + r["seconds"]
    return {
        "command": f"pytest -n {workers}",
        "workers": workers,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "wall_seconds": round(wall, 1),
        "budget_seconds": BUDGET,
        "tests": len(rows),
        "total_seconds": round(sum(r["seconds"] for r in rows), 1),
        "files": {f: round(s, 1) for f, s in sorted(by_file.items(), key=lambda kv: -kv[1])},
        "slowest": rows[:SLOWEST],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--junit", type=Path, help="a finished run's JUnit XML (needs --wall)")
    ap.add_argument("--wall", type=float, help="that run's wall time in seconds")
    ap.add_argument("-n", "--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.junit is not None:
        if args.wall is None:
            ap.error("--junit needs --wall (the run's wall time in seconds)")
        junit, wall = args.junit, args.wall
    else:
        junit = Path(tempfile.mkdtemp()) / "junit.xml"
        t0 = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "pytest", "-n", str(args.workers), "-q",
             "-p", "no:cacheprovider", f"--junitxml={junit}"],
            cwd=ROOT, check=False,
        )  # fmt: skip
        wall = time.monotonic() - t0
    rec = summarise(junit, wall, args.workers)
    args.out.write_text(json.dumps(rec, indent=1) + "\n")
    print(
        f"{rec['tests']} tests, {rec['total_seconds']:.0f} s of test time, "
        f"{rec['wall_seconds']:.0f} s wall on {args.workers} workers -> {args.out}"
    )
    for r in rec["slowest"][:10]:
        print(f"{r['seconds']:8.1f}  {r['id']}")
    if rec["wall_seconds"] > BUDGET:
        print(f"over budget: {rec['wall_seconds']:.0f} s > {BUDGET} s")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
