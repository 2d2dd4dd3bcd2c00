"""Shared harness for the agent tests (a helper module, not a test file).

``play`` drives an agent through a real task the way the episode runner
does: one ``act`` per decision, every record written as a JSON line to
``log.jsonl`` and every media item once as ``media/<sha256>.<ext>``.
``demo_clips`` renders real demonstration clips (MP4 at 1 fps plus the same
frames as JPEGs) with the fields of ``vical.demos.DemoVideo``.
"""

from __future__ import annotations

import base64
import io
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from vical.agent import EpisodeContext, Observation
from vical.agent.base import Agent, Decision
from vical.envs import frame_sha256, make_env
from vical.spec import TaskSpec

MIME_EXT = {"image/jpeg": "jpg", "image/png": "png", "video/mp4": "mp4"}
CLI_KWARGS = dict(
    endpoint=None,
    model=None,
    api_key_env=None,
    temperature=None,
    max_output_tokens=None,
    reasoning_effort=None,
    extra_body=None,
    seed=None,
)


@dataclass(frozen=True)
class Clip:
    """Same fields as ``vical.demos.DemoVideo``."""

    clip_id: str
    label: str
    n_frames: int
    mp4: bytes
    frames_jpeg: list[bytes]


def _jpeg(frame: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def _mp4(frames: list[np.ndarray]) -> bytes:
    import imageio_ffmpeg

    h, w = frames[0].shape[:2]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "clip.mp4"
        gen = imageio_ffmpeg.write_frames(
            str(path), (w, h), fps=1, codec="libx264", macro_block_size=1, pix_fmt_out="yuv420p"
        )
        gen.send(None)
        for f in frames:
            gen.send(np.ascontiguousarray(f).tobytes())
        gen.close()
        return path.read_bytes()


def demo_clips(task: TaskSpec, plans: list[list[str]]) -> list[Clip]:
    """Render one clip per action plan, from the task's start state."""
    clips = []
    for i, plan in enumerate(plans):
        env = make_env(task)
        frames = [env.reset()]
        for a in plan:
            s = env.step(a)
            frames.append(s.frame)
            if s.done:
                break
        env.close()
        clips.append(
            Clip(
                clip_id=f"test-{i}",
                label="Time Out",
                n_frames=len(frames),
                mp4=_mp4(frames),
                frames_jpeg=[_jpeg(f) for f in frames],
            )
        )
    return clips


@dataclass
class Played:
    decisions: list[Decision]
    actions: list[str]
    records: list[dict[str, Any]]
    score: float
    episode_dir: Path


def play(
    agent: Agent,
    task: TaskSpec,
    out_dir: Path,
    *,
    max_decisions: int = 3,
    demos: list[Clip] | None = None,
    seed: int = 7,
) -> Played:
    """Play up to ``max_decisions`` decisions, writing a runner-shaped episode folder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = make_env(task)
    frame = env.reset()
    agent.start(
        EpisodeContext(
            task=task,
            run_index=0,
            seed=seed,
            action_names=task.action_names,
            max_steps=task.max_steps,
            demos=list(demos or []),
        )
    )
    decisions: list[Decision] = []
    actions: list[str] = []
    records: list[dict[str, Any]] = []
    previous = None
    with open(out_dir / "log.jsonl", "w") as log:
        while not env.done and len(decisions) < max_decisions:
            d = agent.act(
                Observation(
                    step=env.steps,
                    frame=frame,
                    frame_sha256=frame_sha256(frame),
                    previous_action=previous,
                )
            )
            decisions.append(d)
            for sha, (data, mime) in d.media.items():
                p = out_dir / "media" / f"{sha}.{MIME_EXT.get(mime, 'bin')}"
                assert not p.exists(), f"media {sha} handed over twice"
                p.parent.mkdir(exist_ok=True)
                p.write_bytes(data)
            for rec in d.records:
                log.write(json.dumps(rec, sort_keys=True, default=str) + "\n")
                records.append(rec)
            if d.failure:
                break
            s = env.step(d.action)
            frame, previous = s.frame, d.action
            actions.append(d.action)
    score = env.score()
    env.close()
    return Played(decisions, actions, records, score, out_dir)


def data_url_bytes(url: str) -> tuple[str, bytes]:
    head, b64 = url.split(",", 1)
    return head[len("data:") : -len(";base64")], base64.b64decode(b64)


def chat_user_texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [p["text"] for p in content if p.get("type") in ("text", "input_text")]
