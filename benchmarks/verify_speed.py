"""Replay verification time of a random-reference bundle next to the run's own time.

Runs the random reference (3 runs per task by default) into a scratch folder,
bundles it, verifies it by replay, and prints both wall times and their ratio
(verify / run). Usage::

    python benchmarks/verify_speed.py [--tasks 'taxi,pong'] [--runs 3] [--workers 2]

Without ``--tasks`` it covers every task (the full random reference).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from vical.run import run_eval
from vical.spec import select_tasks
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.verify import verify_bundle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    args = ap.parse_args()
    tasks = select_tasks(args.tasks)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        priv, pub = keygen(d / "key")
        t0 = time.perf_counter()
        run_eval(
            tasks,
            d / "run",
            runs=args.runs,
            workers=args.workers,
            frames="none",
            demos=False,
            progress=False,
        )
        t_run = time.perf_counter() - t0
        make_bundle(d / "run", priv, d / "b.tar.gz", team="bench", partial=True)
        t0 = time.perf_counter()
        v = verify_bundle(d / "b.tar.gz", pubkeys=[pub], workers=args.workers, progress=False)
        t_verify = time.perf_counter() - t0
    n = len(tasks) * args.runs
    print(f"episodes: {n} ({len(tasks)} tasks x {args.runs}), workers {args.workers}")
    print(f"run (random agent, no frames saved): {t_run:8.1f} s")
    print(
        f"verify (replay every episode):       {t_verify:8.1f} s  verdict "
        f"{'PASS' if v.ok else 'FAIL'}"
    )
    print(f"ratio verify / run:                  {t_verify / t_run:8.2f}")


if __name__ == "__main__":
    main()
