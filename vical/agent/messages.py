"""The messages of an episode, in the provider-neutral form every backend renders.

One episode is one growing conversation of user and assistant messages; there
is no system message. The first user message (:func:`first_message`) carries
the task introduction, the demonstrations, the start frame and the answer
contract; every later one (:func:`next_message`) the previous action and the
new frame; after a reply that names no legal action comes
:func:`retry_message`. A coupled run (``vical wm couple``) adds the world
model's imagined rollouts to each turn (:func:`imagination_parts`). Nothing is
ever dropped from the history, and reward numbers are never shown. The wording
is :mod:`vical.agent.prompts`'.

A :data:`Message` is ``{"role": "user"|"assistant", "content": [Part, ...]}``;
a :data:`Part` is ``{"type": "text", "text"}`` or ``{"type": "image"|"video",
"sha256", "mime"}``, its bytes kept apart (:mod:`vical.agent.media`). These are
pure functions of the task, the condition, the media parts and the replies: the
agent sends them, and ``vical verify`` rebuilds every request of a logged
episode with the same functions (:mod:`vical.submit.logcheck`). Within an
episode, :class:`EpisodeTurns` builds them with their media.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from vical.agent import prompts
from vical.agent.media import MediaStore, encode_jpeg, sha256_hex

if TYPE_CHECKING:
    from vical.agent.base import EpisodeContext, Observation

Part = dict[str, Any]  # {"type": "text", "text"} | {"type": "image"|"video", "sha256", "mime"}
Message = dict[str, Any]  # {"role": "user"|"assistant", "content": [Part, ...]}


def first_message(
    task: Any,
    action_names: list[str],
    max_steps: int,
    rules: str,
    demos: list[list[Part]],
    demo_transport: str,
    frame: Part,
    imagined: list[Part] | None = None,
) -> Message:
    """The first user message: task introduction (with the ``rules`` text), the
    demonstrations (``demos``: each one's media parts, one video part or its
    frames as image parts under ``demo_transport`` ``frames``), the start
    frame's part and the answer contract. ``imagined`` (a coupled run's
    :func:`imagination_parts`) goes before the start frame, which stays the
    message's last image."""
    text = prompts.task_intro(task, action_names, max_steps, rules)
    parts: list[Part] = [{"type": "text", "text": text}]
    n = len(demos)
    if n:
        parts.append({"type": "text", "text": prompts.demos_intro(n)})
    for i, media in enumerate(demos, start=1):
        parts.append({"type": "text", "text": prompts.demo_heading(i, n)})
        if demo_transport == "video":
            parts.extend(media)
        else:
            parts.append({"type": "text", "text": prompts.demo_frames_intro(i, len(media))})
            parts.extend(media)
    parts.extend(imagined or [])
    parts.append({"type": "text", "text": prompts.start_frame_text()})
    parts.append(frame)
    parts.append({"type": "text", "text": prompts.answer_contract(action_names)})
    return {"role": "user", "content": parts}


def next_message(previous_action: str, frame: Part, imagined: list[Part] | None = None) -> Message:
    """A later turn's user message: the move applied, the new frame's part and, in a
    coupled run, the :func:`imagination_parts` after it."""
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": prompts.next_turn_text(previous_action)},
            frame,
            *(imagined or []),
            {"type": "text", "text": prompts.next_turn_reminder()},
        ],
    }


def imagination_parts(rollouts: list[tuple[str, list[Part]]]) -> list[Part]:
    """A coupled run's world-model rollouts as message parts: an introduction, then per
    candidate action a heading and the image part of each imagined frame (empty: none)."""
    if not rollouts:
        return []
    horizon = max(len(frames) for _, frames in rollouts)
    parts: list[Part] = [
        {"type": "text", "text": prompts.imagination_intro(len(rollouts), horizon)}
    ]
    for action, frames in rollouts:
        parts.append({"type": "text", "text": prompts.imagined_heading(action, len(frames))})
        parts.extend(frames)
    return parts


def retry_message(parsed: Any, action_names: list[str]) -> Message:
    """The user message after a reply that yielded no legal action."""
    return {
        "role": "user",
        "content": [{"type": "text", "text": prompts.retry_text(parsed, action_names)}],
    }


def reply_message(text: str) -> Message:
    """A reply as the history keeps it."""
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


class EpisodeTurns:
    """The user messages of one episode, built with their media.

    Every media item goes into :attr:`media` (a
    :class:`~vical.agent.media.MediaStore`, by sha256) and each part names it;
    each distinct live frame (by its raw sha256) is JPEG-encoded once per
    episode, however often it recurs, imagined frames included.
    ``demo_transport`` is ``frames`` (each demonstration as its JPEG frames) or
    ``video`` (one MP4 part each).
    """

    def __init__(self, demo_transport: str) -> None:
        self.demo_transport = demo_transport
        self.media = MediaStore()
        self._frame_parts: dict[str, Part] = {}  # raw frame sha256 -> its JPEG part

    def add_media(self, data: bytes, mime: str, kind: str) -> Part:
        """Store ``data`` and return the ``kind`` part (image or video) naming it."""
        sha = sha256_hex(data)
        self.media.setdefault(sha, (data, mime))
        return {"type": kind, "sha256": sha, "mime": mime}

    def frame_part(self, frame: npt.NDArray[np.uint8], frame_sha256: str) -> Part:
        """A live frame as a JPEG part, encoded once per episode per distinct frame."""
        part = self._frame_parts.get(frame_sha256)
        if part is None:
            part = self._frame_parts[frame_sha256] = self.add_media(
                encode_jpeg(frame), "image/jpeg", "image"
            )
        return dict(part)

    def first(self, ctx: EpisodeContext, obs: Observation) -> Message:
        """The episode's first user message (:func:`first_message`) for ``ctx`` and
        the start observation ``obs``."""
        demos: list[list[Part]] = []
        for demo in ctx.demos:
            if self.demo_transport == "video":
                demos.append([self.add_media(demo.mp4, "video/mp4", "video")])
            else:
                demos.append([self.add_media(f, "image/jpeg", "image") for f in demo.frames_jpeg])
        return first_message(
            ctx.task,
            ctx.action_names,
            ctx.max_steps,
            ctx.rules,
            demos,
            self.demo_transport,
            self.frame_part(obs.frame, obs.frame_sha256),
            self.imagined(obs),
        )

    def next(self, obs: Observation) -> Message:
        """A later turn's user message (:func:`next_message`) for ``obs``."""
        if obs.previous_action is None:
            raise RuntimeError("a later turn needs the previous action")
        return next_message(
            obs.previous_action,
            self.frame_part(obs.frame, obs.frame_sha256),
            self.imagined(obs),
        )

    def imagined(self, obs: Observation) -> list[Part]:
        """The observation's imagined rollouts (a coupled run) as parts, each frame a
        JPEG part encoded once per episode like a live frame."""
        return imagination_parts(
            [
                (
                    r.action,
                    [self.frame_part(f, h) for f, h in zip(r.frames, r.frame_sha256, strict=True)],
                )
                for r in obs.imagined
            ]
        )


def demo_summary(demo: Any) -> dict[str, Any]:
    """A demonstration as the ``agent_session`` record names it (its media by sha256)."""
    return {
        "clip_id": demo.clip_id,
        "label": demo.label,
        "n_frames": demo.n_frames,
        "mp4_sha256": sha256_hex(demo.mp4) if demo.mp4 else None,
        "frames_jpeg_sha256": [sha256_hex(b) for b in demo.frames_jpeg],
    }
