"""Demo rendering: byte determinism, captions and strip geometry, MP4 at 1 fps, packages."""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import per_env_sweep, spread
from PIL import Image

from vical.authoring.plan import MAX_FRAMES, MIN_FRAMES, check_package
from vical.demos import STRIP_HEIGHT, DemoVideo, load_demo_package, render_clip
from vical.demos.render import (
    caption_frame,
    decode_mp4,
    encode_mp4,
    replay_clip,
    step_caption,
    task_start_sha256,
)
from vical.spec import DemoClip, all_tasks, get_task

TASKS_WITH_DEMOS = [t for t in all_tasks() if t.variant.demos]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VICAL_CACHE", str(tmp_path / "cache"))


def _jpeg(b: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))


def test_caption_texts():
    assert step_caption(3, "Push Left") == "Step 3: Action: Push Left"


def test_strip_geometry_and_frame_unmodified():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, size=(250, 160, 3), dtype=np.uint8)
    out = caption_frame(frame, "Step 12: Action: Accelerate Right")
    assert out.shape == (250 + STRIP_HEIGHT, 160, 3)
    assert np.array_equal(out[:250], frame)
    strip = out[250:]
    # white text on black: mostly black, some white pixels, centred horizontally
    assert (strip.max(axis=2) < 40).mean() > 0.6
    white = np.argwhere(strip.min(axis=2) > 200)
    assert len(white) > 20
    cx = (white[:, 1].min() + white[:, 1].max()) / 2
    cy = (white[:, 0].min() + white[:, 0].max()) / 2
    assert abs(cx - 80) <= 3 and abs(cy - STRIP_HEIGHT / 2) <= 4


def test_caption_differs_by_text():
    frame = np.zeros((50, 200, 3), np.uint8)
    assert not np.array_equal(caption_frame(frame, "Start State"), caption_frame(frame, "Victory"))


@pytest.mark.parametrize("size", [(250, 160), (251, 161)])
def test_mp4_keeps_size_and_fps(size):
    h, w = size
    frames = [np.full((h, w, 3), 40 * i, np.uint8) for i in range(4)]
    data = encode_mp4(frames)
    assert encode_mp4(frames) == data  # byte-deterministic
    back, fps = decode_mp4(data)
    assert fps == 1.0
    assert len(back) == 4
    assert back[0].shape == (h + h % 2, w + w % 2, 3)
    assert abs(int(back[2][: h // 2, : w // 2].mean()) - 80) <= 3


def test_rendering_is_byte_deterministic():
    task = get_task("cliffwalking/base")
    clip = task.variant.demos[0]
    a, b = render_clip(task, clip), render_clip(task, clip)
    assert a.mp4 == b.mp4
    assert a.frames_jpeg == b.frames_jpeg


def test_cache_returns_same_bytes(tmp_path):
    task = get_task("cliffwalking/base")
    first = load_demo_package(task)
    again = load_demo_package(task)
    assert [v.mp4 for v in first] == [v.mp4 for v in again]
    assert list((tmp_path / "cache" / "demos").rglob("clip.mp4"))


def test_clip_label_is_checked():
    task = get_task("cliffwalking/base")
    clip = task.variant.demos[0]
    wrong = clip.model_copy(update={"label": "Terminated"})
    with pytest.raises(RuntimeError, match="replays to"):
        replay_clip(task, wrong)


def test_package_rule_rejects_opening_start():
    task = get_task("cliffwalking/base")
    at_opening = DemoClip(
        id="x", actions=["Up"] * 12, label="Time Out", source="scripted test clip"
    )
    with pytest.raises(ValueError, match="opening"):
        check_package(task, [at_opening])


# every task's package under `slow`; one plain and one human-init task per environment here
@pytest.mark.parametrize("task", spread(per_env_sweep(TASKS_WITH_DEMOS), 15))
def test_demo_package(task):
    videos = load_demo_package(task)
    assert 1 <= len(videos) <= 4
    assert MIN_FRAMES <= sum(v.n_frames for v in videos) <= MAX_FRAMES
    opening = task_start_sha256(task)
    for clip, v in zip(task.variant.demos, videos, strict=True):
        assert isinstance(v, DemoVideo)
        assert v.label == clip.label
        assert v.n_frames == len(clip.actions) + 2 == len(v.frames_jpeg)
        replay = replay_clip(task, clip)
        assert replay.start_sha256 != opening, f"{clip.id} starts at {task.id}'s opening"
        first = _jpeg(v.frames_jpeg[0])
        h, w, _ = replay.frames[0].shape
        assert first.shape == (h + STRIP_HEIGHT, w, 3)
        # the frame above the strip is the game frame (JPEG-close), the strip is dark
        assert np.abs(first[:h].astype(int) - replay.frames[0].astype(int)).mean() < 6
        back, fps = decode_mp4(v.mp4)
        assert fps == 1.0 and len(back) == v.n_frames
        assert back[0].shape[0] % 2 == 0 and back[0].shape[1] % 2 == 0


def test_captions_use_the_basic_layout_whatever_the_machine_has():
    """Pillow lays text out with libraqm where the machine has libfribidi and with its
    basic layout elsewhere (the minimal image); the two place a caption's glyphs
    differently, so demo JPEGs would differ between machines. Both caption fonts
    (demo frames, trajectory sheets) are held to the basic layout."""
    from PIL import ImageDraw, ImageFont, features

    from vical.demos.render import _font, font_path
    from vical.run.trajectory import font as sheet_font

    assert _font(12).layout_engine == ImageFont.Layout.BASIC
    assert sheet_font(12).layout_engine == ImageFont.Layout.BASIC
    if not features.check("raqm"):
        pytest.skip("libraqm is not available here: nothing to compare against")
    text = step_caption(7, "UPRIGHTFIRE")

    def drawn(engine) -> bytes:
        img = Image.new("RGB", (240, 20))
        f = ImageFont.truetype(font_path(), 12, layout_engine=engine)
        ImageDraw.Draw(img).text((2, 2), text, font=f, fill=(255, 255, 255))
        return img.tobytes()

    assert drawn(ImageFont.Layout.RAQM) != drawn(ImageFont.Layout.BASIC)
