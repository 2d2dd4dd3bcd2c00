"""Bounded readers for the images and JSON a bundle carries: limits checked before work.

Everything verification decodes from a submitter's files goes through these: a PNG or
JPEG is opened for its header only, and refused before any pixel is decoded when its
format, dimensions or pixel count are not what the caller expects (a frame's shape
from the task or the case, else at most :data:`MAX_FRAME_PIXELS`); a JSON member is
refused when it is larger than its limit or nests deeper than :data:`MAX_JSON_DEPTH`,
before it is parsed. A refusal is a :class:`MemberError` (a ``ValueError``) whose
message names the check; the caller adds the member's name.

The frame bound: the largest frame a V-ICAL environment renders is well under
:data:`MAX_FRAME_PIXELS` (one megapixel; 3 MiB decoded as RGB), so a decoded frame
never holds more than that, whatever its file claims.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import numpy as np
import numpy.typing as npt

MAX_FRAME_SIDE = 4096  # pixels, either dimension
MAX_FRAME_PIXELS = 1 << 20  # width x height of any frame vical decodes from a bundle
MAX_JSON_DEPTH = 64  # nesting (objects and arrays) of any JSON vical writes
MAX_JSON_BYTES = 16 << 20  # a JSON member larger than this is not one vical writes
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class MemberError(ValueError):
    """A member refused by a bounded reader (the message names the check)."""


def image_header(data: bytes, fmt: str) -> tuple[int, int]:
    """(width, height) of a ``fmt`` ("PNG" or "JPEG") image, read from its header only."""
    from PIL import Image

    if fmt == "PNG":  # the IHDR chunk, which a PNG must open with
        if data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR" or len(data) < 24:
            raise MemberError("not a readable PNG (no PNG signature and IHDR header)")
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    try:
        with Image.open(io.BytesIO(data), formats=[fmt]) as im:
            return int(im.size[0]), int(im.size[1])
    except Image.DecompressionBombError:
        raise MemberError(f"a {fmt} larger than any frame; refused before decoding") from None
    except Exception as e:  # PIL raises its own kinds (UnidentifiedImageError and others)
        raise MemberError(f"not a readable {fmt} ({type(e).__name__})") from None


def decode_image(
    data: bytes,
    fmt: str = "PNG",
    size: tuple[int, int] | None = None,
    max_pixels: int = MAX_FRAME_PIXELS,
) -> npt.NDArray[np.uint8]:
    """An image's pixels as an RGB ``uint8`` array (height, width, 3).

    ``size``: the (width, height) it must have (a frame's, from the task or case);
    otherwise it may have at most ``max_pixels`` pixels and :data:`MAX_FRAME_SIDE` on
    either side. Both are checked on the header, before any pixel is decoded.
    """
    from PIL import Image

    w, h = image_header(data, fmt)
    if size is not None and (w, h) != tuple(size):
        raise MemberError(f"a {w}x{h} image where the frame is {size[0]}x{size[1]}")
    if w < 1 or h < 1 or w > MAX_FRAME_SIDE or h > MAX_FRAME_SIDE or w * h > max_pixels:
        raise MemberError(
            f"a {w}x{h} image, larger than any frame ({max_pixels} pixels, "
            f"{MAX_FRAME_SIDE} a side); refused before decoding"
        )
    try:
        with Image.open(io.BytesIO(data), formats=[fmt]) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
    except Exception as e:  # a truncated or corrupt stream
        raise MemberError(f"not a readable {fmt} ({type(e).__name__})") from None


def json_depth_ok(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text nests at most ``limit`` deep (brackets outside strings)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True
    depth = 0
    in_str = esc = False
    for b in raw:
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:
                esc = True
            elif b == 0x22:
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return False
        elif b in (0x5D, 0x7D):
            depth -= 1
    return True


def parse_json(raw: bytes, max_bytes: int = MAX_JSON_BYTES, depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON text parsed within its bounds (:class:`MemberError` otherwise)."""
    if len(raw) > max_bytes:
        raise MemberError(f"larger than {max_bytes} bytes")
    if not json_depth_ok(raw, depth):
        raise MemberError(f"nests deeper than {depth}")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError and bad UTF-8 included
        raise MemberError("not JSON") from None
