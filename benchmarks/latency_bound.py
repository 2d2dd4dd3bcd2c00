"""Wall time of an API-bound evaluation against its latency bound.

Starts the baseline server answering every request after a fixed delay, runs
``vical eval --backend openai-chat --model random`` over a task subset with N
parallel episodes, and prints the wall time next to the bound
``total turns x delay / concurrency`` (the time the model alone would take if
the episodes overlapped perfectly). A ratio close to 1 means the simulator,
rendering and logging add little on top of the model's latency.

    python benchmarks/latency_bound.py [--delay 0.2] [--workers 2] [--tasks 'taxi,cartpole']
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from vical.run import load_results, run_eval
from vical.serve import BaselineServer
from vical.spec import select_tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.2, help="server delay per request (s)")
    ap.add_argument("--workers", type=int, default=2, help="parallel episodes (concurrency)")
    ap.add_argument("--tasks", default="taxi/state1,taxi/state2,cartpole/seed41,acrobot/rest")
    args = ap.parse_args()
    server = BaselineServer("127.0.0.1", 0, seed=0, delay=args.delay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tasks = select_tasks(args.tasks)
    kwargs = {"endpoint": server.openai_base_url, "model": "random", "seed": 0}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        s = run_eval(
            tasks,
            Path(tmp) / "run",
            agent="openai-chat",
            agent_kwargs=kwargs,
            workers=args.workers,
            frames="none",
            progress=False,
        )
        wall = time.perf_counter() - t0
        results = load_results(Path(tmp) / "run")
    server.stop()
    turns = sum(server.counts.values())
    bound = turns * args.delay / args.workers
    print(
        f"episodes {len(results)} (failed {len(s.failed)}), decisions "
        f"{sum(r.steps for r in results)}, model requests {turns}"
    )
    print(f"delay {args.delay:.3f} s, concurrency {args.workers}")
    print(f"wall time   {wall:8.2f} s")
    print(f"bound       {bound:8.2f} s  (turns x delay / concurrency)")
    print(f"wall/bound  {wall / bound:8.2f}")


if __name__ == "__main__":
    main()
