"""Hostile bundles derived from one valid, signed bundle.

Every :class:`Case` writes one bundle file from a :class:`Source` (the valid
bundle's manifest, files and signing key). ``expect`` says what ``vical verify``
must do with it:

* a regular expression: rejected with a :class:`VerifyError` whose message matches;
* ``""``: a harmless rewrite (other member order, other compression, folder
  entries) that must still verify;
* ``None``: either rejected or verified with content identical to the original
  (a flipped byte may land where it changes nothing, e.g. the gzip header's mtime).

Large cases (bombs, 300,000 members) are streamed to disk: they stay a few MB
on disk and are never held in memory as a whole.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import struct
import tarfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vical.submit.keys import key_id, public_pem, sign

TOP = "bundle"
MiB = 1024**2
GiB = 1024**3
BLOCK = 512
# a pre-computed tar member: header info and data, or raw blocks written as they are
Entry = tuple[tarfile.TarInfo, bytes] | bytes


# -- the valid bundle ------------------------------------------------------------------
@dataclass
class Source:
    """A valid bundle taken apart: what a hostile variant starts from."""

    manifest: dict[str, Any]
    files: dict[str, bytes]  # path inside bundle/ -> content
    key: Ed25519PrivateKey
    original: bytes  # the valid bundle file

    def manifest_bytes(self, manifest: dict[str, Any] | None = None) -> bytes:
        m = self.manifest if manifest is None else manifest
        return (json.dumps(m, indent=2, sort_keys=True) + "\n").encode()

    def sig_dict(self, mbytes: bytes, key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
        k = key or self.key
        return {
            "key_id": key_id(k.public_key()),
            "public_key": public_pem(k.public_key()).decode(),
            "signature": sign(k, mbytes),
            "algorithm": "ed25519",
        }

    def sig_bytes(self, mbytes: bytes, key: Ed25519PrivateKey | None = None) -> bytes:
        return (json.dumps(self.sig_dict(mbytes, key), indent=2) + "\n").encode()

    def edited(self, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        m = copy.deepcopy(self.manifest)
        edit(m)
        return m

    def head(self, mbytes: bytes | None = None, sbytes: bytes | None = None) -> list[Entry]:
        """The two manifest members (the original ones unless given)."""
        mb = self.manifest_bytes() if mbytes is None else mbytes
        sb = self.sig_bytes(mb) if sbytes is None else sbytes
        return [member(f"{TOP}/manifest.json", mb), member(f"{TOP}/manifest.sig", sb)]

    def body(self, files: dict[str, bytes] | None = None) -> list[Entry]:
        return [member(f"{TOP}/{p}", d) for p, d in sorted((files or self.files).items())]

    def entries(self, mbytes: bytes | None = None, sbytes: bytes | None = None) -> list[Entry]:
        return self.head(mbytes, sbytes) + self.body()


def load_source(bundle: Path, key: Ed25519PrivateKey) -> Source:
    """Take apart a bundle this test suite made itself (so :mod:`tarfile` may read it)."""
    files: dict[str, bytes] = {}
    manifest: dict[str, Any] = {}
    with tarfile.open(bundle, "r:gz") as tar:
        for m in tar:
            if not m.isfile():
                continue
            f = tar.extractfile(m)
            assert f is not None
            data = f.read()
            rel = m.name.removeprefix(f"{TOP}/")
            if rel == "manifest.json":
                manifest = json.loads(data)
            elif rel != "manifest.sig":
                files[rel] = data
    return Source(manifest, files, key, Path(bundle).read_bytes())


# -- writing tar and gzip --------------------------------------------------------------
def member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **attrs: Any) -> Entry:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    for k, v in attrs.items():
        setattr(info, k, v)
    return info, data


def _pad(n: int) -> bytes:
    return bytes(-n % BLOCK)


def tar_bytes(entries: Iterable[Entry], fmt: int = tarfile.PAX_FORMAT, end: bool = True) -> bytes:
    out = io.BytesIO()
    for e in entries:
        if isinstance(e, bytes):
            out.write(e)
            continue
        info, data = e
        out.write(info.tobuf(fmt, "utf-8", "surrogateescape"))
        out.write(data + _pad(len(data)))
    if end:
        out.write(bytes(2 * BLOCK))
    return out.getvalue()


def raw_header(
    name: bytes, size: int, typeflag: bytes, patch: dict[int, bytes] | None = None
) -> bytes:
    """One ustar header block with any size and type, checksum made to match."""
    h = bytearray(BLOCK)
    h[0 : len(name)] = name[:100]
    h[100:108] = b"0000644\0"
    h[108:116] = h[116:124] = b"0000000\0"
    h[124:136] = b"%011o\0" % size if size < 8**11 else b"\x80" + size.to_bytes(11, "big")
    h[136:148] = b"00000000000\0"
    h[156:157] = typeflag
    h[257:265] = b"ustar\x0000"
    for off, b in (patch or {}).items():
        h[off : off + len(b)] = b
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def pax_block(records: dict[str, bytes], typeflag: bytes = b"x") -> bytes:
    """A pax extended header (``x``, or ``g`` for global) with its data."""
    data = b""
    for key, value in records.items():
        body = b" " + key.encode() + b"=" + value + b"\n"
        n = len(body) + 1
        while len(b"%d" % n) + len(body) != n:
            n += 1
        data += b"%d" % n + body
    return raw_header(b"././@PaxHeader", len(data), typeflag) + data + _pad(len(data))


class GzipStream:
    """A gzip file written piece by piece; long runs of zeros cost almost nothing."""

    def __init__(self, f: BinaryIO, level: int = 6):
        self.f = f
        self.co = zlib.compressobj(level, zlib.DEFLATED, -15)
        self.crc = 0
        self.size = 0
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")

    def write(self, data: bytes) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.f.write(self.co.compress(data))

    def zeros(self, n: int) -> None:
        """``n`` zero bytes; after a full flush each 1 MiB of zeros compresses the same."""
        chunk = bytes(MiB)
        self.f.write(self.co.flush(zlib.Z_FULL_FLUSH))
        block = b""
        while n >= MiB:
            if not block:
                block = self.co.compress(chunk) + self.co.flush(zlib.Z_FULL_FLUSH)
            self.f.write(block)
            self.crc = zlib.crc32(chunk, self.crc)
            self.size += MiB
            n -= MiB
        self.write(bytes(n))

    def close(self) -> None:
        self.f.write(self.co.flush())
        self.f.write(struct.pack("<II", self.crc, self.size & 0xFFFFFFFF))


def write_gz(path: Path, entries: Iterable[Entry], fmt: int = tarfile.PAX_FORMAT) -> None:
    path.write_bytes(gzip.compress(tar_bytes(entries, fmt), 6, mtime=0))


def flip(data: bytes, pos: int, mask: int = 0x01) -> bytes:
    b = bytearray(data)
    b[pos % len(b)] ^= mask or 0x01
    return bytes(b)


# -- the cases -------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    expect: str | None
    build: Callable[[Source, Path], None]
    big: bool = False  # a stream of hundreds of MB or more once decompressed


CASES: dict[str, Case] = {}


def _case(name: str, expect: str | None, big: bool = False):
    def register(fn: Callable[[Source, Path], None]) -> Callable[[Source, Path], None]:
        assert name not in CASES, name
        CASES[name] = Case(name, expect, fn, big)
        return fn

    return register


def _signed_listing(name: str, expect: str, path: str, resign: bool = True) -> None:
    """A manifest listing ``path`` (signed by the trusted key unless ``resign`` is False)."""

    def build(src: Source, out: Path) -> None:
        m = src.edited(lambda m: m["files"].__setitem__(path, {"sha256": "0" * 64, "size": 1}))
        mb = src.manifest_bytes(m)
        sb = src.sig_bytes(mb) if resign else src.sig_bytes(src.manifest_bytes())
        write_gz(out, src.entries(mb, sb))

    CASES[name] = Case(name, expect, build)


# 1. paths in the manifest: refused by the signature, or after it, never opened
_signed_listing("manifest_traversal_unsigned", "signature does not match", "../" * 6 + "etc/hostname", resign=False)  # fmt: skip
_signed_listing("manifest_traversal", r"path with '\.\.'", "../" * 6 + "etc/hostname")
_signed_listing("manifest_traversal_dev_zero", r"path with '\.\.'", "../" * 8 + "dev/zero")
_signed_listing("manifest_absolute_dev_zero", "absolute path '/dev/zero'", "/dev/zero")
_signed_listing("manifest_absolute_dev_stdin", "absolute path '/dev/stdin'", "/dev/stdin")
_signed_listing("manifest_absolute_hostname", "absolute path '/etc/hostname'", "/etc/hostname")
_signed_listing("manifest_backslash", "backslash", "run\\..\\..\\evil")
_signed_listing("manifest_dot_part", r"empty or '\.' part", "run/./evil")
_signed_listing("manifest_empty_part", r"empty or '\.' part", "run//evil")
_signed_listing("manifest_trailing_slash", r"empty or '\.' part", "run/evil/")
_signed_listing("manifest_nul", "control character", "run/evil\0.json")
_signed_listing("manifest_reserved_name", "cannot be listed", "manifest.sig")
_signed_listing("manifest_empty_path", "empty path", "")
_signed_listing("manifest_file_and_folder", "listed as a file and used as a folder", "run/manifest.json/x")  # fmt: skip


def _signed_edit(name: str, expect: str, edit: Callable[[dict[str, Any]], None]) -> None:
    def build(src: Source, out: Path) -> None:
        mb = src.manifest_bytes(src.edited(edit))
        write_gz(out, src.entries(mb, src.sig_bytes(mb)))

    CASES[name] = Case(name, expect, build)


def _first(m: dict[str, Any]) -> str:
    return sorted(m["files"])[0]


def _set_entry(m: dict[str, Any], value: Any) -> None:
    m["files"][_first(m)] = value


_signed_edit("manifest_format_1", "format 1 .* re-pack", lambda m: m.update(format=1, files={p: e["sha256"] for p, e in m["files"].items()}))  # fmt: skip
_signed_edit("manifest_format_string", "unknown bundle format", lambda m: m.update(format="2"))
_signed_edit("manifest_format_missing", "unknown bundle format", lambda m: m.pop("format"))
_signed_edit("manifest_entry_string", "entry must be", lambda m: _set_entry(m, "0" * 64))
_signed_edit("manifest_size_bool", "size must be", lambda m: _set_entry(m, {"sha256": "0" * 64, "size": True}))  # fmt: skip
_signed_edit("manifest_size_negative", "size must be", lambda m: _set_entry(m, {"sha256": "0" * 64, "size": -1}))  # fmt: skip
_signed_edit("manifest_size_float", "size must be", lambda m: _set_entry(m, {"sha256": "0" * 64, "size": 1.0}))  # fmt: skip
_signed_edit("manifest_sha_uppercase", "sha256 must be", lambda m: _set_entry(m, {"sha256": "A" * 64, "size": 1}))  # fmt: skip
_signed_edit("manifest_total_too_big", "files total more than", lambda m: _set_entry(m, {"sha256": "0" * 64, "size": 5 * GiB}))  # fmt: skip
_signed_edit("manifest_files_list", "'files' must be", lambda m: m.update(files=[]))
_signed_edit("manifest_files_empty", "'files' must be", lambda m: m.update(files={}))
_signed_edit("manifest_fingerprint_list", "field 'fingerprint'", lambda m: m.update(fingerprint=[]))  # fmt: skip
_signed_edit("manifest_partial_string", "field 'partial'", lambda m: m.update(partial="yes"))
_signed_edit("manifest_missing_tasks_numbers", "missing_tasks", lambda m: m.update(missing_tasks=[1, 2]))  # fmt: skip
_signed_edit("manifest_team_number", "submitter.team", lambda m: m["submitter"].update(team=7))
_signed_edit("manifest_listed_size_lies", "size mismatch", lambda m: _set_entry(m, {**m["files"][_first(m)], "size": m["files"][_first(m)]["size"] + 1}))  # fmt: skip
_signed_edit("manifest_listed_sha_lies", "sha256 mismatch", lambda m: _set_entry(m, {**m["files"][_first(m)], "sha256": "f" * 64}))  # fmt: skip
_signed_edit("manifest_lists_absent_file", "listed file missing", lambda m: m["files"].update({"run/episodes/cliffwalking__base__r0/media/" + "a" * 64 + ".jpg": {"sha256": "0" * 64, "size": 3}}))  # fmt: skip


def _raw_manifest(name: str, expect: str, mbytes: bytes, sign_it: bool = True) -> None:
    def build(src: Source, out: Path) -> None:
        sb = src.sig_bytes(mbytes) if sign_it else src.sig_bytes(src.manifest_bytes())
        write_gz(out, src.entries(mbytes, sb))

    CASES[name] = Case(name, expect, build)


_raw_manifest("manifest_json_list", "manifest.json must be a JSON object, not a list", b"[]\n")
_raw_manifest("manifest_json_number", "manifest.json must be a JSON object, not a int", b"12345")
_raw_manifest("manifest_not_json", "manifest.json is not JSON", b'{"format": 2,')
_raw_manifest("manifest_deep_json", "manifest.json is not JSON", b"[" * 200_000 + b"]" * 200_000)
_raw_manifest("manifest_not_utf8", "manifest.json is not JSON", b'{"format": 2, "x": "\xff\xfe"}')
_raw_manifest("manifest_empty", "manifest.json is not JSON", b"")


def _raw_sig(name: str, expect: str, make: Callable[[Source, bytes], bytes]) -> None:
    def build(src: Source, out: Path) -> None:
        mb = src.manifest_bytes()
        write_gz(out, src.entries(mb, make(src, mb)))

    CASES[name] = Case(name, expect, build)


def _sig_with(**fields: Any) -> Callable[[Source, bytes], bytes]:
    return lambda src, mb: json.dumps({**src.sig_dict(mb), **fields}).encode()


_raw_sig("sig_json_list", "manifest.sig must be a JSON object, not a list", lambda s, mb: b"[1, 2]")
_raw_sig("sig_not_json", "manifest.sig is not JSON", lambda s, mb: b"signature")
_raw_sig("sig_signature_number", "'signature' must be a string", _sig_with(signature=12345))
_raw_sig("sig_signature_missing", "'signature' must be a string", _sig_with(signature=None))
_raw_sig("sig_public_key_list", "'public_key' must be a string", _sig_with(public_key=["x"]))
_raw_sig("sig_public_key_garbage", "not a PEM public key", _sig_with(public_key="hello"))
_raw_sig("sig_algorithm_other", "unsupported algorithm", _sig_with(algorithm="rsa"))
_raw_sig("sig_base64_garbage", "signature does not match", _sig_with(signature="!!!not base64"))
_raw_sig("sig_too_big", "more than 65536", lambda s, mb: b" " * 70_000 + s.sig_bytes(mb))


@_case("manifest_changed_after_signing", "signature does not match")
def _changed_after(src: Source, out: Path) -> None:
    sb = src.sig_bytes(src.manifest_bytes())
    mb = src.manifest_bytes(src.edited(lambda m: m["submitter"].update(team="Someone else")))
    write_gz(out, src.entries(mb, sb))


@_case("manifest_other_key", "unknown key")
def _other_key(src: Source, out: Path) -> None:
    mb = src.manifest_bytes()
    write_gz(out, src.entries(mb, src.sig_bytes(mb, Ed25519PrivateKey.generate())))


@_case("manifest_too_big", "more than 16777216")
def _manifest_big(src: Source, out: Path) -> None:
    mb = src.manifest_bytes()[:-2] + b" " * (17 * MiB) + b"}\n"
    write_gz(out, src.entries(mb, src.sig_bytes(mb)))


@_case("manifest_missing", "manifest.json or bundle/manifest.sig is missing")
def _manifest_missing(src: Source, out: Path) -> None:
    write_gz(out, src.head()[1:] + src.body())


@_case("manifest_is_folder", "is a folder, not a file")
def _manifest_folder(src: Source, out: Path) -> None:
    write_gz(out, [member(f"{TOP}/manifest.json", kind=tarfile.DIRTYPE), *src.entries()])


@_case("manifest_duplicate", "duplicate member")
def _manifest_dup(src: Source, out: Path) -> None:
    other = src.manifest_bytes(src.edited(lambda m: m.update(partial=not m["partial"])))
    write_gz(out, [*src.head(), *src.body(), member(f"{TOP}/manifest.json", other)])


@_case("manifest_duplicate_before_sig", "duplicate member")
def _manifest_dup_early(src: Source, out: Path) -> None:
    mj, ms = src.head()
    write_gz(out, [mj, mj, ms, *src.body()])


# 2. members of the archive (the manifest is the valid, signed one)
def _extra(name: str, expect: str, *extra: Entry, before: bool = False) -> None:
    def build(src: Source, out: Path) -> None:
        if before:
            write_gz(out, [*extra, *src.entries()])
        else:
            write_gz(out, [*src.entries(), *extra])

    CASES[name] = Case(name, expect, build)


_extra("member_dotdot", r"path with '\.\.' in archive", member(f"{TOP}/../../etc/evil", b"x"))
_extra("member_dotdot_first", r"path with '\.\.' in archive", member(f"{TOP}/../evil", b"x"), before=True)  # fmt: skip
_extra("member_absolute", "absolute path in archive", member("/tmp/evil", b"x"))
_extra("member_outside_top", "outside 'bundle/'", member("elsewhere/evil", b"x"))
_extra("member_backslash", "backslash", member(f"{TOP}/run\\evil", b"x"))
_extra("member_dot_part", r"empty or '\.' part", member(f"{TOP}/./run/evil", b"x"))
_extra("symlink", "link in archive", member(f"{TOP}/run/link", kind=tarfile.SYMTYPE, linkname="/etc/passwd"))  # fmt: skip
_extra("symlink_first", "link in archive", member(f"{TOP}/run", kind=tarfile.SYMTYPE, linkname="/etc"), before=True)  # fmt: skip
_extra("hardlink", "link in archive", member(f"{TOP}/run/hard", kind=tarfile.LNKTYPE, linkname="/etc/passwd"))  # fmt: skip
_extra("fifo", "special file", member(f"{TOP}/run/fifo", kind=tarfile.FIFOTYPE))
_extra("char_device", "special file", member(f"{TOP}/run/zero", kind=tarfile.CHRTYPE, devmajor=1, devminor=5))  # fmt: skip
_extra("block_device", "special file", member(f"{TOP}/run/sda", kind=tarfile.BLKTYPE, devmajor=8, devminor=0))  # fmt: skip
_extra("contiguous_file", "unsupported member", raw_header(f"{TOP}/run/c".encode(), 0, b"7"))
_extra("unknown_type", "unsupported member", raw_header(f"{TOP}/run/v".encode(), 0, b"V"))
_extra("bundle_is_a_file", "'bundle' is a file", member(TOP, b"not a folder"), before=True)
_extra("file_used_as_folder", "a file and a folder share", member(f"{TOP}/run/manifest.json/x", b"x"))  # fmt: skip
_extra("folder_over_listed_file", "is a folder but is listed as a file", member(f"{TOP}/run/manifest.json", kind=tarfile.DIRTYPE), before=True)  # fmt: skip
_extra("folder_unlisted", "folder not in the manifest", member(f"{TOP}/evil", kind=tarfile.DIRTYPE))  # fmt: skip
_extra("folder_with_data", "carries 3 bytes", raw_header(f"{TOP}/run/".encode(), 3, b"5") + b"abc" + _pad(3))  # fmt: skip
_extra("unlisted_extra_file", "file not listed in the manifest: 'bundle/run/extra.txt'", member(f"{TOP}/run/extra.txt", b"extra"))  # fmt: skip
_extra("pax_header_huge", r"extension header .* refusing", raw_header(b"././@PaxHeader", 2 * GiB, b"x"))  # fmt: skip
_extra("gnu_longname_huge", r"extension header .* refusing", raw_header(b"././@LongLink", GiB, b"L"))  # fmt: skip
_extra("pax_size_huge", "pax size", pax_block({"size": b"9" * 40}) + raw_header(f"{TOP}/run/x".encode(), 0, b"0"))  # fmt: skip
_extra("pax_path_huge", r"extension header .* refusing", pax_block({"path": b"a" * 100_000}))
_extra("pax_record_corrupt", "bad pax record", raw_header(b"././@PaxHeader", 12, b"x") + b"999 path=x\n" + _pad(11) + raw_header(f"{TOP}/run/x".encode(), 0, b"0"))  # fmt: skip
_extra("pax_headers_chained", "extension headers in a row", *[pax_block({"comment": b"x"})] * 5)
_extra("pax_global", "global pax header", pax_block({"comment": b"x"}, b"g"))
_extra("pax_path_not_utf8", "not UTF-8", pax_block({"path": f"{TOP}/run/".encode() + b"\xff\xfe"}) + raw_header(f"{TOP}/run/x".encode(), 0, b"0"))  # fmt: skip
_extra("name_not_utf8", "not UTF-8", raw_header(f"{TOP}/run/".encode() + b"\xff\xfe", 0, b"0"))
_extra("sparse_gnu", "sparse file in archive", raw_header(f"{TOP}/run/sparse".encode(), 0, b"S", {483: b"%011o\0" % (3 * GiB)}))  # fmt: skip
_extra("sparse_pax", "sparse file in archive", pax_block({"GNU.sparse.major": b"1", "GNU.sparse.minor": b"0", "GNU.sparse.name": f"{TOP}/run/sparse".encode(), "GNU.sparse.realsize": b"%d" % (3 * GiB)}) + raw_header(f"{TOP}/run/GNUSparseFile.0/sparse".encode(), 0, b"0"))  # fmt: skip
_extra("member_size_base256_huge", r"declares \d+ bytes, past", raw_header(f"{TOP}/run/x".encode(), 2**80, b"0"), before=True)  # fmt: skip
_extra("header_size_not_octal", "not an octal number", raw_header(f"{TOP}/run/x".encode(), 0, b"0", {124: b"zzzzzzzzzzz\0"}))  # fmt: skip
_extra("header_checksum_wrong", "checksum mismatch", raw_header(f"{TOP}/run/x".encode(), 0, b"0")[:148] + b"0000000\0" + bytes(356))  # fmt: skip


@_case("sparse_tar_129_bytes", "sparse file in archive")
def _sparse_small(src: Source, out: Path) -> None:
    # the case: a tiny archive whose one member would be 3 GiB of holes
    sparse = raw_header(f"{TOP}/big".encode(), 0, b"S", {483: b"%011o\0" % (3 * GiB)})
    out.write_bytes(gzip.compress(sparse + bytes(2 * BLOCK), 9, mtime=0))


@_case("duplicate_member", "duplicate member")
def _dup(src: Source, out: Path) -> None:
    write_gz(out, [*src.entries(), src.body()[0]])


@_case("listed_file_missing", "listed file missing")
def _missing(src: Source, out: Path) -> None:
    write_gz(out, [*src.head(), *src.body()[1:]])


@_case("content_changed", r"sha256 mismatch .*log\.jsonl")
def _changed(src: Source, out: Path) -> None:
    files = dict(src.files)
    log = next(p for p in sorted(files) if p.endswith("log.jsonl"))
    files[log] = flip(files[log], 10)
    write_gz(out, [*src.head(), *src.body(files)])


@_case("content_longer_than_declared", r"size mismatch .*log\.jsonl")
def _longer(src: Source, out: Path) -> None:
    files = dict(src.files)
    log = next(p for p in sorted(files) if p.endswith("log.jsonl"))
    files[log] += b'{"type": "step", "action": "up"}\n' * 100
    write_gz(out, [*src.head(), *src.body(files)])


# 3. archive bombs and floods, streamed to disk
def _stream(out: Path, write: Callable[[GzipStream], None]) -> None:
    with open(out, "wb") as f:
        gz = GzipStream(f)
        write(gz)
        gz.close()


@_case("bomb_listed_member", r"size mismatch .*is 1073741824 bytes", big=True)
def _bomb_listed(src: Source, out: Path) -> None:
    def write(gz: GzipStream) -> None:
        gz.write(tar_bytes(src.head(), end=False))
        name = sorted(src.files)[0]
        gz.write(raw_header(f"{TOP}/{name}".encode(), GiB, b"0"))
        gz.zeros(GiB)
        gz.write(bytes(2 * BLOCK))

    _stream(out, write)


@_case("bomb_unlisted_member", "file not listed in the manifest: 'bundle/run/bomb.bin'", big=True)
def _bomb_unlisted(src: Source, out: Path) -> None:
    def write(gz: GzipStream) -> None:
        gz.write(tar_bytes(src.entries(), end=False))
        gz.write(raw_header(f"{TOP}/run/bomb.bin".encode(), 4 * GiB, b"0"))
        gz.zeros(4 * GiB)
        gz.write(bytes(2 * BLOCK))

    _stream(out, write)


@_case("bomb_before_manifest", "file not listed in the manifest: 'bundle/bomb.bin'", big=True)
def _bomb_first(src: Source, out: Path) -> None:
    # the manifest search skips this member's 256 MiB without keeping or writing them
    def write(gz: GzipStream) -> None:
        gz.write(raw_header(f"{TOP}/bomb.bin".encode(), 256 * MiB, b"0"))
        gz.zeros(256 * MiB)
        gz.write(tar_bytes(src.entries()))

    _stream(out, write)


MANY_MEMBERS = 300_000


@_case("many_members", "file not listed in the manifest: 'bundle/m/000000'", big=True)
def _many(src: Source, out: Path) -> None:
    template = bytearray(raw_header(b"", 1, b"0"))
    template[148:156] = b" " * 8
    base = sum(template)

    def write(gz: GzipStream) -> None:
        gz.write(tar_bytes(src.entries(), end=False))
        buf = bytearray()
        for i in range(MANY_MEMBERS):
            name = b"%s/m/%06d" % (TOP.encode(), i)
            h = bytearray(template)
            h[0 : len(name)] = name
            h[148:156] = b"%06o\0 " % (base + sum(name))
            buf += h
            buf += b"x" + bytes(BLOCK - 1)
            if len(buf) >= MiB:
                gz.write(bytes(buf))
                buf.clear()
        gz.write(bytes(buf) + bytes(2 * BLOCK))

    _stream(out, write)


# 4. broken streams
@_case("truncated_gzip", "truncated")
def _truncated(src: Source, out: Path) -> None:
    out.write_bytes(src.original[: len(src.original) // 2])


@_case("truncated_gzip_in_header", "truncated")
def _truncated_early(src: Source, out: Path) -> None:
    out.write_bytes(src.original[:40])


@_case("truncated_plain_tar", "truncated")
def _truncated_tar(src: Source, out: Path) -> None:
    raw = tar_bytes(src.entries())
    out.write_bytes(raw[: BLOCK * 3 + 100])


@_case("gzip_garbage", "gzip stream corrupt")
def _gzip_garbage(src: Source, out: Path) -> None:
    out.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 8)


@_case("not_a_tar", "corrupt tar header")
def _not_tar(src: Source, out: Path) -> None:
    out.write_bytes(b"this is not an archive\n" * 100)


@_case("empty_file", "manifest.json or bundle/manifest.sig is missing")
def _empty(src: Source, out: Path) -> None:
    out.write_bytes(b"")


@_case("tar_header_flipped", "checksum mismatch")
def _tar_flip(src: Source, out: Path) -> None:
    raw = tar_bytes(src.entries())
    third = len(tar_bytes(src.head(), end=False))  # the first run file's header
    out.write_bytes(gzip.compress(flip(raw, third + 20), mtime=0))


for _i, _pos in enumerate((12, 100, 333, 1000, 2500, 5000, -9, -3)):

    def _flipped(src: Source, out: Path, pos: int = _pos) -> None:
        out.write_bytes(flip(src.original, pos, 0x10))

    CASES[f"gzip_flipped_{_i}"] = Case(f"gzip_flipped_{_i}", None, _flipped)


# 5. harmless rewrites: the same signed content, which must still verify
@_case("reordered_manifest_last", "")
def _manifest_last(src: Source, out: Path) -> None:
    write_gz(out, [*src.body(), *src.head()])


@_case("reordered_reversed", "")
def _reversed(src: Source, out: Path) -> None:
    write_gz(out, list(reversed(src.entries())))


@_case("recompressed_gnu_format", "")
def _recompressed(src: Source, out: Path) -> None:
    out.write_bytes(gzip.compress(tar_bytes(src.entries(), tarfile.GNU_FORMAT), 1, mtime=0))


@_case("plain_tar", "")
def _plain(src: Source, out: Path) -> None:
    out.write_bytes(tar_bytes(src.entries(), tarfile.USTAR_FORMAT))


@_case("with_folder_entries", "")
def _folders(src: Source, out: Path) -> None:
    folders = {TOP} | {
        f"{TOP}/" + "/".join(p.split("/")[:i])
        for p in src.files
        for i in range(1, p.count("/") + 1)
    }
    dirs = [member(d, kind=tarfile.DIRTYPE) for d in sorted(folders)]
    write_gz(out, [*dirs, *src.entries()])


@_case("trailing_garbage_after_archive", None)
def _trailing(src: Source, out: Path) -> None:
    out.write_bytes(src.original + b"garbage after the gzip stream")
