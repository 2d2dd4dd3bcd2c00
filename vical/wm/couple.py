"""Coupled evaluation: an agent that sees a world model's imagined rollouts before each move.

``vical wm couple`` plays tasks exactly as ``vical eval`` does (same runner,
same run folder, same bundle and verification), with one addition at every
decision: before the agent answers, a world model imagines, for each
*candidate* action, the frames that would follow playing that action
``horizon`` times in a row from the current state. A model backend shows those
imagined frames in the turn's message (:func:`vical.agent.messages.imagination_parts`);
the action it then chooses is played in the real simulator. Running the same
tasks with a perfect world model (``simulator``), with persistence
(``copy-last``) and with a model under test (``http``) separates what the
planner loses from what the world model loses.

The condition (:class:`Coupling`) is recorded in the run manifest as
``world_model``. The candidates of a decision are a pure function of the
task's action vocabulary, the limit, the episode seed and the step
(:func:`candidate_actions`). Every world-model reply is logged: the episode's
``log.jsonl`` holds one ``imagined`` record per decision, before the agent's
records, listing each candidate's intervention and, per imagined frame, the
sha256 of its pixels (:func:`vical.envs.core.frame_sha256`) and of its PNG,
which is stored in the episode's ``media/`` folder. ``vical verify`` reads the
PNGs back (:func:`check_imagined`), checks what each world model's frames must
be where that is known (``copy-last``: the current frame; ``simulator``:
re-derived by replay, :func:`resimulate`), and rebuilds every request the agent
sent, imagined frames included, from those logged replies.
"""

from __future__ import annotations

import hashlib
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from vical.envs import VicalEnv, make_env
from vical.envs.core import frame_sha256
from vical.spec import TaskSpec
from vical.wm.cases import CONTEXT_FRAMES
from vical.wm.sim import decode_png, encode_png

WORLD_MODELS = ("simulator", "copy-last", "http")
RECORD = "imagined"
MAX_HORIZON = 16


@dataclass(frozen=True)
class Coupling:
    """The coupled condition: which world model, how far it imagines, how many candidates.

    ``candidates`` None: every legal action is a candidate. ``endpoint``: the URL of an
    ``http`` world model (recorded redacted; it does not change what is verified).
    """

    world_model: str
    horizon: int = 1
    candidates: int | None = None
    endpoint: str | None = None

    def __post_init__(self) -> None:
        if self.world_model not in WORLD_MODELS:
            raise ValueError(
                f"world model {self.world_model!r} is not one of {', '.join(WORLD_MODELS)}"
            )
        if not 1 <= self.horizon <= MAX_HORIZON:
            raise ValueError(
                f"horizon {self.horizon} is not between 1 and {MAX_HORIZON} (try --horizon 1)"
            )
        if self.candidates is not None and self.candidates < 1:
            raise ValueError(f"candidates {self.candidates} must be at least 1 (or every action)")
        if self.world_model == "http" and not (self.endpoint or "").startswith(
            ("http://", "https://")
        ):
            raise ValueError(
                f"the http world model needs an http:// or https:// endpoint, not "
                f"{self.endpoint!r} (for example --wm-endpoint http://127.0.0.1:8000)"
            )

    def manifest(self, redact: Callable[[str], str | None] = str) -> dict[str, Any]:
        """The run manifest's ``world_model`` entry, the endpoint passed through
        ``redact`` (the caller's :func:`vical.agent.redact.redact_url`)."""
        return {
            "name": self.world_model,
            "horizon": self.horizon,
            "candidates": self.candidates,
            "endpoint": redact(self.endpoint) if self.endpoint else None,
        }

    @classmethod
    def from_manifest(cls, entry: Any) -> Coupling:
        """The condition a manifest's ``world_model`` entry declares (ValueError: malformed)."""
        if not isinstance(entry, dict) or set(entry) != {
            "name",
            "horizon",
            "candidates",
            "endpoint",
        }:
            raise ValueError("world_model must be {name, horizon, candidates, endpoint}")
        horizon, cands = entry["horizon"], entry["candidates"]
        if type(horizon) is not int or not (cands is None or type(cands) is int):
            raise ValueError("world_model horizon and candidates must be whole numbers")
        name = entry["name"]
        endpoint = entry["endpoint"]
        if name == "http" and not isinstance(endpoint, str):
            raise ValueError("an http world model names its endpoint")
        return cls(str(name), horizon, cands, endpoint if name == "http" else None)


