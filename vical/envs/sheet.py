"""Review tools for start states: contact sheets and human-init generators."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw

from vical.run.trajectory import font
from vical.spec import EnvSpec, TaskSpec

CELL_W = 240


def start_sheet(tasks: list[TaskSpec], out: Path, columns: int = 5) -> None:
    """One image with every task's start frame, captioned with its id, seed and skip."""
    from vical.envs import make_env

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
        sheet.paste(Image.fromarray(f).resize((CELL_W, ch), Image.BILINEAR), (x, y))
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


def init_generator(spec: EnvSpec) -> Callable[[EnvSpec], dict[str, list[str]]] | None:
    """The environment's ``generate_init_actions`` function, if its module defines one.

    Looked up in the game module (``vical.envs.ale_games.<env>``) first, then in
    the family module (``vical.envs.<family>``).
    """
    for modname in (f"vical.envs.ale_games.{spec.env}", f"vical.envs.{spec.family}"):
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name != modname:
                raise
            continue
        fn = getattr(mod, "generate_init_actions", None)
        if fn is not None:
            return fn
    return None
