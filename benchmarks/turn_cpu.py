"""Client CPU per turn of a model backend, with the task's demonstrations attached.

Starts the baseline server in its own process (``python -m vical.serve``), so
that the server's reading of each request is not counted, then plays long
conversations against it: one ``start`` with the task's demonstration package,
then one ``act`` per turn with a new frame each time (frames of a seeded
random playthrough of the task, the environment reset whenever it ends). The
figure is the client's CPU time (user + system, ``time.process_time``) spent
inside each ``act``: building the new message, rendering and hashing the
request, the SDK and the HTTP exchange; the simulator is outside the
measurement, and so is the time spent waiting for the server.

It prints, per backend, the median over the repeats at the chosen turns, and
the median and largest of turns 2 onwards. A per-turn cost that does not grow with the turn
index is the aim; turn 1 also encodes the demonstrations.

    python benchmarks/turn_cpu.py                             # openai-chat, 35 turns, 5 repeats
    python benchmarks/turn_cpu.py --backend all --repeats 3
    python benchmarks/turn_cpu.py --task taxi/state1 --turns 20 --at 1,5,20
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import numpy as np
from latency_bound import start_server  # the same child-process server (benchmarks/)

from vical.agent import EpisodeContext, Observation, get_agent
from vical.demos import load_demo_package
from vical.envs import frame_sha256, make_env
from vical.spec import TaskSpec, get_task

BACKENDS = ("openai-chat", "openai-responses", "openrouter", "gemini")
MODEL = {"gemini": "random"}  # every backend asks the server's random policy


def playthrough(task: TaskSpec, n: int, seed: int) -> list[np.ndarray]:
    """``n`` frames of random play, the environment reset whenever it ends."""
    rng = random.Random(seed)
    env = make_env(task)
    frames = [env.reset()]
    while len(frames) < n:
        if env.done:
            env.close()
            env = make_env(task)
            frames.append(env.reset())
            continue
        frames.append(env.step(rng.choice(task.action_names)).frame)
    env.close()
    return frames


def endpoint_for(backend: str, base: str) -> str:
    return base if backend == "gemini" else base + "/v1"


def one_conversation(
    backend: str, base: str, task: TaskSpec, demos: list[Any], frames: list[np.ndarray]
) -> list[float]:
    """CPU seconds of each ``act``."""
    agent = get_agent(
        backend,
        endpoint=endpoint_for(backend, base),
        model=MODEL.get(backend, "random"),
        format_retries=0,
        retry_base_delay=0.001,
    )
    agent.start(
        EpisodeContext(
            task=task,
            run_index=0,
            seed=0,
            action_names=task.action_names,
            max_steps=len(frames),
            demos=demos,
        )
    )
    cpu: list[float] = []
    previous: str | None = None
    gc.collect()
    for step, frame in enumerate(frames):
        obs = Observation(step, frame, frame_sha256(frame), previous)
        t0 = time.process_time()
        decision = agent.act(obs)
        cpu.append(time.process_time() - t0)
        if decision.action is None:
            raise SystemExit(f"{backend}: turn {step + 1} ended in {decision.failure}")
        previous = decision.action
    agent.close()
    return cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--backend", default="openai-chat", help=f"one of {', '.join(BACKENDS)}, or all"
    )
    ap.add_argument("--task", default="turmoil/lane-c", help="task whose demo package is attached")
    ap.add_argument("--turns", type=int, default=35, help="turns per conversation")
    ap.add_argument("--at", default="1,10,35", help="turns to report (1-based)")
    ap.add_argument("--repeats", type=int, default=5, help="conversations per backend")
    args = ap.parse_args()
    backends = BACKENDS if args.backend == "all" else (args.backend,)
    at = [int(x) for x in args.at.split(",")]
    if max(at) > args.turns or min(at) < 1:
        raise SystemExit(f"--at {args.at}: every turn must lie in 1..{args.turns}")
    task = get_task(args.task)
    demos = load_demo_package(task)
    frames = playthrough(task, args.turns, seed=0)
    n_demo_frames = sum(d.n_frames for d in demos)
    print(
        f"task {task.id}: {len(demos)} demos ({n_demo_frames} frames, "
        f"{sum(len(d.mp4) for d in demos)} MP4 bytes), {args.turns} turns, "
        f"{args.repeats} repeats; server in its own process"
    )
    proc, base = start_server(0.0)
    try:
        for backend in backends:
            runs = [
                one_conversation(backend, base, task, demos, frames) for _ in range(args.repeats)
            ]
            cells = []
            for turn in at:
                ms = statistics.median(r[turn - 1] for r in runs) * 1000
                cells.append(f"turn {turn}: {ms:6.1f} ms")
            rest = [statistics.median(r[i] for r in runs) * 1000 for i in range(1, args.turns)]
            print(
                f"{backend:17s} " + "  ".join(cells) + f"  | turns 2-{args.turns}: median "
                f"{statistics.median(rest):.1f} ms, max {max(rest):.1f} ms"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
