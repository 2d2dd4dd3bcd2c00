"""The images and videos a conversation carries: encoding, naming and the store.

Messages (:mod:`vical.agent.messages`) never hold bytes: a media part names its
item by sha256 (:func:`sha256_hex`) and its MIME type, and the bytes sit in a
:data:`Media` mapping beside the messages. Live frames become JPEG with
:func:`encode_jpeg` (quality :data:`JPEG_QUALITY`, deterministic, so a logged
run re-encodes to the same bytes). A backend inlines an item as a base64 data
URL (:func:`media_data_url`); within an episode the agent keeps its media in a
:class:`MediaStore`, which makes each item's data URL once however many
requests carry it.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from PIL import Image

Media = Mapping[str, tuple[bytes, str]]  # sha256 -> (bytes, mime)

JPEG_QUALITY = 90


def encode_jpeg(frame: npt.NDArray[np.uint8]) -> bytes:
    """Encode an RGB frame as JPEG bytes, deterministically."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame)).save(
        buf, format="JPEG", quality=JPEG_QUALITY, optimize=False
    )
    return buf.getvalue()


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data`` in hex: the name a media part gives its bytes."""
    return hashlib.sha256(data).hexdigest()


def data_url(data: bytes, mime: str) -> str:
    """``data`` as a base64 ``data:`` URL of type ``mime``."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


class MediaStore(dict[str, tuple[bytes, str]]):
    """An episode's media by sha256, each item's base64 data URL made once."""

    def __init__(self) -> None:
        super().__init__()
        self._urls: dict[str, str] = {}

    def data_url(self, sha: str) -> str:
        url = self._urls.get(sha)
        if url is None:
            data, mime = self[sha]
            url = self._urls[sha] = data_url(data, mime)
        return url


def media_data_url(media: Media, sha: str) -> str:
    """The data URL of media item ``sha`` (from the store's memo for a :class:`MediaStore`)."""
    if isinstance(media, MediaStore):
        return media.data_url(sha)
    data, mime = media[sha]
    return data_url(data, mime)
