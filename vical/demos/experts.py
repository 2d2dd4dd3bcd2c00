"""Expert policies that produce demo action sequences, re-runnable from data.

Three kinds of expert, all acting through the task's own :class:`VicalEnv` and
scored by the benchmark's own score and pass rule:

- :func:`bfs_expert` — breadth-first search over decisions, states told apart
  by frame hash (grid worlds: Taxi, CliffWalking, MiniGrid);
- :func:`search_expert` — receding-horizon rollout search using the
  simulator's own save/restore (:class:`Sim`), for any environment;
- scripted controllers (:data:`CONTROLLERS`) where a one-line rule is enough
  (CartPole, MountainCar, Acrobot), plus :func:`hold_expert` (one action held)
  and :func:`failure_search` for clips that show how the game is lost.

:class:`Sim` saves and restores state with :meth:`VicalEnv.snapshot`: the
adapter's own save/restore where a replay check shows it exact, else replay of
the decisions from reset.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from vical.envs import make_env
from vical.envs.core import Snapshot, Step, VicalEnv
from vical.spec import TaskSpec

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from vical.envs.gymbase import GymAdapter


class Sim:
    """A task environment that keeps its action history, with save/restore.

    Snapshots are :meth:`VicalEnv.snapshot`: the adapter's own exact save/restore,
    checked once per environment, or replay from reset where that check fails.
    ``method`` tells which ("snapshot" or "replay").
    """

    def __init__(self, task: TaskSpec, method: str = "auto"):
        self.task = task
        self.env: VicalEnv = make_env(task)
        self.history: list[str] = []
        if method == "auto":
            self._probe()

    def _probe(self) -> None:
        """Take the first snapshot a few seeded decisions in, which checks the method."""
        rng = random.Random(12345)
        self.reset()
        for _ in range(3):
            if self.done:
                break
            self.step(rng.choice(self.env.action_names))
        if not self.done:
            self.env.snapshot()

    @property
    def method(self) -> str:
        return "replay" if self.env.snapshot_exact is False else "snapshot"

    # -- plain use ---------------------------------------------------------
    def reset(self) -> npt.NDArray[np.uint8]:
        self.history = []
        return self.env.reset()

    def step(self, action: str) -> Step:
        s = self.env.step(action)
        self.history.append(action)
        return s

    @property
    def done(self) -> bool:
        return self.env.done

    def close(self) -> None:
        self.env.close()

    # -- snapshots ---------------------------------------------------------
    def save(self) -> tuple[Snapshot, list[str]]:
        return self.env.snapshot(), list(self.history)

    def restore(self, snap: tuple[Snapshot, list[str]]) -> None:
        state, history = snap
        self.env.restore(state)
        self.history = list(history)


# ---------------------------------------------------------------------------
# experts
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ExpertResult:
    actions: list[str]
    outcome: str
    score: float
    passed: bool


def _result(sim: Sim, last: Step) -> ExpertResult:
    return ExpertResult(list(sim.history), last.outcome or "", last.score, last.passed)


def bfs_expert(task: TaskSpec, max_nodes: int = 200_000) -> ExpertResult | None:
    """Shortest action sequence that passes the task (BFS, states keyed by frame hash)."""
    sim = Sim(task)
    try:
        sim.reset()
        root = sim.save()
        seen = {_hash(sim)}
        queue: deque[tuple[Snapshot, list[str]]] = deque([root])
        nodes = 0
        while queue and nodes < max_nodes:
            snap = queue.popleft()
            for a in sim.env.action_names:
                sim.restore(snap)
                s = sim.step(a)
                nodes += 1
                if s.passed and s.done:
                    return _result(sim, s)
                if s.done or s.frame_sha256 in seen:
                    continue
                seen.add(s.frame_sha256)
                queue.append(sim.save())
        return None
    finally:
        sim.close()


def _hash(sim: Sim) -> str:
    from vical.envs import frame_sha256

    return frame_sha256(sim.env.frame)


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
        return _result(sim, last)
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
                r = _result(sim, s)
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
        return _result(sim, s)
    finally:
        sim.close()


# ---------------------------------------------------------------------------
# scripted controllers (classic control): read the native state, pick an action
# ---------------------------------------------------------------------------
def _native_state(env: VicalEnv) -> Any:
    # a classic-control env (CartPole, Acrobot, MountainCar): its ``state`` array
    native: Any = cast("GymAdapter", env.adapter).env.unwrapped
    return native.state


def cartpole_policy(env: VicalEnv) -> str:
    """Push toward the side the pole leans to (angle plus a share of its angular velocity)."""
    _x, _v, theta, omega = _native_state(env)
    return "Push Right" if theta + 0.5 * omega > 0 else "Push Left"


def mountaincar_policy(env: VicalEnv) -> str:
    """Accelerate in the direction of motion (pumps energy into the swing)."""
    _pos, vel = _native_state(env)
    return "Accelerate Right" if vel >= 0 else "Accelerate Left"


def acrobot_policy(env: VicalEnv) -> str:
    """Torque against the first joint's angular velocity.

    The elbow then bends against the swing, which pumps energy into it; this
    reached the goal line in about 40 decisions from the seeds we tried, where
    torque along the first joint's velocity stalls below it.
    """
    _t1, _t2, dt1, _dt2 = _native_state(env)
    return "Torque -1" if dt1 >= 0 else "Torque +1"


CONTROLLERS: dict[str, Callable[[VicalEnv], str]] = {
    "cartpole": cartpole_policy,
    "mountaincar": mountaincar_policy,
    "acrobot": acrobot_policy,
}


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
