"""World-model track: wall time of building every case and of one control run over them.

Builds the 400 cases (``vical wm build``) and runs one control model over all of
them (``vical wm eval``, copy-last under the cases' own interventions by default)
on ``--workers`` processes of the shared pool, and prints each wall time, the CPU
time of this process and its workers, the load average before and after, and the
ratio of each wall time to its target (3 minutes to build, 5 to evaluate). It
also checks that the evaluation's summary lists every case. Usage::

    python benchmarks/wm_speed.py                      # 2 workers, copy-last
    python benchmarks/wm_speed.py --workers 1          # the same in one process
    python benchmarks/wm_speed.py --model simulator --control noop
    python benchmarks/wm_speed.py --keep out/          # keep the case and run folders
    python benchmarks/wm_speed.py --cases out/cases    # time the evaluation only

Timings are printed, never asserted: the machine may be shared, so read them with
the load average beside them.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from vical.run.pool import run_pool
from vical.wm.cases import build
from vical.wm.evaluate import evaluate

BUILD_TARGET = 180.0  # seconds, all 400 cases on 2 cores
EVAL_TARGET = 300.0  # seconds, one control over all 400 cases on 2 cores


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its finished workers."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def timed(label: str, target: float, work: Callable[[], object]) -> float:
    """Run ``work()``; print its wall and CPU seconds, the load and the ratio to ``target``."""
    before = load()
    c0, t0 = cpu_seconds(), time.perf_counter()
    work()
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    print(
        f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU (CPU / wall {cpu / wall:.2f}); "
        f"target {target:.0f} s, wall / target {wall / target:.2f}; "
        f"load average (1/5/15 min) {before} before, {load()} after",
        flush=True,
    )
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--model", default="copy-last", help="a control model: copy-last, simulator")
    ap.add_argument("--control", default="own", help="own, noop or shuffled")
    ap.add_argument("--cases", type=Path, help="an existing case folder: time the evaluation only")
    ap.add_argument("--keep", type=Path, help="build and evaluate into this folder and keep it")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="wm-speed-")) if args.keep is None else args.keep
    try:
        cases = args.cases or root / "cases"
        print(f"{os.cpu_count()} cores, {args.workers} workers", flush=True)
        if args.cases is None:
            timed(
                f"build 400 cases (-j {args.workers})",
                BUILD_TARGET,
                lambda: build(cases, workers=args.workers, pool=run_pool),
            )
        summary: dict[str, object] = {}
        label = f"{args.model}, {args.control} intervention"

        def run() -> None:
            summary.update(
                evaluate(
                    args.model,
                    cases,
                    root / "run",
                    control=args.control,
                    workers=args.workers,
                    pool=run_pool,
                )
            )

        timed(f"evaluate {label} (-j {args.workers})", EVAL_TARGET, run)
        print(f"{summary['cases']} cases scored", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
