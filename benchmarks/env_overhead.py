"""Decisions per second: the raw simulator vs VicalEnv, per environment.

For each environment (its base task) this plays the same number of random
decisions twice:

* raw: the simulator object the adapter wraps (a Gymnasium env for every
  Gymnasium-registered family, the ALE env, ...), stepped ``frame_skip`` times
  per decision with native actions (``unit_steps`` simulator steps per slot
  where the adapter plays several, as Tennis does) and rendered once per
  decision (MiniGrid, built without a render mode: its own ``get_frame`` at the
  adapter's tile size), resetting when an episode ends;
* vical: ``VicalEnv.step`` with canonical names (frame skip, NOOP fill,
  scoring, life-loss checks, a sha256 of every frame), resetting to the task's
  start state when an episode ends (its own ending rules and life-loss
  termination end episodes more often than the raw game does).

The two columns are timed in alternation, ``--rounds`` times each (raw, vical,
raw, vical, ...), and each rate is the median of its rounds, so a machine whose
speed drifts during the run slows both columns alike. The hash of a frame is
computed when a caller reads ``Step.frame_sha256`` (runs and verification do, on
every decision); the ``+sha256`` column reads it on every decision too, so it is
the rate a run's simulator side sees. It prints the rates, the number of resets
each column made inside the timed loop (resets are part of the cost: a vical reset restores the start state saved
by an earlier one, a raw reset seeds the simulator again) and the ratio of the
rates (vical / raw; 1.0 means no overhead). With ``VICAL_REPLAY_STARTS=1`` in
the environment every vical reset replays the start instead (the slow path).
Usage: ``python benchmarks/env_overhead.py [--decisions 300] [--rounds 3] [--envs taxi,pong]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from vical.envs import make_env
from vical.spec import load_envs, select_tasks


def raw_rate(task, n: int) -> tuple[float, int]:
    env = make_env(task)
    env.reset()
    adapter = env.adapter
    sim = getattr(adapter, "env", None)
    natives = list(task.env.actions.values())
    rng = random.Random(0)
    to_native = getattr(adapter, "native_index", lambda a: a)
    natives = [to_native(a) for a in natives]
    units = int(getattr(adapter, "unit_steps", 1))
    if sim is not None and hasattr(sim, "step"):

        def reset():
            sim.reset(seed=task.variant.seed)

        def step(a):
            # stops at the first step that ends the episode (any() short-circuits)
            return any(sim.step(a)[2] for _ in range(units))

        render = sim.render
        if sim.render() is None and hasattr(sim.unwrapped, "get_frame"):
            # MiniGrid builds its simulator without a render mode (render() draws
            # nothing): its own RGB rendering of the map at the adapter's tile size
            # is the raw frame
            tile = getattr(adapter, "tile", 32)

            def render():
                return sim.unwrapped.get_frame(highlight=True, tile_size=tile)
    else:  # no Gymnasium object behind the adapter: its own primitive step is the floor

        def reset():
            adapter.reset(task.variant.seed)

        def step(a):
            return adapter.act(a).terminated

        render = adapter.frame
    reset()
    t0 = time.perf_counter()
    done_steps = 0
    resets = 0
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
            resets += 1
    dt = time.perf_counter() - t0
    env.close()
    return done_steps / dt, resets


def vical_rate(task, n: int, hashed: bool = False) -> tuple[float, int]:
    env = make_env(task)
    rng = random.Random(0)
    names = task.action_names
    env.reset()
    t0 = time.perf_counter()
    resets = 0
    for _ in range(n):
        if env.done:
            env.reset()
            resets += 1
        s = env.step(rng.choice(names))
        if hashed:
            s.frame_sha256  # noqa: B018 - computed on access
    dt = time.perf_counter() - t0
    env.close()
    return n / dt, resets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3, help="alternating timings per column")
    ap.add_argument("--envs", default=None, help="comma-separated environment keys")
    args = ap.parse_args()
    keys = args.envs.split(",") if args.envs else sorted(load_envs())
    print(
        f"{'environment':14s} {'raw dec/s':>9s} {'resets':>6s} {'vical dec/s':>11s} "
        f"{'resets':>6s} {'ratio':>5s} {'+sha256':>7s} {'ratio':>5s}"
    )
    for key in keys:
        task = next(t for t in select_tasks(key) if t.variant.kind == "base")
        raws, vivs, hashed = [], [], []
        for _ in range(args.rounds):
            raws.append(raw_rate(task, args.decisions))
            vivs.append(vical_rate(task, args.decisions))
            hashed.append(vical_rate(task, args.decisions, hashed=True))
        raw = statistics.median(r for r, _ in raws)
        viv = statistics.median(r for r, _ in vivs)
        hsh = statistics.median(r for r, _ in hashed)
        print(
            f"{key:14s} {raw:9.1f} {raws[0][1]:6d} {viv:11.1f} {vivs[0][1]:6d} "
            f"{viv / raw:5.2f} {hsh:7.1f} {hsh / raw:5.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
