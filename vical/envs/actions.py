"""Canonical action vocabularies: naming rules shared by every family.

Names are title-case words; a combination (one simultaneous multi-button
command) joins buttons with ``+`` and no spaces, in the fixed order
vertical, horizontal, then Shoot (``Up+Right+Shoot``). Scalar labels such as
``Torque +1`` are not combinations. The same names appear in captions,
prompts, the parser and logs.
"""

from __future__ import annotations

import re

_COMBO = re.compile(r"[A-Za-z]+(?:\+[A-Za-z]+)+")

# ALE joystick actions (ale_py.Action names) -> canonical names.
ALE_NAMES: dict[str, str] = {
    "NOOP": "NOOP",
    "FIRE": "Shoot",
    "UP": "Up",
    "RIGHT": "Right",
    "LEFT": "Left",
    "DOWN": "Down",
    "UPRIGHT": "Up+Right",
    "UPLEFT": "Up+Left",
    "DOWNRIGHT": "Down+Right",
    "DOWNLEFT": "Down+Left",
    "UPFIRE": "Up+Shoot",
    "RIGHTFIRE": "Right+Shoot",
    "LEFTFIRE": "Left+Shoot",
    "DOWNFIRE": "Down+Shoot",
    "UPRIGHTFIRE": "Up+Right+Shoot",
    "UPLEFTFIRE": "Up+Left+Shoot",
    "DOWNRIGHTFIRE": "Down+Right+Shoot",
    "DOWNLEFTFIRE": "Down+Left+Shoot",
}


def is_combo(name: str) -> bool:
    """True for a simultaneous multi-button command such as ``Up+Shoot``."""
    return bool(_COMBO.fullmatch(name))
