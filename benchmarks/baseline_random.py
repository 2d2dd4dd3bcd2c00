"""Wall time of ``vical baseline random`` over every task that exists, then ``vical report``.

Runs the command line exactly as a maintainer would (3 runs per task, 2 workers,
no frames, as ``vical baseline random`` defaults) into a scratch folder, prints
the wall time of the baseline and of the report over it, and compares the
baseline time with the figure recorded below. Usage::

    python benchmarks/baseline_random.py [--tasks GLOBS] [--runs 3] [--workers 2] [--keep DIR]

Recorded figure (``RECORDED`` below, and benchmarks/README.md): 1026 episodes
(all 342 tasks x 3) in 126.8 s wall on 2 cores. The script scales the
figure per episode and prints whether a new run stays within it; re-measure
and update it when the task set or the simulators change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Measured with this script: tasks, episodes, baseline wall seconds, report wall seconds.
# 2026-12-01, development container, 2 cores, task data 405e20936d29 (the paper-fidelity
# version): all 342 tasks x 3 = 1026 episodes in 126.8 s, report over them in 3.2 s.
# The first release's task data took 480.6 s on 2 cores shared with other jobs (load
# average 3.6-10).
RECORDED = {
    "date": "2026-12-01",
    "tasks": 342,
    "episodes": 1026,
    "workers": 2,
    "baseline_seconds": 126.8,
    "report_seconds": 3.2,
}


def _vical() -> list[str]:
    exe = Path(sys.executable).with_name("vical")
    return (
        [str(exe)] if exe.exists() else [sys.executable, "-c", "from vical.cli import main; main()"]
    )


def _timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=None, help="Id globs (default: every task).")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", type=Path, default=None, help="Keep the run folder here.")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="vical-bench-"))
    run_dir = args.keep or scratch / "random-baseline"
    try:
        cmd = [*_vical(), "baseline", "random", "--out", str(run_dir), "--runs", str(args.runs)]
        cmd += ["--workers", str(args.workers)]
        if args.tasks:
            cmd += ["--tasks", args.tasks]
        t_base, proc = _timed(cmd)
        if proc.returncode != 0:
            print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n")
            print(f"baseline failed with exit code {proc.returncode}")
            return proc.returncode
        n_eps = len(list((run_dir / "episodes").glob("*/eval_result.json")))
        n_tasks = len(json.loads((run_dir / "manifest.json").read_text())["tasks"])
        t_rep, rep = _timed([*_vical(), "report", str(run_dir), "--out", str(scratch / "report")])
        if rep.returncode != 0:
            print(rep.stdout[-4000:], rep.stderr[-4000:], sep="\n")
            return rep.returncode
        print(rep.stdout)
        print(f"episodes: {n_eps} ({n_tasks} tasks x {args.runs}), workers {args.workers}")
        print(f"vical baseline random: {t_base:8.1f} s wall")
        print(f"vical report:          {t_rep:8.1f} s wall")
        rec = RECORDED.get("baseline_seconds")
        if rec and not args.tasks and args.runs == 3 and args.workers == RECORDED["workers"]:
            per_ep = rec / RECORDED["episodes"]
            budget = per_ep * n_eps
            verdict = "within" if t_base <= budget else "OVER"
            print(
                f"recorded figure: {rec:.0f} s for {RECORDED['episodes']} episodes "
                f"({per_ep:.2f} s/episode) -> budget {budget:.0f} s for {n_eps}: {verdict} "
                f"({t_base / budget:.2f} x the budget)"
            )
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
