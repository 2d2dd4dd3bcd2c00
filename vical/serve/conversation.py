"""What the server reads out of one request, whatever the API it came in."""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import re
from dataclasses import dataclass, field

from PIL import Image

from vical.agent.prompts import next_turn_text

_MOVE_BEFORE, _MOVE_AFTER = next_turn_text("\0").split("\0")
_MOVE_RE = re.compile("^" + re.escape(_MOVE_BEFORE) + "(.+?)" + re.escape(_MOVE_AFTER) + "$", re.M)


class BadRequest(Exception):
    """The request could not be read (HTTP 400)."""


@functools.lru_cache(maxsize=1024)
def _b64decode(text: str) -> bytes:
    """Decode standard or URL-safe base64 (google-genai sends the URL-safe alphabet).

    Memoised like :func:`_image_size`: each request of an episode repeats every earlier
    frame, and looking a text up costs less than decoding it again (errors are not
    cached)."""
    if "-" in text or "_" in text:
        return base64.urlsafe_b64decode(text.encode("ascii"))
    return base64.b64decode(text, validate=True)


def decode_base64(text: str, what: str) -> bytes:
    """The bytes of base64 ``text``; :class:`BadRequest` saying ``what`` is not valid base64."""
    try:
        return _b64decode(text)
    except ValueError as e:
        raise BadRequest(f"{what} is not valid base64: {e}") from e


@functools.lru_cache(maxsize=1024)
def _image_size(data: bytes) -> tuple[int, int]:
    """Decode an image fully (a payload that is not one is refused) and give its size.

    Every request of an episode carries the whole conversation again, so the same
    frames arrive turn after turn: each distinct image is decoded once (failures are
    not cached, so a bad image is refused every time)."""
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        return im.size


@dataclass
class Conversation:
    """What the server read out of one request, whatever the API."""

    model: str
    texts: list[str] = field(default_factory=list)  # user text parts in order
    images: list[bytes] = field(default_factory=list)
    videos: list[bytes] = field(default_factory=list)
    n_assistant: int = 0
    n_system: int = 0
    image_sizes: list[tuple[int, int]] = field(default_factory=list)
    first_turn_images: int | None = None  # images in the first user message

    def end_user_message(self) -> None:
        if self.first_turn_images is None:
            self.first_turn_images = len(self.images)

    @property
    def start_frame(self) -> bytes | None:
        """The last image of the first user message: the episode's start frame."""
        n = self.first_turn_images
        return self.images[n - 1] if n else None

    def moves(self) -> list[str]:
        """Actions applied so far, read from the "your move … has been applied" lines."""
        return [m.group(1) for t in self.texts for m in _MOVE_RE.finditer(t)]

    def add_media(self, mime: str, data: bytes) -> None:
        if mime.startswith("image/"):
            try:
                self.image_sizes.append(_image_size(data))
            except Exception as e:
                raise BadRequest(f"image {len(self.images) + 1} could not be decoded: {e}") from e
            self.images.append(data)
        elif mime.startswith("video/"):
            if mime != "video/mp4" or data[4:8] != b"ftyp":
                raise BadRequest(f"video {len(self.videos) + 1} is not an MP4 file")
            self.videos.append(data)
        else:
            raise BadRequest(f"unsupported media type {mime!r}")

    def add_data_url(self, url: str) -> None:
        m = re.match(r"^data:([^;,]+);base64,(.*)$", url, re.DOTALL)
        if not m:
            raise BadRequest("media must be a base64 data URL")
        self.add_media(m.group(1), decode_base64(m.group(2), "media data"))

    def content_digest(self) -> bytes:
        """sha256 over what the request says that a policy may answer from: the user
        texts in order, each image's and video's bytes (as their sha256) and the number
        of earlier replies. Everything else (the JSON layout, the API, the model name,
        fields such as an image part's ``"detail": "auto"``) leaves it unchanged, so one
        conversation gets the same seeded answer whichever client sent it."""
        h = hashlib.sha256(b"vical-conversation-1\0")
        for t in self.texts:
            h.update(b"text\0" + t.encode() + b"\0")
        for kind, items in (("image", self.images), ("video", self.videos)):
            for data in items:
                h.update(kind.encode() + b"\0" + hashlib.sha256(data).digest())
        h.update(f"replies\0{self.n_assistant}".encode())
        return h.digest()

    def estimated_tokens(self) -> int:
        return sum(len(t) for t in self.texts) // 4 + 85 * len(self.images) + 300 * len(self.videos)
