"""The bundle file read as an archive, forward only, trusting nothing in it.

:func:`vical.submit.unpack.unpack_bundle` reads an untrusted archive through this
module: :func:`open_bundle` opens only a regular file (never a FIFO, a device or
standard input); :class:`Stream` is the archive's bytes, gunzipped in bounded pieces
and capped; :func:`members` is a tar reader written for this purpose (not
:mod:`tarfile`, whose pax and long-name handling reads headers of any size into
memory), which applies extension headers within :data:`MAX_EXT_HEADER_BYTES` and
:data:`MAX_EXT_HEADERS`; :func:`check_member` admits a regular file or a folder under
``bundle/`` at a safe path (:func:`check_rel_path`) and refuses links, devices, FIFOs
and sparse files, naming the member. Every failure is a
:class:`~vical.submit.verdict.VerifyError` with a one-line message, for a corrupt or
truncated gzip stream, a corrupt tar header or a non-UTF-8 name alike.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from vical.submit.bundle import TOP
from vical.submit.verdict import VerifyError

MAX_EXT_HEADER_BYTES = 64 * 1024  # one pax header or GNU long name
MAX_EXT_HEADERS = 3  # extension headers in a row before one member
MAX_PATH_BYTES = 1024
MAX_PART_BYTES = 255
RESERVED = ("manifest.json", "manifest.sig")
BLOCK = 512
_CHUNK = 1 << 20
_RECORD = 20 * BLOCK  # tar pads an archive to a whole record of 10 KiB


# -- paths ---------------------------------------------------------------------
def _bad_char(s: str) -> str | None:
    for c in s:
        if c == "\\":
            return "a backslash"
        if ord(c) < 0x20 or ord(c) == 0x7F:
            return f"control character {c!r}"
    return None


def check_rel_path(rel: Any, stage: str = "manifest", reserved_ok: bool = False) -> tuple[str, ...]:
    """The parts of ``rel``, a file path inside ``bundle/``, or raise :class:`VerifyError`.

    Allowed: a relative POSIX path of non-empty parts other than ``.`` and ``..``,
    without backslashes, NUL or other control characters, valid UTF-8, at most
    :data:`MAX_PATH_BYTES` long, and not one of the two manifest files.
    """
    if not isinstance(rel, str):
        raise VerifyError(stage, f"path {rel!r} is not a string")
    try:
        size = len(rel.encode("utf-8"))
    except UnicodeEncodeError:
        raise VerifyError(stage, f"path {rel!r} is not valid UTF-8") from None
    if not rel:
        raise VerifyError(stage, "empty path")
    if size > MAX_PATH_BYTES:
        raise VerifyError(stage, f"path {rel[:80]!r}... is longer than {MAX_PATH_BYTES} bytes")
    if rel.startswith("/"):
        raise VerifyError(stage, f"absolute path {rel!r}: paths must be relative to {TOP}/")
    bad = _bad_char(rel)
    if bad:
        raise VerifyError(stage, f"path {rel!r} contains {bad}")
    parts = tuple(rel.split("/"))
    for part in parts:
        if part == "..":
            raise VerifyError(stage, f"path with '..' {rel!r}")
        if part in ("", "."):
            raise VerifyError(stage, f"path {rel!r} has an empty or '.' part")
        if len(part.encode()) > MAX_PART_BYTES:
            raise VerifyError(stage, f"path {rel!r} has a part longer than {MAX_PART_BYTES} bytes")
    if rel in RESERVED and not reserved_ok:
        raise VerifyError(stage, f"{rel!r} cannot be listed as a bundle file")
    return parts


# -- the bundle file and its decompressed stream -----------------------------------
def open_bundle(bundle: Path) -> BinaryIO:
    """Open ``bundle`` for reading; it must be a regular file (never a FIFO or device)."""
    try:
        fd = os.open(bundle, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise VerifyError("unpack", f"{bundle}: cannot open ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise VerifyError("unpack", f"{bundle}: not a regular file (device, FIFO or folder)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class _Gunzip:
    """One gzip member, decompressed forward in bounded pieces; :meth:`rest` is what
    follows the member in the file (a second member or any trailing bytes)."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.d = zlib.decompressobj(wbits=31)  # gzip header and trailer, one member
        self.buf = b""  # decompressed, not yet read (at most _CHUNK bytes)
        self.at = 0

    def read(self, n: int) -> bytes:
        while self.at >= len(self.buf) and not self.d.eof:
            src = self.d.unconsumed_tail or self.raw.read(_CHUNK)
            if not src:
                raise EOFError("the compressed stream ends before its end marker")
            self.buf, self.at = self.d.decompress(src, _CHUNK), 0
        out = self.buf[self.at : self.at + n]
        self.at += len(out)
        return out

    def rest(self) -> bytes:
        """Up to a few bytes past the end of the member (b"": the file ends with it)."""
        return self.d.unused_data[:16] or self.raw.read(16)


