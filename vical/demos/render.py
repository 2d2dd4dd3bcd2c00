"""Replay demo clips and render them: captioned frames, JPEG, 1 fps H.264 MP4.

Everything here is deterministic to the byte for a given set of dependency
versions: the font is the DejaVu Sans file shipped inside matplotlib, JPEGs are
written by Pillow with fixed settings, and the MP4 is encoded by the ffmpeg
binary of ``imageio-ffmpeg`` with one thread and ``-bitexact`` flags, so no
encoder version string, timestamp or thread-dependent decision enters the file.
"""

from __future__ import annotations

import io
import os
import tempfile
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageDraw, ImageFont

from vical.spec import DemoClip, TaskSpec

STRIP_HEIGHT = 40
FPS = 1
JPEG_QUALITY = 90
# Bump when anything that changes rendered bytes changes (part of the cache key).
RENDER_VERSION = "2"  # 2: captions laid out with FreeType's basic layout

START_CAPTION = "Start State"
_MAX_FONT = 16
_MIN_FONT = 6
_MARGIN = 4

# ffmpeg flags that make the encoded file a pure function of the frames:
# one thread (x264's decisions depend on the thread count), no encoder/muxer
# version strings, no creation time.
_FFMPEG_PARAMS = [
    "-threads",
    "1",
    "-preset",
    "medium",
    "-crf",
    "18",
    "-x264-params",
    "threads=1:sliced-threads=0:lookahead-threads=1",
    "-fflags",
    "+bitexact",
    "-flags:v",
    "+bitexact",
    "-map_metadata",
    "-1",
    "-movflags",
    "+faststart",
]


class ClipReplayError(RuntimeError):
    """A demo clip does not replay as stored (wrong label, ends early, bad start)."""


@dataclass(frozen=True)
class ClipReplay:
    """The raw frames of a replayed clip: the start frame plus one per action."""

    frames: list[npt.NDArray[np.uint8]]
    actions: list[str]
    outcome: str
    score: float
    passed: bool
    start_sha256: str


def step_caption(t: int, action: str) -> str:
    """Caption of frame ``t`` (t >= 1) in the natural-language template."""
    return f"Step {t}: Action: {action}"


@cache
def font_path() -> str:
    """DejaVu Sans as shipped inside matplotlib: the same file everywhere."""
    import matplotlib

    p = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
    if not p.is_file():
        raise FileNotFoundError(f"caption font not found at {p}")
    return str(p)


@cache
def _font(size: int) -> ImageFont.FreeTypeFont:
    # The basic layout, never libraqm: Pillow uses raqm only where the machine has
    # libfribidi, and the two lay the same caption out a pixel apart, so a demo
    # rendered in the minimal image and on a desktop would give other JPEG bytes.
    return ImageFont.truetype(font_path(), size, layout_engine=ImageFont.Layout.BASIC)


def _fit_font(draw: ImageDraw.ImageDraw, text: str, width: int) -> ImageFont.FreeTypeFont:
    """The largest font size (<= 16 px) whose caption fits the frame width."""
    for size in range(_MAX_FONT, _MIN_FONT - 1, -1):
        f = _font(size)
        left, _top, right, _bottom = draw.textbbox((0, 0), text, font=f, stroke_width=1)
        if right - left <= width - 2 * _MARGIN:
            return f
    return _font(_MIN_FONT)


def caption_frame(frame: npt.NDArray[np.uint8], text: str) -> npt.NDArray[np.uint8]:
    """The frame, unmodified, above a 40-pixel black strip with the centred caption.

    The caption is white with a one-pixel black outline, sized to fit the width.
    """
    frame = np.ascontiguousarray(frame, dtype=np.uint8)
    if frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"expected an RGB frame (H, W, 3), got {frame.shape}")
    h, w, _ = frame.shape
    strip = Image.new("RGB", (w, STRIP_HEIGHT), (0, 0, 0))
    draw = ImageDraw.Draw(strip)
    f = _fit_font(draw, text, w)
    draw.text(
        (w / 2, STRIP_HEIGHT / 2),
        text,
        font=f,
        fill=(255, 255, 255),
        anchor="mm",
        stroke_width=1,
        stroke_fill=(0, 0, 0),
    )
    out = np.empty((h + STRIP_HEIGHT, w, 3), dtype=np.uint8)
    out[:h] = frame
    out[h:] = np.asarray(strip, dtype=np.uint8)
    return out


def caption_frames(replay: ClipReplay) -> list[npt.NDArray[np.uint8]]:
    """Captioned frames: Start State, Step t: Action: <name>, then the outcome copy."""
    out = [caption_frame(replay.frames[0], START_CAPTION)]
    for t, (frame, action) in enumerate(zip(replay.frames[1:], replay.actions, strict=True), 1):
        out.append(caption_frame(frame, step_caption(t, action)))
    out.append(caption_frame(replay.frames[-1], replay.outcome))
    return out


