"""Demonstration packages: demo clips (data) rendered to captioned frames and MP4.

A task's demonstration package is the list of its demo clips, each replayed on
the task's environment from the clip's own start state and rendered
deterministically (see :mod:`vical.demos.render`). Rendering is cached by a
content hash of everything that determines the bytes, under ``$VICAL_CACHE/demos``
(default ``~/.cache/vical/demos``).

>>> from vical.spec import get_task
>>> videos = load_demo_package(get_task("taxi/state1"))      # doctest: +SKIP
>>> videos[0].mp4[:12], len(videos[0].frames_jpeg)            # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from vical.demos.render import (
    FPS,
    RENDER_VERSION,
    STRIP_HEIGHT,
    ClipReplayError,
    caption_frame,
    caption_frames,
    encode_jpeg,
    encode_mp4,
    replay_clip,
    task_start_sha256,
)
from vical.spec import DemoClip, TaskSpec


@dataclass(frozen=True)
class DemoVideo:
    """One rendered demo clip.

    ``frames_jpeg`` are the captioned frames in order (start, one per action,
    then the terminal copy labelled with the outcome); ``n_frames`` is their
    count and equals the number of frames in ``mp4`` (1 frame per second).
    """

    clip_id: str
    label: str
    n_frames: int
    mp4: bytes
    frames_jpeg: list[bytes]

    @property
    def sha256(self) -> str:
        """sha256 of the MP4 bytes."""
        return hashlib.sha256(self.mp4).hexdigest()

    @property
    def seconds(self) -> float:
        return self.n_frames / FPS


def cache_dir() -> Path:
    """Where rendered clips are cached: ``$VICAL_CACHE/demos`` or ``~/.cache/vical/demos``."""
    root = os.environ.get("VICAL_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "vical"
    return base / "demos"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def clip_key(task: TaskSpec, clip: DemoClip) -> str:
    """Content hash of everything that determines a rendered clip's bytes."""
    env = task.env.model_dump(mode="json", exclude={"tasks", "rules", "scoring", "pass_rule"})
    payload = {
        "render": RENDER_VERSION,
        "env": env,
        "task_seed": task.variant.seed,
        "env_kwargs": task.env_kwargs,
        "params": task.params,
        "targets": {k: v.value for k, v in task.targets.items()},
        "clip": clip.model_dump(mode="json", exclude={"source"}),
        "versions": {
            d: _version(d) for d in (task.env.package, "pillow", "imageio-ffmpeg", "numpy")
        },
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def render_clip(task: TaskSpec, clip: DemoClip) -> DemoVideo:
    """Replay and render one clip, without the cache."""
    replay = replay_clip(task, clip)
    frames = caption_frames(replay)
    return DemoVideo(
        clip_id=clip.id,
        label=replay.outcome,
        n_frames=len(frames),
        mp4=encode_mp4(frames),
        frames_jpeg=[encode_jpeg(f) for f in frames],
    )


def _read_cached(path: Path) -> DemoVideo | None:
    meta_p = path / "meta.json"
    if not meta_p.is_file():
        return None
    try:
        meta = json.loads(meta_p.read_text())
        mp4 = (path / "clip.mp4").read_bytes()
        if hashlib.sha256(mp4).hexdigest() != meta["mp4_sha256"]:
            return None
        jpegs = [(path / f"frame_{i:03d}.jpg").read_bytes() for i in range(meta["n_frames"])]
    except (OSError, ValueError, KeyError):
        return None
    return DemoVideo(
        clip_id=meta["clip_id"],
        label=meta["label"],
        n_frames=meta["n_frames"],
        mp4=mp4,
        frames_jpeg=jpegs,
    )


def _write_cached(path: Path, video: DemoVideo) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=path.parent))
    try:
        (tmp / "clip.mp4").write_bytes(video.mp4)
        for i, j in enumerate(video.frames_jpeg):
            (tmp / f"frame_{i:03d}.jpg").write_bytes(j)
        meta = {
            "clip_id": video.clip_id,
            "label": video.label,
            "n_frames": video.n_frames,
            "mp4_sha256": video.sha256,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, sort_keys=True))
        # another process may have cached the same clip first: keep theirs
        with contextlib.suppress(OSError):
            tmp.rename(path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def load_demo_clip(task: TaskSpec, clip: DemoClip, *, use_cache: bool = True) -> DemoVideo:
    """One rendered clip of a task, from the cache when its content hash is there."""
    if not use_cache:
        return render_clip(task, clip)
    key = clip_key(task, clip)
    path = cache_dir() / key[:2] / key
    cached = _read_cached(path)
    if cached is not None and cached.clip_id == clip.id:
        return cached
    video = render_clip(task, clip)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    _write_cached(path, video)
    return video


def load_demo_package(task: TaskSpec | str, *, use_cache: bool = True) -> list[DemoVideo]:
    """The rendered demonstration package of a task, in the order its clips are listed."""
    if isinstance(task, str):
        from vical.spec import get_task

        task = get_task(task)
    return [load_demo_clip(task, c, use_cache=use_cache) for c in task.variant.demos]


__all__ = [
    "FPS",
    "STRIP_HEIGHT",
    "ClipReplayError",
    "DemoVideo",
    "cache_dir",
    "caption_frame",
    "clip_key",
    "load_demo_clip",
    "load_demo_package",
    "render_clip",
    "replay_clip",
    "task_start_sha256",
]
