"""The experts the runtime plays with, re-runnable from data.

Both act through the task's own :class:`VicalEnv` and are scored by the benchmark's
own score and pass rule; the baseline model server (:mod:`vical.serve`) answers
with them:

- :func:`bfs_expert` — breadth-first search over decisions, states told apart
  by frame hash (grid worlds: Taxi, CliffWalking, MiniGrid);
- scripted controllers (:data:`CONTROLLERS`) where a one-line rule is enough
  (CartPole, MountainCar, Acrobot).

:class:`Sim` saves and restores state with :meth:`VicalEnv.snapshot`: the
adapter's own save/restore where a replay check shows it exact, else replay of
the decisions from reset. The experts only demo authoring uses (rollout search,
failure search, scripted and replayed play, the MiniGrid planner route) are in
:mod:`vical.authoring.experts`.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from vical.envs import make_env
from vical.envs.core import Step
from vical.envs.environment import Snapshot, VicalEnv
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


def result_of(sim: Sim, last: Step) -> ExpertResult:
    """The expert result of the play ``sim`` holds, ``last`` its last step."""
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
                    return result_of(sim, s)
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