def pad_even(frame: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Pad with black on the bottom/right to even height and width (yuv420p needs it)."""
    h, w, _ = frame.shape
    ph, pw = h % 2, w % 2
    if not (ph or pw):
        return frame
    return np.pad(frame, ((0, ph), (0, pw), (0, 0)))


def encode_jpeg(frame: npt.NDArray[np.uint8]) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(frame, "RGB").save(
        buf, format="JPEG", quality=JPEG_QUALITY, optimize=False, progressive=False, subsampling=0
    )
    return buf.getvalue()


def encode_mp4(frames: list[npt.NDArray[np.uint8]], fps: int = FPS) -> bytes:
    """H.264 yuv420p MP4 at ``fps``, exact size (no macro-block resize), byte-deterministic.

    Encodes through ``imageio_ffmpeg.write_frames`` directly: the installed
    ``imageio`` plugin passes arguments that ``imageio-ffmpeg`` 0.3 does not take.
    """
    import imageio_ffmpeg

    if not frames:
        raise ValueError("no frames to encode")
    frames = [pad_even(np.ascontiguousarray(f, dtype=np.uint8)) for f in frames]
    shape = frames[0].shape
    if any(f.shape != shape for f in frames):
        raise ValueError("all frames of a video must have the same size")
    h, w, _ = shape
    fd, tmp = tempfile.mkstemp(suffix=".mp4")
    os.close(fd)
    try:
        gen = imageio_ffmpeg.write_frames(
            tmp,
            (w, h),
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            fps=fps,
            quality=None,
            codec="libx264",
            macro_block_size=1,
            ffmpeg_log_level="error",
            output_params=list(_FFMPEG_PARAMS),
        )
        with warnings.catch_warnings():
            # imageio-ffmpeg 0.3 calls Thread.setDaemon, deprecated since Python 3.10
            warnings.simplefilter("ignore", DeprecationWarning)
            gen.send(None)
        try:
            for f in frames:
                gen.send(f.tobytes())
        finally:
            gen.close()
        return Path(tmp).read_bytes()
    finally:
        Path(tmp).unlink(missing_ok=True)


def decode_mp4(data: bytes) -> tuple[list[npt.NDArray[np.uint8]], float]:
    """Decode MP4 bytes back to RGB frames and their frame rate (for tests and checks)."""
    import imageio_ffmpeg

    fd, tmp = tempfile.mkstemp(suffix=".mp4")
    os.close(fd)
    try:
        Path(tmp).write_bytes(data)
        gen = imageio_ffmpeg.read_frames(tmp)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            meta = next(gen)
        w, h = meta["size"]
        frames = [np.frombuffer(b, dtype=np.uint8).reshape(h, w, 3).copy() for b in gen]
        return frames, float(meta["fps"])
    finally:
        Path(tmp).unlink(missing_ok=True)


# ---------------------------------------------------------------------------
# replay
# ---------------------------------------------------------------------------
def clip_task(task: TaskSpec, clip: DemoClip) -> TaskSpec:
    """A copy of ``task`` whose start state is the clip's and whose horizon is its length."""
    variant = task.variant.model_copy(
        update={
            "seed": task.variant.seed if clip.seed is None else clip.seed,
            "initial_skip": clip.initial_skip,
            "init_actions": list(clip.init_actions),
            "init_source": f"generated: demo clip {clip.id}" if clip.init_actions else None,
            "max_steps": len(clip.actions),
            "demos": [],
        }
    )
    return TaskSpec(env=task.env, variant=variant)


def clip_outcome(outcome: str | None, passed: bool) -> str:
    """The terminal label of a clip: a clip that runs out its steps having passed is a Victory."""
    if outcome is None:
        raise ClipReplayError("the clip's last step did not end the replay")
    if outcome == "Time Out" and passed:
        return "Victory"
    return outcome


def replay_clip(task: TaskSpec, clip: DemoClip, *, check_label: bool = True) -> ClipReplay:
    """Replay a clip from its own start state on the task's environment."""
    from vical.envs import frame_sha256, make_env

    env = make_env(clip_task(task, clip))
    try:
        frames = [env.reset().copy()]
        start_hash = frame_sha256(frames[0])
        step = None
        for i, name in enumerate(clip.actions):
            if env.done:
                raise ClipReplayError(
                    f"{task.id}: demo {clip.id} ended after {i} of {len(clip.actions)} actions"
                )
            step = env.step(name)
            frames.append(step.frame.copy())
        assert step is not None
        outcome = clip_outcome(step.outcome, step.passed)
        if check_label and outcome != clip.label:
            raise ClipReplayError(
                f"{task.id}: demo {clip.id} is labelled {clip.label!r} but replays to {outcome!r}"
            )
        return ClipReplay(
            frames=frames,
            actions=list(clip.actions),
            outcome=outcome,
            score=step.score,
            passed=step.passed,
            start_sha256=start_hash,
        )
    finally:
        env.close()


def task_start_sha256(task: TaskSpec) -> str:
    """sha256 of the frame the agent is tested from (the task's opening)."""
    from vical.envs import frame_sha256, make_env

    env = make_env(task)
    try:
        return frame_sha256(env.reset())
    finally:
        env.close()
