"""The experts only demo authoring uses, on top of :mod:`vical.demos.experts`.

All act through the task's own :class:`~vical.envs.environment.VicalEnv` and are scored by
the benchmark's own score and pass rule:

- :func:`search_expert` — receding-horizon rollout search using the simulator's
  own save/restore (:class:`~vical.demos.experts.Sim`), for any environment;
- :func:`failure_search` — seeded random play that loses, for clips that show how
  the game is lost; :func:`hold_expert` — one action held to the end;
- :func:`run_policy` — a scripted policy played to the end (the Classic Control
  controllers, :func:`vical.demos.experts.controller_for`, held sequences);
- :func:`replay_actions` — a fixed action list played from the task's start;
- :func:`planner_route` — the MiniGrid planner's shortest route.

The runtime's own experts (:func:`~vical.demos.experts.bfs_expert`, the scripted
controllers) and :class:`~vical.demos.experts.ExpertResult` stay in
:mod:`vical.demos.experts`, which the baseline model server uses.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from vical.demos.experts import ExpertResult, Sim, result_of
from vical.envs import make_env
from vical.envs.core import Step
from vical.envs.environment import VicalEnv
from vical.spec import TaskSpec


def _value(s: Step) -> tuple[bool, bool, float]:
    """Order of preference: passed, not lost, higher score (then, by the caller, longer alive)."""
    lost = s.done and not s.passed and s.outcome == "Terminated"
    return (s.passed, not lost, s.score)


def search_expert(
    task: TaskSpec,
    *,
    rollouts: int = 6,
    depth: int = 10,
    hold: int = 3,
    seed: int = 0,
) -> ExpertResult:
    """Receding-horizon rollout search with the simulator's save/restore.

    At each decision every action is tried, each followed by ``rollouts``
    random continuations of ``depth`` decisions (random actions held for up
    to ``hold`` decisions); the action whose best continuation has the best
    (passed, alive, score) is taken. Seeded, so the result is reproducible.
    """
    rng = random.Random(seed)
    sim = Sim(task)
    names = sim.env.action_names
    try:
        sim.reset()
        last: Step | None = None
        while not sim.done:
            root = sim.save()
            best: tuple[bool, bool, float, int] | None = None
            best_a = names[0]
            for a in names:
                sim.restore(root)
                s = sim.step(a)
                val: tuple[bool, bool, float, int] | None = (*_value(s), len(sim.history))
                if not s.done:
                    # the action is worth its best continuation, not its first step
                    after = sim.save()
                    val = None
                    for _ in range(rollouts):
                        sim.restore(after)
                        r = s
                        cur, left = rng.choice(names), 0
                        for _ in range(depth):
                            if sim.done:
                                break
                            if left <= 0:
                                cur, left = rng.choice(names), rng.randint(1, hold)
                            r = sim.step(cur)
                            left -= 1
                        v = (*_value(r), len(sim.history))
                        val = v if val is None else max(val, v)
                if best is None or (val is not None and val > best):
                    best, best_a = val, a
            sim.restore(root)
            last = sim.step(best_a)
        assert last is not None
        return result_of(sim, last)
    finally:
        sim.close()


def failure_search(
    task: TaskSpec, *, tries: int = 48, target_len: int = 12, hold: int = 4, seed: int = 0
) -> ExpertResult | None:
    """A random-play trajectory that loses (ends Terminated without passing).

    Among ``tries`` seeded random trajectories (actions held for up to ``hold``
    decisions), the one whose length is closest to ``target_len`` is kept.
    """
    rng = random.Random(seed)
    best: ExpertResult | None = None
    sim = Sim(task, method="replay")
    names = sim.env.action_names
    try:
        for _ in range(tries):
            sim.reset()
            s: Step | None = None
            cur, left = rng.choice(names), 0
            while not sim.done:
                if left <= 0:
                    cur, left = rng.choice(names), rng.randint(1, hold)
                s = sim.step(cur)
                left -= 1
            assert s is not None
            if s.outcome == "Terminated" and not s.passed:
                r = result_of(sim, s)
                if best is None or abs(len(r.actions) - target_len) < abs(
                    len(best.actions) - target_len
                ):
                    best = r
        return best
    finally:
        sim.close()


def hold_expert(task: TaskSpec, action: str) -> ExpertResult:
    """Hold one action until the episode ends (shows what a naive policy leads to)."""
    return run_policy(task, lambda env: action)


def run_policy(task: TaskSpec, policy: Callable[[VicalEnv], str]) -> ExpertResult:
    """Run a scripted policy (reads the environment, returns an action name) to the end."""
    sim = Sim(task, method="replay")
    try:
        sim.reset()
        s: Step | None = None
        while not sim.done:
            s = sim.step(policy(sim.env))
        assert s is not None
        return result_of(sim, s)
    finally:
        sim.close()


# ---------------------------------------------------------------------------
# grid-world planner experts (MiniGrid: exact model, shortest route)
# ---------------------------------------------------------------------------
def planner_route(task: TaskSpec) -> list[str]:
    """The MiniGrid planner's shortest route from the task's start (after its init actions)."""
    from vical.envs.minigrid import plan

    env = make_env(task)
    try:
        env.reset()
        return plan(env)
    finally:
        env.close()


def replay_actions(task: TaskSpec, actions: list[str]) -> ExpertResult:
    """Play ``actions`` from the task's start, stopping early if the episode ends."""
    env = make_env(task)
    try:
        env.reset()
        done: list[str] = []
        s: Step | None = None
        for a in actions:
            if env.done:
                break
            s = env.step(a)
            done.append(a)
        if s is None:
            return ExpertResult([], "", 0.0, False)
        return ExpertResult(done, s.outcome or "", s.score, s.passed)
    finally:
        env.close()
