"""What the portable float math costs: decisions per second with and without it.

For each float-physics environment whose simulator code vical routes through
``vical.envs.fpmath`` (highway, CartPole, Acrobot, MountainCar, Flappy Bird),
this plays the same random decisions from the base task's start in two child
processes, side by side and in alternation (``--rounds`` times each):

* ``portable``: vical as shipped (the simulators' float math rewritten);
* ``native``: the simulators' own code, numpy/libm/OpenBLAS as the CPU picks
  them (the rewrite is kept from happening by marking the modules as already
  done before the adapters import; only this script does that).

Each rate is the median of its rounds; the ratio is portable / native (1.0: no
cost). Usage: ``python benchmarks/fp_cost.py [--decisions 200] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ENVS = ("highway", "cartpole", "acrobot", "mountaincar", "flappybird")

CHILD = r"""
import json, os, random, sys, time
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
native, env_key, n = sys.argv[1] == "native", sys.argv[2], int(sys.argv[3])
from vical.envs import portable
if native:
    # the simulators' own float math: the adapters' rewrite of it is turned into nothing
    portable.install = lambda module_names: None
from vical.envs import make_env
from vical.spec import select_tasks
task = next(t for t in select_tasks(env_key) if t.variant.kind == "base")
env = make_env(task)
rng = random.Random(0)
env.reset()
for _ in range(5):  # warm the caches before timing
    env.step(rng.choice(task.action_names))
    if env.done:
        env.reset()
t0 = time.perf_counter()
for _ in range(n):
    env.step(rng.choice(task.action_names)).frame_sha256
    if env.done:
        env.reset()
dt = time.perf_counter() - t0
print(json.dumps({"rate": n / dt, "rewritten": sum(len(v) for v in portable.installed().values())}))
"""


def modules() -> list[str]:
    from vical.envs import classic, flappy, highway

    return [*highway.PORTABLE_MODULES, *classic.PORTABLE_MODULES, *flappy.PORTABLE_MODULES]


def run(mode: str, env_key: str, n: int) -> dict:
    code = f"MODULES = {modules()!r}\n" + CHILD
    out = subprocess.run(
        [sys.executable, "-c", code, mode, env_key, str(n)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SDL_VIDEODRIVER": "dummy"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--envs", default=",".join(ENVS))
    args = ap.parse_args()
    print(f"{'environment':<12} {'native dec/s':>13} {'portable dec/s':>15} {'ratio':>6}")
    for env_key in args.envs.split(","):
        rates: dict[str, list[float]] = {"native": [], "portable": []}
        for _ in range(args.rounds):
            for mode in ("native", "portable"):
                res = run(mode, env_key, args.decisions)
                if mode == "native":
                    assert res["rewritten"] == 0, "the native run was rewritten"
                else:
                    assert res["rewritten"] > 0, "the portable run was not rewritten"
                rates[mode].append(res["rate"])
        nat, por = statistics.median(rates["native"]), statistics.median(rates["portable"])
        print(f"{env_key:<12} {nat:>13.1f} {por:>15.1f} {por / nat:>6.2f}")


if __name__ == "__main__":
    main()
