"""Review tool for start states: a contact sheet of every task's start frame."""

from __future__ import annotations

import math
from pathlib import Path

from PIL import Image, ImageDraw

from vical.envs import make_env
from vical.run.trajectory import font
from vical.spec import TaskSpec

CELL_W = 240


def start_sheet(tasks: list[TaskSpec], out: Path, columns: int = 5) -> None:
    """One image with every task's start frame, captioned with its id, seed and skip."""
    frames = []
    for t in tasks:
        env = make_env(t)
        try:
            frames.append((t, env.reset()))
        finally:
            env.close()
    h0, w0 = frames[0][1].shape[:2]
    ch = round(h0 * CELL_W / w0)
    cols = min(columns, len(frames))
    rows = math.ceil(len(frames) / cols)
    cap = 34
    sheet = Image.new("RGB", (cols * CELL_W, rows * (ch + cap)), "black")
    draw = ImageDraw.Draw(sheet)
    for i, (t, f) in enumerate(frames):
        r, c = divmod(i, cols)
        x, y = c * CELL_W, r * (ch + cap)
        sheet.paste(Image.fromarray(f).resize((CELL_W, ch), Image.Resampling.BILINEAR), (x, y))
        v = t.variant
        label = f"{t.id} ({v.kind})"
        if len(label) > 34:
            label = label[:33] + "…"
        draw.text((x + 3, y + ch + 2), label, fill="white", font=font(11))
        draw.text(
            (x + 3, y + ch + 17),
            f"seed {v.seed} skip {v.initial_skip} init {len(v.init_actions)} max {t.max_steps}",
            fill="white",
            font=font(11),
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(out, format="PNG")