# result-changing parts of the condition: what must agree to resume a run or verify one
def result_condition(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {k: v for k, v in entry.items() if k != "endpoint"}


def candidate_actions(
    action_names: Sequence[str], limit: int | None, seed: int, step: int
) -> list[str]:
    """The candidate actions of one decision, in vocabulary order: every action, or
    ``limit`` of them drawn from a generator seeded by the episode seed and the step."""
    names = list(action_names)
    if limit is None or limit >= len(names):
        return names
    rng = random.Random(f"vical-couple:{seed}:{step}")
    chosen = set(rng.sample(range(len(names)), limit))
    return [a for i, a in enumerate(names) if i in chosen]


@dataclass(frozen=True)
class Rollout:
    """One candidate's imagined rollout: the action, the intervention, the frames."""

    action: str
    intervention: list[str]
    frames: list[npt.NDArray[np.uint8]]


class Imaginer(ABC):
    """A world model in a coupled episode: told each real move, asked for rollouts."""

    def __init__(self, task: TaskSpec, coupling: Coupling):
        self.task = task
        self.coupling = coupling

    def observe(self, action: str) -> None:  # noqa: B027 - optional hook
        """The real simulator played ``action``."""

    @abstractmethod
    def predict(
        self,
        step: int,
        frames: list[npt.NDArray[np.uint8]],
        actions: list[str],
        intervention: list[str],
    ) -> list[npt.NDArray[np.uint8]]:
        """One frame per action of ``intervention``, from the current state (``frames``:
        every real frame so far, ``actions``: the moves between them)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""


class CopyLastImaginer(Imaginer):
    """Persistence: every imagined frame is the current frame."""

    def predict(
        self,
        step: int,
        frames: list[npt.NDArray[np.uint8]],
        actions: list[str],
        intervention: list[str],
    ) -> list[npt.NDArray[np.uint8]]:
        return [frames[-1] for _ in intervention]


def play_from(env: VicalEnv, intervention: Sequence[str]) -> list[npt.NDArray[np.uint8]]:
    """Frames after each action from the env's state; once the episode ends, its last
    frame stands for the remaining actions (a perfect model of an ended game)."""
    out: list[npt.NDArray[np.uint8]] = []
    for name in intervention:
        if not env.done:
            env.step(name)
        out.append(np.ascontiguousarray(env.frame).copy())
    return out


class SimulatorImaginer(Imaginer):
    """The simulator itself: a second environment kept at the real state, restored from
    a snapshot after each imagined rollout."""

    def __init__(self, task: TaskSpec, coupling: Coupling):
        super().__init__(task, coupling)
        self.env = make_env(task)
        self.env.reset()

    def observe(self, action: str) -> None:
        self.env.step(action)

    def predict(
        self,
        step: int,
        frames: list[npt.NDArray[np.uint8]],
        actions: list[str],
        intervention: list[str],
    ) -> list[npt.NDArray[np.uint8]]:
        snap = self.env.snapshot()
        try:
            return play_from(self.env, intervention)
        finally:
            self.env.restore(snap)

    def close(self) -> None:
        self.env.close()


class HttpImaginer(Imaginer):
    """A world model behind an endpoint speaking :mod:`vical.wm.protocol`; its context is
    the last real frames (up to :data:`vical.wm.cases.CONTEXT_FRAMES`) and the moves
    between them."""

    def __init__(self, task: TaskSpec, coupling: Coupling, timeout: float = 120.0):
        super().__init__(task, coupling)
        assert coupling.endpoint is not None
        self.endpoint = coupling.endpoint.rstrip("/")
        self.timeout = timeout

    def predict(
        self,
        step: int,
        frames: list[npt.NDArray[np.uint8]],
        actions: list[str],
        intervention: list[str],
    ) -> list[npt.NDArray[np.uint8]]:
        from vical.wm.cases import Request
        from vical.wm.protocol import post_predict

        context = frames[-CONTEXT_FRAMES:]
        request = Request(
            case=f"{self.task.id}@{step}",
            env=self.task.env.env,
            actions=list(self.task.action_names),
            context=context,
            context_actions=actions[len(actions) - (len(context) - 1) :] if actions else [],
            intervention=list(intervention),
        )
        return post_predict(self.endpoint, request, self.timeout)


def preflight(coupling: Coupling, task: TaskSpec, timeout: float = 30.0) -> None:
    """For an ``http`` world model: one request from the task's start frame, so that an
    endpoint that is down or off the protocol stops the run before its first episode
    (raises :class:`vical.wm.protocol.ProtocolError`); nothing for the others."""
    if coupling.world_model != "http":
        return
    with make_env(task) as env:
        frame = env.reset().copy()
    model = HttpImaginer(task, coupling, timeout)
    model.predict(0, [frame], [], [task.action_names[0]] * coupling.horizon)


_IMAGINERS: dict[str, type[Imaginer]] = {
    "simulator": SimulatorImaginer,
    "copy-last": CopyLastImaginer,
    "http": HttpImaginer,
}


class Imagination:
    """The world-model side of one coupled episode (the runner drives it).

    :meth:`imagine` asks the world model for every candidate's rollout and returns
    the rollouts, the ``imagined`` record for the log and the PNG files for
    ``media/``; :meth:`observe` tells it the move the real simulator played.
    """

    def __init__(self, task: TaskSpec, coupling: Coupling, seed: int):
        self.task = task
        self.coupling = coupling
        self.seed = seed
        self.model = _IMAGINERS[coupling.world_model](task, coupling)

    def imagine(
        self, step: int, frames: list[npt.NDArray[np.uint8]], actions: list[str]
    ) -> tuple[list[Rollout], dict[str, Any], dict[str, bytes]]:
        c = self.coupling
        rollouts: list[Rollout] = []
        media: dict[str, bytes] = {}
        listed = []
        for action in candidate_actions(self.task.action_names, c.candidates, self.seed, step):
            intervention = [action] * c.horizon
            got = self.model.predict(step, frames, actions, intervention)
            if len(got) != len(intervention):
                raise ValueError(
                    f"{self.task.id} step {step}: the {c.world_model} world model returned "
                    f"{len(got)} frames for {len(intervention)} actions"
                )
            shown = [np.ascontiguousarray(f, dtype=np.uint8) for f in got]
            entries = []
            for f in shown:
                png = encode_png(f)
                sha = hashlib.sha256(png).hexdigest()
                media[f"{sha}.png"] = png
                entries.append({"sha256": frame_sha256(f), "png": sha})
            rollouts.append(Rollout(action, intervention, shown))
            listed.append({"action": action, "intervention": intervention, "frames": entries})
        record = {"type": RECORD, "step": step, "world_model": c.world_model, "candidates": listed}
        return rollouts, record, media

    def observe(self, action: str) -> None:
        self.model.observe(action)

    def close(self) -> None:
        self.model.close()


# -- verification ----------------------------------------------------------------------
class ImaginedError(ValueError):
    """An ``imagined`` record that is not what the coupled condition produces."""


@dataclass(frozen=True)
class CheckedRollout:
    """A logged rollout as verification keeps it: no pixels, only what is compared
    later (each frame's pixel sha256, and the sha256 of the JPEG a request shows)."""

    action: str
    intervention: list[str]
    frame_sha256: list[str]
    jpeg_sha256: list[str]


class FrameDigests(dict[str, tuple[str, str]]):
    """An episode's imagined PNGs already read, by PNG sha256: (pixel sha256, JPEG
    sha256). Each PNG is decoded once, and one at a time, however many frames name it."""


def check_imagined(
    rec: dict[str, Any],
    coupling: Coupling,
    action_names: Sequence[str],
    seed: int,
    step: int,
    frame_hash: str | None,
    media_dir: Path,
    jpeg_sha256: Callable[[npt.NDArray[np.uint8]], str],
    seen: FrameDigests,
) -> list[CheckedRollout]:
    """The rollouts an ``imagined`` record logs, read back from its PNG files.

    Checks the step, the world model, the candidates (:func:`candidate_actions`),
    each intervention (the candidate ``horizon`` times), the shape of the record (all
    before any PNG is read), each PNG (present, matching its sha256, its header within
    a frame's bounds, decoding to the logged pixel sha256) and, for ``copy-last``, that
    every frame is the current one (``frame_hash``). Decoded pixels are not kept
    (``jpeg_sha256`` gives what a request shows of each). Raises :class:`ImaginedError`.
    """
    if rec.get("step") != step:
        raise ImaginedError(f"imagined record for step {rec.get('step')!r}, expected {step}")
    if rec.get("world_model") != coupling.world_model:
        raise ImaginedError(
            f"imagined by {str(rec.get('world_model'))[:40]!r}, the run declares "
            f"{coupling.world_model!r}"
        )
    listed = rec.get("candidates")
    want = candidate_actions(action_names, coupling.candidates, seed, step)
    if (
        not isinstance(listed, list)
        or [c.get("action") if isinstance(c, dict) else None for c in listed] != want
    ):
        raise ImaginedError(f"the candidates are not the condition's {want} for step {step}")
    for c in listed:  # the whole record's shape first: the work it asks for is then known
        action = c["action"]
        intervention = [action] * coupling.horizon
        if c.get("intervention") != intervention:
            raise ImaginedError(f"candidate {action}: the intervention is not {intervention}")
        entries = c.get("frames")
        if not isinstance(entries, list) or len(entries) != len(intervention):
            raise ImaginedError(f"candidate {action}: not one imagined frame per action")
        for e in entries:
            _frame_entry(e, action)
    out = []
    for c in listed:
        action = c["action"]
        pixels, jpegs = [], []
        for e in c["frames"]:
            pixel, jpeg = _read_png(e, media_dir, action, jpeg_sha256, seen)
            if coupling.world_model == "copy-last" and pixel != frame_hash:
                raise ImaginedError(
                    f"candidate {action}: a copy-last frame that is not the current frame"
                )
            pixels.append(pixel)
            jpegs.append(jpeg)
        out.append(CheckedRollout(action, [action] * coupling.horizon, pixels, jpegs))
    return out


def _frame_entry(entry: Any, action: str) -> None:
    if not isinstance(entry, dict) or not all(
        isinstance(entry.get(k), str) and len(entry[k]) == 64 for k in ("sha256", "png")
    ):
        raise ImaginedError(f"candidate {action}: a frame entry without its two sha256")
    if any(ch not in "0123456789abcdef" for ch in str(entry["png"])):
        raise ImaginedError(f"candidate {action}: a PNG sha256 that is not hex")


def _read_png(
    entry: dict[str, Any],
    media_dir: Path,
    action: str,
    jpeg_sha256: Callable[[npt.NDArray[np.uint8]], str],
    seen: FrameDigests,
) -> tuple[str, str]:
    """(pixel sha256, JPEG sha256) of one imagined frame, its PNG read once per episode."""
    from vical.bounded import MemberError

    png = str(entry["png"])
    if png not in seen:
        path = media_dir / f"{png}.png"
        if not path.is_file():
            raise ImaginedError(f"candidate {action}: imagined frame {png[:12]} is not in media/")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != png:
            raise ImaginedError(f"media/{png}.png does not match its sha256")
        try:  # its header first: at most a frame's pixels are ever decoded
            frame = decode_png(data)
        except MemberError as e:
            raise ImaginedError(f"media/{png}.png: {e}") from None
        seen[png] = (frame_sha256(frame), jpeg_sha256(frame))
        del frame
    pixel, jpeg = seen[png]
    if pixel != entry["sha256"]:
        raise ImaginedError(f"media/{png}.png does not hold the logged pixels")
    return pixel, jpeg


def resimulate(
    task: TaskSpec, actions: Sequence[str], imagined: dict[int, list[CheckedRollout]]
) -> list[str]:
    """Problems of a ``simulator`` coupled episode's imagined frames: each decision's
    rollouts are played again from the replayed state and must be the logged frames."""
    problems: list[str] = []
    with make_env(task) as env:
        env.reset()
        for step in range(len(actions) + 1):
            rollouts = imagined.get(step)
            if rollouts:
                snap = env.snapshot()
                for r in rollouts:
                    again = play_from(env, r.intervention)
                    env.restore(snap)
                    same = len(again) == len(r.frame_sha256) and all(
                        frame_sha256(a) == b for a, b in zip(again, r.frame_sha256, strict=True)
                    )
                    if not same:
                        problems.append(
                            f"step {step}: the simulator's rollout of {r.action} is not the "
                            "imagined one logged"
                        )
            if step < len(actions) and not env.done:
                env.step(actions[step])
    return problems
