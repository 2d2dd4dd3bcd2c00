"""``trajectory.png``: an episode's frames in order, each with its action under it."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageDraw, ImageFont

THUMB_W = 160
CAPTION_H = 18
COLUMNS = 8


@cache
def font(size: int = 12) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans from matplotlib's data, so text renders the same on every machine."""
    try:
        import matplotlib

        path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
        # the basic layout: raqm (used where libfribidi is installed) moves glyphs
        return ImageFont.truetype(str(path), size, layout_engine=ImageFont.Layout.BASIC)
    except (ImportError, OSError):
        return ImageFont.load_default()


def draw_trajectory(
    frames: list[npt.NDArray[np.uint8]], actions: list[str], out: Path, title: str = ""
) -> None:
    """Write a contact sheet: frame 0 captioned Start, frame t captioned with action t."""
    if not frames:
        raise ValueError("no frames to draw")
    h0, w0 = frames[0].shape[:2]
    th = max(1, round(h0 * THUMB_W / w0))
    cols = min(COLUMNS, len(frames))
    rows = math.ceil(len(frames) / cols)
    head = 22 if title else 0
    sheet = Image.new("RGB", (cols * THUMB_W, head + rows * (th + CAPTION_H)), "black")
    draw = ImageDraw.Draw(sheet)
    if title:
        draw.text((4, 4), title, fill="white", font=font(13))
    for i, f in enumerate(frames):
        r, c = divmod(i, cols)
        x, y = c * THUMB_W, head + r * (th + CAPTION_H)
        sheet.paste(Image.fromarray(f).resize((THUMB_W, th), Image.Resampling.BILINEAR), (x, y))
        label = "Start" if i == 0 else f"{i}: {actions[i - 1]}"
        draw.text((x + 3, y + th + 2), label, fill="white", font=font(11))
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(out, format="PNG", optimize=False)
