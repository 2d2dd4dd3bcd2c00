"""The experts the runtime plays with, re-runnable from data.

Both act through the task's own :class:`VicalEnv` and are scored by the benchmark's
own score and pass rule; the baseline model server (:mod:`vical.serve`) answers
with them:

- :func:`bfs_expert` — breadth-first search over decisions, states told apart
  by frame hash (grid worlds: Taxi, CliffWalking, MiniGrid);
- scripted controllers where a one-line rule is enough (:func:`controller_for`:
  a game module's ``controller``, as CartPole's, MountainCar's and Acrobot's).

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
from typing import TYPE_CHECKING, cast

from vical.envs import game_module, make_env
from vical.envs.core import Step
from vical.envs.environment import Snapshot, VicalEnv
from vical.spec import EnvSpec, TaskSpec

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


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
# scripted controllers: a game module's controller(env) -> action name
# ---------------------------------------------------------------------------
CONTROLLER_HOOK = "controller"


def controller_for(spec: EnvSpec) -> Callable[[VicalEnv], str] | None:
    """The environment's scripted controller, ``controller(env) -> action name`` in its
    game module (Classic Control's read the native state), or None."""
    ctl = getattr(game_module(spec), CONTROLLER_HOOK, None)
    return cast("Callable[[VicalEnv], str]", ctl) if callable(ctl) else None