class Stream:
    """The archive's bytes (gunzipped if needed), read forward only, with a cap."""

    def __init__(self, raw: BinaryIO, limit: int):
        raw.seek(0)
        magic = raw.read(2)
        raw.seek(0)
        self._f: _Gunzip | BinaryIO = _Gunzip(raw) if magic == b"\x1f\x8b" else raw
        self.pos = 0
        self.limit = limit

    def finish(self) -> None:
        """At the end-of-archive marker: what follows may only be the tar's zero padding
        (to its 10 KiB record), then the end of the compressed stream and of the file."""
        left = _RECORD + 2 * BLOCK
        while True:
            chunk = self._read_some(min(left, _CHUNK)) if left else self._read_some(1)
            if not chunk:
                break
            if not left or chunk.count(0) != len(chunk):
                raise VerifyError(
                    "unpack", f"data after the end of the archive (near byte {self.pos}): refusing"
                )
            self.pos += len(chunk)
            left -= len(chunk)
        if isinstance(self._f, _Gunzip) and self._f.rest():
            raise VerifyError("unpack", "bytes after the end of the compressed stream: refusing")

    def _read_some(self, n: int) -> bytes:
        try:
            return self._f.read(n)
        except (OSError, EOFError, zlib.error) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise VerifyError(
                "unpack", f"gzip stream corrupt or truncated near byte {self.pos}: {msg}"
            ) from None

    def read(self, n: int, at_header: bool = False) -> bytes:
        """Exactly ``n`` bytes; ``b""`` at a clean end of stream when ``at_header``."""
        if self.pos + n > self.limit:
            raise VerifyError(
                "unpack", f"archive longer than the {self.limit} bytes allowed: refusing"
            )
        out = bytearray()
        while len(out) < n:
            chunk = self._read_some(min(n - len(out), _CHUNK))
            if not chunk:
                if at_header and not out:
                    return b""
                raise VerifyError(
                    "unpack", f"archive truncated: ends at byte {self.pos + len(out)} mid-member"
                )
            out += chunk
        self.pos += n
        return bytes(out)

    def chunks(self, n: int, name: str) -> Iterator[bytes]:
        """The ``n`` data bytes of member ``name``, in pieces of at most 1 MiB."""
        if self.pos + n > self.limit:
            raise VerifyError(
                "unpack",
                f"member {name!r} declares {n} bytes, past the {self.limit} bytes "
                "this archive may hold: refusing",
            )
        while n > 0:
            piece = self.read(min(n, _CHUNK))
            n -= len(piece)
            yield piece


# -- tar headers -------------------------------------------------------------------
@dataclass
class Member:
    name: str
    kind: str  # "file", "dir", "hardlink", "symlink", "chardev", "blockdev", "fifo", ...
    size: int
    linkname: str
    offset: int


_KINDS = {
    b"0": "file",
    b"\0": "file",
    b"7": "file-contiguous",
    b"1": "hardlink",
    b"2": "symlink",
    b"3": "chardev",
    b"4": "blockdev",
    b"5": "dir",
    b"6": "fifo",
    b"S": "sparse",
}


def _corrupt(offset: int, what: str) -> VerifyError:
    return VerifyError("unpack", f"corrupt tar header at byte {offset}: {what}")


def _number(field: bytes, offset: int, what: str) -> int:
    if field and field[0] & 0x80:  # GNU base-256
        if field[0] == 0xFF:
            raise _corrupt(offset, f"negative {what}")
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    s = field.split(b"\0", 1)[0].strip(b" ")
    if not s:
        return 0
    if not re.fullmatch(rb"[0-7]+", s):
        raise _corrupt(offset, f"{what} {s[:20]!r} is not an octal number")
    return int(s, 8)


