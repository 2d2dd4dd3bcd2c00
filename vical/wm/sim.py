"""The simulator side of the world-model track: where a case starts and what truly follows.

A case's context state is named as data, never pickled: the task, the
demonstration clip whose start it plays from (or none: the task's own start
state) and the decisions played from that start (:class:`Origin`). Replaying
those decisions in a fresh environment brings the simulator back to the context
state exactly (the determinism invariant), so the ground truth of every
intervention can be re-derived at any time. While cases are built, the branches
of one context are played from one exact snapshot of that state
(:meth:`vical.envs.environment.VicalEnv.snapshot`), which is what makes them cheap.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from vical.envs import VicalEnv, make_env
from vical.spec import DemoClip, TaskSpec, load_envs
from vical.wm.state import sim_state

Frame = npt.NDArray[np.uint8]  # an RGB frame: height x width x 3

# a case's horizon is far below this: the decision budget never ends a branch
_NO_TIME_OUT = 10_000


# -- frames as PNG ---------------------------------------------------------------------
def encode_png(frame: Frame) -> bytes:
    """A frame as PNG bytes (fixed settings: the same frame always gives the same bytes)."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB").save(
        buf, format="PNG", compress_level=6
    )
    return buf.getvalue()


def decode_png(data: bytes, size: tuple[int, int] | None = None) -> Frame:
    """A PNG's pixels, its header checked first (:func:`vical.bounded.decode_image`: the
    frame ``size`` (width, height) when given, else at most a frame's pixel count);
    :class:`vical.bounded.MemberError` (a ValueError) otherwise."""
    from vical.bounded import decode_image

    return decode_image(data, "PNG", size)


def pixels_sha256(frame: Frame) -> str:
    """sha256 of a frame's pixels (shape, then bytes), independent of the PNG encoding."""
    arr = np.ascontiguousarray(frame, dtype=np.uint8)
    h = hashlib.sha256(f"{arr.shape}|".encode())
    h.update(arr.data)
    return h.hexdigest()


class BranchEndedError(RuntimeError):
    """An intervention ended the episode before its last action."""


@dataclass(frozen=True)
class Origin:
    """Where a context state comes from: a task, an optional demo clip, decisions played."""

    task: str
    clip: str | None
    prefix: tuple[str, ...]


@cache
def task_by_id(task_id: str) -> TaskSpec:
    """A task by id, reading the task files once per process."""
    env_key, _, variant = task_id.partition("/")
    envs = _envs()
    if env_key not in envs:
        raise KeyError(f"unknown environment {env_key!r} in task id {task_id!r}")
    for v in envs[env_key].tasks:
        if v.variant == variant:
            return TaskSpec(env=envs[env_key], variant=v)
    raise KeyError(f"unknown task {task_id!r}")


@cache
def _envs() -> dict[str, Any]:
    return load_envs()


def find_clip(task: TaskSpec, clip_id: str) -> DemoClip:
    """The demo clip ``clip_id`` of a task."""
    for clip in task.variant.demos:
        if clip.id == clip_id:
            return clip
    raise KeyError(f"{task.id} has no demo clip {clip_id!r}")


def origin_task(origin: Origin) -> TaskSpec:
    """The task whose start state is the origin's (the clip's start when it names one),
    with a decision budget that never cuts a branch short."""
    task = task_by_id(origin.task)
    update: dict[str, Any] = {"max_steps": _NO_TIME_OUT, "demos": []}
    if origin.clip is not None:
        clip = find_clip(task, origin.clip)
        update.update(
            seed=task.variant.seed if clip.seed is None else clip.seed,
            initial_skip=clip.initial_skip,
            init_actions=list(clip.init_actions),
            init_source=f"generated: demo clip {clip.id}" if clip.init_actions else None,
        )
    return TaskSpec(env=task.env, variant=task.variant.model_copy(update=update))


class ContextSim:
    """A simulator standing at a context state, able to play interventions from it.

    ``frames`` are the frames seen from the origin's start to the context state
    (the start frame, then one per decision of the prefix). :meth:`play` returns
    the frames after each action of an intervention and always starts from the
    context state (restored from a snapshot taken there).

    ``snapshot=False`` skips the snapshot (whose first use checks it with a few
    probe decisions): the first play starts from the live state and any later
    one replays the prefix. Worth it where one intervention is played per
    context (the controls, re-scoring).
    """

    def __init__(self, origin: Origin, snapshot: bool = True):
        self.origin = origin
        self.env: VicalEnv = make_env(origin_task(origin))
        self.frames: list[Frame] = []
        self._replay()
        self._snap = self.env.snapshot() if snapshot else None
        self._live = True  # the simulator stands at the context state

    def _replay(self) -> None:
        frames = [self.env.reset().copy()]
        for i, name in enumerate(self.origin.prefix):
            step = self.env.step(name)
            if step.done:
                self.env.close()
                raise BranchEndedError(
                    f"{self.origin.task}: the prefix ended the episode at decision {i} ({name})"
                )
            frames.append(step.frame.copy())
        self.frames = frames

    def _to_context(self) -> None:
        if self._live:
            self._live = False
        elif self._snap is not None:
            self.env.restore(self._snap)
        else:
            self._replay()

    def state(self) -> dict[str, Any]:
        """The simulator's state at the context (see :func:`vical.wm.state.sim_state`)."""
        self._to_context()
        return sim_state(self.env)

    def play(
        self, actions: Sequence[str], with_states: bool = False, hold_end: bool = False
    ) -> tuple[list[Frame], list[dict[str, Any]]]:
        """Frames (and, with ``with_states``, simulator states) after each action.

        Raises :class:`BranchEndedError` when the episode ends before the last action;
        with ``hold_end`` its last frame stands for the remaining actions instead (the
        reference world models' rollouts, which any action may end).
        """
        self._to_context()
        frames: list[Frame] = []
        states: list[dict[str, Any]] = []
        for i, name in enumerate(actions):
            if hold_end and frames and self.env.done:
                frames.append(frames[-1].copy())
                continue
            step = self.env.step(name)
            frames.append(step.frame.copy())
            if with_states:
                states.append(sim_state(self.env))
            # an ending on the last action is part of the truth; one before it is not
            if step.done and i < len(actions) - 1 and not hold_end:
                raise BranchEndedError(
                    f"{self.origin.task}: the intervention ended the episode at action {i}"
                )
        return frames, states

    def play_noop(self, steps: int) -> list[Frame]:
        """Frames of ``steps`` decisions in which no decision is taken: the no-op
        control's target (:mod:`vical.wm.controls`).

        Where the environment has a NOOP action it is stepped (a real-time world
        goes on moving); an environment without one (Toy Text, MiniGrid, Tetris)
        changes only when a decision is taken, so its no-op transition is the
        identity (the context frame repeated). A native ending stops the
        simulator; its last frame is repeated for the remaining steps.
        """
        self._to_context()
        last = self.frames[-1]
        noop = self.env.noop
        if noop is None:
            return [last.copy() for _ in range(steps)]
        adapter = self.env.adapter
        out: list[Frame] = []
        ended = False
        for _ in range(steps):
            if not ended:
                for _slot in range(self.env.frame_skip):
                    if adapter.act(noop).terminated:
                        ended = True
                        break
                last = np.ascontiguousarray(adapter.frame()).copy()
            out.append(last.copy())
        return out

    def close(self) -> None:
        self.env.close()

    def __enter__(self) -> ContextSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
