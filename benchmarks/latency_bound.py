"""Wall time of an API-bound evaluation against its latency bound, and client CPU per turn.

Starts the baseline server in its own process (``python -m vical.serve
--delay D``: every request is answered after D seconds), runs ``vical eval
--backend openai-chat --model random`` over a task subset with N parallel
episodes, and prints the wall time next to the bound ``model requests x D /
N`` (the time the model alone would take if the episodes overlapped
perfectly). A ratio close to 1 means the simulator, rendering and logging add
little on top of the model's latency.

CPU is reported per side, per model request: the client (this process and
its episode workers, measured when the workers have ended) and the server
(its own process, measured when it has ended), so neither side's work is
counted as the other's. The script exits 1 when wall / bound exceeds
``--max-ratio``.

    python benchmarks/latency_bound.py                      # 0.5 s, concurrency 8, taxi x 8 runs
    python benchmarks/latency_bound.py --delay 0.1 --workers 2 --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

from vical.run import RunOptions, load_results, run_eval
from vical.spec import select_tasks


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def start_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    """The baseline server in a child process on a free port; (process, URL)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vical.serve", "--port", "0", "--delay", str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    found = re.search(r"on (http://\S+)", first)
    if found is None:
        proc.terminate()
        raise SystemExit(f"the baseline server did not start: {first!r}")
    return proc, found.group(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.5, help="server delay per request (s)")
    ap.add_argument("--workers", type=int, default=8, help="parallel episodes (concurrency)")
    ap.add_argument("--tasks", default="taxi/*", help="task patterns")
    ap.add_argument("--runs", type=int, default=8, help="runs per task")
    ap.add_argument("--max-ratio", type=float, default=1.1, help="exit 1 above this wall/bound")
    args = ap.parse_args()
    tasks = select_tasks(args.tasks)
    client0 = cpu_seconds(resource.RUSAGE_SELF)
    children0 = cpu_seconds(resource.RUSAGE_CHILDREN)
    proc, url = start_server(args.delay)
    try:
        kwargs = {"endpoint": url + "/v1", "model": "random", "seed": 0}
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            s = run_eval(
                tasks,
                Path(tmp) / "run",
                agent="openai-chat",
                agent_kwargs=kwargs,
                options=RunOptions(
                    runs=args.runs, workers=args.workers, frames="none", progress=False
                ),
            )
            wall = time.perf_counter() - t0
            results = load_results(Path(tmp) / "run")
        # the episode workers have been reaped; the server is still running
        client = cpu_seconds(resource.RUSAGE_SELF) - client0
        client += cpu_seconds(resource.RUSAGE_CHILDREN) - children0
        with urllib.request.urlopen(url + "/stats", timeout=10) as r:
            turns = sum(json.load(r)["models"].values())
    finally:
        before = cpu_seconds(resource.RUSAGE_CHILDREN)
        proc.terminate()
        proc.wait(timeout=10)
    server = cpu_seconds(resource.RUSAGE_CHILDREN) - before
    bound = turns * args.delay / args.workers
    ratio = wall / bound
    print(
        f"episodes {len(results)} (failed {len(s.failed)}), decisions "
        f"{sum(r.steps for r in results)}, model requests {turns}"
    )
    print(f"delay {args.delay:.3f} s, concurrency {args.workers}")
    print(f"wall time   {wall:8.2f} s")
    print(f"bound       {bound:8.2f} s  (requests x delay / concurrency)")
    print(
        f"wall/bound  {ratio:8.2f}  ({'within' if ratio <= args.max_ratio else 'OVER'} "
        f"{args.max_ratio:g})"
    )
    print(
        f"client CPU  {client:8.2f} s  ({client / turns * 1000:.1f} ms per request: "
        "this process and its episode workers, start-up included)"
    )
    print(f"server CPU  {server:8.2f} s  ({server / turns * 1000:.1f} ms per request)")
    if ratio > args.max_ratio or s.failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