def _text(raw: bytes, offset: int, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise VerifyError(
            "unpack", f"tar member at byte {offset}: {what} {raw[:80]!r} is not UTF-8"
        ) from None


def _cstr(field: bytes) -> bytes:
    return field.split(b"\0", 1)[0]


def _parse_pax(data: bytes, offset: int) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        if data[pos:].strip(b"\0") == b"":
            break
        sp = data.find(b" ", pos, pos + 12)
        if sp < 0 or not data[pos:sp].isdigit():
            raise _corrupt(offset, "bad pax record length")
        length = int(data[pos:sp])
        record = data[pos : pos + length]
        if length <= sp - pos + 1 or len(record) != length or not record.endswith(b"\n"):
            raise _corrupt(offset, "bad pax record")
        key, eq, value = record[sp - pos + 1 : -1].partition(b"=")
        if not eq:
            raise _corrupt(offset, "pax record without '='")
        out[_text(key, offset, "pax key")] = _text(value, offset, "pax value")
        pos += length
    return out


def members(stream: Stream) -> Iterator[Member]:
    """Tar members in order; extension headers are applied, their data capped."""
    pending: dict[str, str] = {}
    ext = 0
    while True:
        offset = stream.pos
        hdr = stream.read(BLOCK, at_header=True)
        if not hdr or hdr == bytes(BLOCK):
            if ext:
                raise _corrupt(offset, "extension header without a member after it")
            return
        stored = _number(hdr[148:156], offset, "checksum")
        unsigned = sum(hdr[:148]) + 8 * 32 + sum(hdr[156:])
        signed = unsigned - 256 * sum(1 for b in hdr[:148] + hdr[156:] if b & 0x80)
        if stored not in (unsigned, signed):
            raise _corrupt(offset, "checksum mismatch")
        typeflag = hdr[156:157]
        size = _number(hdr[124:136], offset, "size")
        if typeflag in (b"x", b"L", b"K"):
            ext += 1
            if ext > MAX_EXT_HEADERS:
                raise _corrupt(offset, f"more than {MAX_EXT_HEADERS} extension headers in a row")
            if size > MAX_EXT_HEADER_BYTES:
                raise VerifyError(
                    "unpack",
                    f"extension header at byte {offset} is {size} bytes "
                    f"(more than {MAX_EXT_HEADER_BYTES}): refusing",
                )
            data = stream.read(-(-size // BLOCK) * BLOCK)[:size]
            if typeflag == b"x":
                pending.update(_parse_pax(data, offset))
            else:
                key = "path" if typeflag == b"L" else "linkpath"
                pending[key] = _text(_cstr(data), offset, "GNU long name")
            continue
        if typeflag == b"g":
            raise VerifyError("unpack", f"global pax header at byte {offset}: not supported")
        name_raw = _cstr(hdr[0:100])
        if hdr[257:263] == b"ustar\0":  # POSIX ustar: a prefix may hold the start of the name
            prefix = _cstr(hdr[345:500])
            if prefix:
                name_raw = prefix + b"/" + name_raw
        name = pending.get("path") or _text(name_raw, offset, "member name")
        linkname = pending.get("linkpath") or _text(_cstr(hdr[157:257]), offset, "link name")
        if any(k.startswith("GNU.sparse") for k in pending):
            kind = "sparse"
        else:
            kind = _KINDS.get(typeflag, f"type {typeflag!r}")
        if "size" in pending:
            if not pending["size"].isdigit() or len(pending["size"]) > 20:
                raise _corrupt(offset, f"pax size {pending['size'][:30]!r}")
            size = int(pending["size"])
        if kind == "file" and typeflag == b"\0" and name.endswith("/"):
            kind = "dir"
        pending, ext = {}, 0
        yield Member(name, kind, size, linkname, offset)


def check_member(m: Member) -> tuple[str, ...]:
    """Parts under ``bundle/`` of an acceptable member (a regular file or a folder)."""
    name = m.name
    if name.startswith("/"):
        raise VerifyError("unpack", f"absolute path in archive: {name!r}")
    if ".." in name.split("/"):
        raise VerifyError("unpack", f"path with '..' in archive: {name!r}")
    if m.kind in ("hardlink", "symlink"):
        raise VerifyError("unpack", f"link in archive: {name!r} -> {m.linkname!r} ({m.kind})")
    if m.kind in ("chardev", "blockdev", "fifo"):
        raise VerifyError("unpack", f"special file (device/fifo) in archive: {name!r} ({m.kind})")
    if m.kind == "sparse":
        raise VerifyError("unpack", f"sparse file in archive: {name!r}")
    if m.kind not in ("file", "dir"):
        raise VerifyError("unpack", f"unsupported member {name!r} ({m.kind})")
    if m.kind == "dir":
        name = name.rstrip("/")
        if m.size:
            raise VerifyError("unpack", f"folder {m.name!r} carries {m.size} bytes of data")
    elif name.endswith("/"):
        raise VerifyError("unpack", f"regular file with a folder name: {name!r}")
    if name == TOP:
        if m.kind == "file":
            raise VerifyError("unpack", f"{TOP!r} is a file; it must be the bundle's folder")
        return ()
    if not name.startswith(TOP + "/"):
        raise VerifyError("unpack", f"file outside '{TOP}/' in archive: {name!r}")
    return check_rel_path(name[len(TOP) + 1 :], stage="unpack", reserved_ok=True)
