"""Decisions per second: the raw simulator vs VicalEnv, per environment.

For each environment (its base task) this plays the same number of random
decisions twice:

* raw: the simulator object the adapter wraps (a Gymnasium env for every
  Gymnasium-registered family, the ALE env, ...), stepped ``frame_skip`` times
  per decision with native actions and rendered once per decision, resetting
  when an episode ends;
* vical: ``VicalEnv.step`` with canonical names (frame skip, NOOP fill,
  scoring, life-loss checks, a sha256 of every frame).

It prints both rates and their ratio (vical / raw; 1.0 means no overhead).
Usage: ``python benchmarks/env_overhead.py [--decisions 300] [--envs taxi,pong]``.
For trustworthy numbers run it under ``farm-bench``.
"""

from __future__ import annotations

import argparse
import os
import random
import time

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from vical.envs import make_env
from vical.spec import load_envs, select_tasks


def raw_rate(task, n: int) -> float:
    env = make_env(task)
    env.reset()
    adapter = env.adapter
    sim = getattr(adapter, "env", None)
    natives = list(task.env.actions.values())
    rng = random.Random(0)
    to_native = getattr(adapter, "native_index", lambda a: a)
    natives = [to_native(a) for a in natives]
    if sim is not None and hasattr(sim, "step"):

        def reset():
            sim.reset(seed=task.variant.seed)

        def step(a):
            return bool(sim.step(a)[2])

        render = sim.render
    else:  # no Gymnasium object behind the adapter: its own primitive step is the floor

        def reset():
            adapter.reset(task.variant.seed)

        def step(a):
            return adapter.act(a).terminated

        render = adapter.frame
    reset()
    t0 = time.perf_counter()
    done_steps = 0
    for _ in range(n):
        a = rng.choice(natives)
        ended = False
        for _slot in range(task.env.frame_skip):
            if ended:
                break
            ended = step(a)
        render()
        done_steps += 1
        if ended:
            reset()
    dt = time.perf_counter() - t0
    env.close()
    return done_steps / dt


def vical_rate(task, n: int) -> float:
    env = make_env(task)
    rng = random.Random(0)
    names = task.action_names
    env.reset()
    t0 = time.perf_counter()
    for _ in range(n):
        if env.done:
            env.reset()
        env.step(rng.choice(names))
    dt = time.perf_counter() - t0
    env.close()
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=300)
    ap.add_argument("--envs", default=None, help="comma-separated environment keys")
    args = ap.parse_args()
    keys = args.envs.split(",") if args.envs else sorted(load_envs())
    print(f"{'environment':16s} {'raw dec/s':>10s} {'vical dec/s':>12s} {'ratio':>6s}")
    for key in keys:
        task = next(t for t in select_tasks(key) if t.variant.kind == "base")
        raw = raw_rate(task, args.decisions)
        viv = vical_rate(task, args.decisions)
        print(f"{key:16s} {raw:10.1f} {viv:12.1f} {viv / raw:6.2f}", flush=True)


if __name__ == "__main__":
    main()
