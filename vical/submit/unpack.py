"""Trusted reading of a results bundle: the signature first, then only what it lists.

``vical verify`` reads an untrusted archive, so this stage trusts nothing it has
not checked, in this order:

1. the bundle file itself must be a regular file (never a FIFO, a device or
   standard input), opened once and read twice from that descriptor;
2. ``bundle/manifest.json`` (at most :data:`MAX_MANIFEST_BYTES`) and
   ``bundle/manifest.sig`` (at most :data:`MAX_SIG_BYTES`) are read from the
   archive stream without writing anything: :func:`vical.submit.bundle.make_bundle`
   puts them first, otherwise the stream is scanned, every other member's data
   skipped unread into memory and unwritten;
3. both must be JSON objects with the expected field types, the manifest must
   be of format :data:`~vical.submit.bundle.BUNDLE_FORMAT`, the signer's key must
   be in the trusted keyring and its Ed25519 signature must match the manifest's
   bytes; only then are the manifest's fields read (the submitter's labels by
   :func:`vical.submit.labels.check_submitter`): every path must be a plain
   relative POSIX path (see :func:`vical.submit.archive.check_rel_path`) and
   every file has a declared sha256 and size, capped by :data:`MAX_FILES` and
   :data:`MAX_TOTAL_BYTES`;
4. only then is anything extracted, by a tar reader written for this purpose
   (:mod:`vical.submit.archive`; not :mod:`tarfile`, whose pax and long-name
   handling reads headers of any size into memory): a member must be a regular
   file the signed manifest lists, with exactly its declared size, or a folder on
   the way to one; it is
   written to a path built from the manifest's validated parts, its sha256
   checked as it streams. Links, devices, FIFOs, sparse files, duplicates,
   unlisted members and file/folder conflicts are refused, naming the member.

Paths in the manifest are never opened on the host; nothing is written outside
the destination folder; the disk used is at most the signed manifest's declared
total. Every failure is a :class:`~vical.submit.verdict.VerifyError` with a one-line message, for a
corrupt or truncated gzip stream, a corrupt tar header, a non-UTF-8 name or JSON
of the wrong type alike.

``vical verify`` exits 0 when the bundle passes, 1 when it is rejected (any
:class:`VerifyError` or a replay mismatch) and 2 when it could not run (no such
bundle file, a bad option).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from vical.submit.archive import (
    BLOCK,
    MAX_EXT_HEADER_BYTES,
    MAX_EXT_HEADERS,
    RESERVED,
    Member,
    Stream,
    check_member,
    check_rel_path,
    members,
    open_bundle,
)
from vical.submit.bundle import BUNDLE_FORMAT, TOP
from vical.submit.keys import DEFAULT_KEYRING, check, key_id, load_public
from vical.submit.labels import check_submitter
from vical.submit.verdict import VerifyError

MAX_MANIFEST_BYTES = 16 * 1024**2
MAX_SIG_BYTES = 64 * 1024
MAX_FILES = 200_000
MAX_TOTAL_BYTES = 4 * 1024**3
# how far the manifest search may read when the manifest is not first
MAX_SCAN_MEMBERS = MAX_FILES + 1000
MAX_SCAN_BYTES = MAX_TOTAL_BYTES + 512 * 1024**2

_HEX64 = re.compile(r"[0-9a-f]{64}")
# manifest fields (besides format and files) and the JSON type each must have
_MANIFEST_FIELDS: dict[str, type | tuple[type, ...]] = {
    "created_at": str,
    "partial": bool,
    "missing_tasks": list,
    "submitter": dict,
    "fingerprint": dict,
    "summary": dict,
}
MAX_MANIFEST_DEPTH = 32


@dataclass(frozen=True)
class FileEntry:
    """One file the signed manifest lists."""

    sha256: str
    size: int


@dataclass(frozen=True)
class SignedManifest:
    """A manifest whose signature matched a trusted key, with its files validated."""

    manifest: dict[str, Any]
    raw: bytes
    signer: str
    files: dict[str, FileEntry]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files.values())


# -- 1-3. manifest and signature ---------------------------------------------------
def _read_manifest_pair(f: BinaryIO) -> tuple[bytes, bytes]:
    stream = Stream(f, MAX_SCAN_BYTES)
    found: dict[str, bytes] = {}
    caps = {"manifest.json": MAX_MANIFEST_BYTES, "manifest.sig": MAX_SIG_BYTES}
    for count, m in enumerate(members(stream)):
        if count >= MAX_SCAN_MEMBERS:
            raise VerifyError(
                "manifest", f"no manifest.json and manifest.sig in the first {count} members"
            )
        parts = check_member(m)
        data_len = -(-m.size // BLOCK) * BLOCK
        if len(parts) == 1 and parts[0] in caps and m.kind == "dir":
            raise VerifyError("manifest", f"{m.name!r} is a folder, not a file")
        if len(parts) != 1 or parts[0] not in caps or m.kind != "file":
            for _ in stream.chunks(data_len, m.name):
                pass
            continue
        which = parts[0]
        if which in found:
            raise VerifyError("unpack", f"duplicate member {m.name!r}")
        if m.size > caps[which]:
            raise VerifyError(
                "manifest", f"{m.name!r} is {m.size} bytes, more than {caps[which]}: refusing"
            )
        found[which] = stream.read(data_len)[: m.size]
        if len(found) == 2:
            return found["manifest.json"], found["manifest.sig"]
    raise VerifyError("manifest", f"{TOP}/manifest.json or {TOP}/manifest.sig is missing")


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and bad UTF-8 are ValueErrors
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise VerifyError("manifest", f"{what} is not JSON: {msg}") from None
    if not isinstance(value, dict):
        raise VerifyError("manifest", f"{what} must be a JSON object, not a {type(value).__name__}")
    return value


def _check_signature(mbytes: bytes, sig: dict[str, Any], trusted: dict[str, Any]) -> str:
    for field in ("public_key", "signature"):
        if not isinstance(sig.get(field), str):
            raise VerifyError(
                "signature",
                f"manifest.sig: {field!r} must be a string, not {sig.get(field)!r}"[:200],
            )
    if sig.get("algorithm", "ed25519") != "ed25519":
        raise VerifyError("signature", f"manifest.sig: unsupported algorithm {sig['algorithm']!r}")
    if not trusted:
        raise VerifyError(
            "signature",
            "no trusted public key: pass --pubkey FILE or put the "
            f"submitter's key in {DEFAULT_KEYRING}/",
        )
    try:
        signer = load_public(sig["public_key"].encode(), "bundle signer key")
    except Exception as e:  # KeyError_, or an unsupported key type from cryptography
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise VerifyError("signature", msg) from None
    kid = key_id(signer)
    if kid not in trusted:
        raise VerifyError(
            "signature",
            f"bundle signed by unknown key {kid}; trusted keys: "
            f"{', '.join(sorted(trusted)) or 'none'}",
        )
    if not check(trusted[kid], mbytes, sig["signature"]):
        raise VerifyError(
            "signature",
            f"signature does not match manifest.json (key {kid}): "
            "the manifest was changed after signing",
        )
    return kid


def _check_fields(manifest: dict[str, Any]) -> dict[str, FileEntry]:
    for key, kind in _MANIFEST_FIELDS.items():
        if not isinstance(manifest.get(key), kind):
            raise VerifyError(
                "manifest",
                f"field {key!r} is missing or not a JSON {getattr(kind, '__name__', kind)}",
            )
    if not all(isinstance(t, str) for t in manifest["missing_tasks"]):
        raise VerifyError("manifest", "field 'missing_tasks' must list task ids (strings)")
    check_submitter(manifest["submitter"])
    listed = manifest.get("files")
    if not isinstance(listed, dict) or not listed:
        raise VerifyError("manifest", "field 'files' must be a non-empty JSON object")
    if len(listed) > MAX_FILES:
        raise VerifyError("manifest", f"lists {len(listed)} files, more than {MAX_FILES}")
    files: dict[str, FileEntry] = {}
    total = 0
    folders: set[str] = set()
    for rel, entry in listed.items():
        parts = check_rel_path(rel)
        if not isinstance(entry, dict):
            raise VerifyError("manifest", f"{rel!r}: entry must be {{'sha256': ..., 'size': ...}}")
        digest, size = entry.get("sha256"), entry.get("size")
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise VerifyError("manifest", f"{rel!r}: sha256 must be 64 lowercase hex digits")
        if type(size) is not int or size < 0:
            raise VerifyError("manifest", f"{rel!r}: size must be a whole number of bytes")
        total += size
        if total > MAX_TOTAL_BYTES:
            raise VerifyError("manifest", f"files total more than {MAX_TOTAL_BYTES} bytes")
        files[rel] = FileEntry(digest, size)
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clash = sorted(folders & files.keys())
    if clash:
        raise VerifyError("manifest", f"{clash[0]!r} is listed as a file and used as a folder")
    return files


def _manifest_depth_ok(value: Any) -> bool:
    """Whether a parsed manifest nests at most MAX_MANIFEST_DEPTH deep."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if d > MAX_MANIFEST_DEPTH:
            return False
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return True


def read_signed_manifest(f: BinaryIO, trusted: dict[str, Any]) -> SignedManifest:
    """Read, parse and authenticate the manifest of the open bundle ``f``; write nothing."""
    mbytes, sbytes = _read_manifest_pair(f)
    manifest = _json_object(mbytes, "manifest.json")
    fmt = manifest.get("format")
    if type(fmt) is int and fmt == 1:
        raise VerifyError(
            "manifest",
            "bundle format 1 (no file sizes) is no longer accepted: "
            "re-pack the run with this vical (`vical submit RUN --key KEY`)",
        )
    if fmt != BUNDLE_FORMAT or type(fmt) is not int:
        raise VerifyError("manifest", f"unknown bundle format {str(fmt)[:40]!r}")
    sig = _json_object(sbytes, "manifest.sig")
    signer = _check_signature(mbytes, sig, trusted)
    if not _manifest_depth_ok(manifest):
        raise VerifyError("manifest", f"manifest.json nests deeper than {MAX_MANIFEST_DEPTH}")
    files = _check_fields(manifest)
    return SignedManifest(manifest, mbytes, signer, files)


# -- 4. extraction -------------------------------------------------------------------
def _extract(
    f: BinaryIO,
    dest: Path,
    listed: dict[str, FileEntry] | None,
    max_bytes: int = MAX_TOTAL_BYTES,
    max_files: int = MAX_FILES,
) -> None:
    """Write the archive's files under ``dest/bundle``; see :func:`extract_signed`."""
    dest = Path(dest)
    folders = _listed_folders(listed)
    if listed is not None:
        max_files = len(listed)
    stream = Stream(f, _read_limit(listed, folders) + 2 * BLOCK)
    seen: set[str] = set()
    seen_dirs: set[str] = set()
    total = 0
    count = 0
    for m in members(stream):
        parts = check_member(m)
        rel = "/".join(parts)
        if m.kind == "dir":
            _check_folder(m, rel, seen, seen_dirs, listed, folders, max_files)
            seen_dirs.add(rel)
            continue
        if rel in RESERVED and listed is not None:
            if rel in seen:
                raise VerifyError("unpack", f"duplicate member {m.name!r}")
            seen.add(rel)  # already read and checked by read_signed_manifest
            for _ in stream.chunks(-(-m.size // BLOCK) * BLOCK, m.name):
                pass
            continue
        entry = _check_file(m, parts, seen, seen_dirs, listed)
        count += 1
        total += m.size
        if count > max_files:
            raise VerifyError("unpack", f"more than {max_files} files: refusing")
        if total > max_bytes:
            raise VerifyError("unpack", f"content exceeds {max_bytes} bytes: refusing")
        seen.add(rel)
        sha256 = _write_member(stream, m, dest.joinpath(TOP, *parts), rel)
        if entry is not None and sha256 != entry.sha256:
            raise VerifyError("manifest", f"sha256 mismatch (file changed after packing): {rel}")
    stream.finish()
    if listed is not None:
        missing = sorted(set(listed) - seen)
        if missing:
            raise VerifyError("manifest", f"listed file missing from the bundle: {missing[0]}")


def _listed_folders(listed: dict[str, FileEntry] | None) -> set[str]:
    """The folders on the way to the listed files ("" for the top; none unlisted)."""
    folders = {""}
    for rel in listed or {}:
        names = rel.split("/")
        folders.update("/".join(names[:i]) for i in range(1, len(names)))
    return folders


def _read_limit(listed: dict[str, FileEntry] | None, folders: set[str]) -> int:
    """The most archive bytes an extraction reads: what the listed files, the manifest
    files and their headers can take, or :data:`MAX_SCAN_BYTES` without a list."""
    if listed is None:
        return MAX_SCAN_BYTES
    limit = sum(e.size for e in listed.values()) + MAX_MANIFEST_BYTES + MAX_SIG_BYTES
    limit += (len(listed) + len(folders) + 4) * (
        MAX_EXT_HEADERS * (MAX_EXT_HEADER_BYTES + BLOCK) + BLOCK
    )
    return limit


def _check_folder(
    m: Member,
    rel: str,
    seen: set[str],
    seen_dirs: set[str],
    listed: dict[str, FileEntry] | None,
    folders: set[str],
    max_files: int,
) -> None:
    """A folder member may appear once, not as a listed file, on the way to one."""
    if rel in seen_dirs:
        raise VerifyError("unpack", f"duplicate member {m.name!r}")
    if rel in seen or (listed is not None and rel in listed):
        raise VerifyError("unpack", f"{m.name!r} is a folder but is listed as a file")
    if listed is not None and rel not in folders:
        raise VerifyError("unpack", f"folder not in the manifest: {m.name!r}")
    if listed is None and len(seen_dirs) >= max_files:
        raise VerifyError("unpack", f"more than {max_files} folders: refusing")


def _check_file(
    m: Member,
    parts: tuple[str, ...],
    seen: set[str],
    seen_dirs: set[str],
    listed: dict[str, FileEntry] | None,
) -> FileEntry | None:
    """A file member may appear once, where no folder is, listed with its size; its
    manifest entry (None without a list)."""
    rel = "/".join(parts)
    if rel in seen:
        raise VerifyError("unpack", f"duplicate member {m.name!r}")
    if rel in seen_dirs or any("/".join(parts[:i]) in seen for i in range(1, len(parts))):
        raise VerifyError("unpack", f"{m.name!r}: a file and a folder share this path")
    if listed is None:
        return None
    entry = listed.get(rel)
    if entry is None:
        raise VerifyError("manifest", f"file not listed in the manifest: {m.name!r}")
    if m.size != entry.size:
        raise VerifyError(
            "manifest",
            f"size mismatch (file changed after packing): {rel} is {m.size} bytes, "
            f"the manifest says {entry.size}",
        )
    return entry


def _write_member(stream: Stream, m: Member, target: Path, rel: str) -> str:
    """Write a file member's content to a new file ``target``; its sha256 (hex)."""
    digest = hashlib.sha256()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, flags, 0o644)
        with os.fdopen(fd, "wb") as out:
            left = m.size
            for piece in stream.chunks(-(-m.size // BLOCK) * BLOCK, m.name):
                data = piece[:left]
                left -= len(data)
                digest.update(data)
                out.write(data)
    except OSError as e:  # e.g. the disk is full; the rules above exclude clashes
        raise VerifyError("unpack", f"cannot write {rel}: {e.strerror or e}") from None
    return digest.hexdigest()


def extract_signed(f: BinaryIO, dest: Path, signed: SignedManifest) -> Path:
    """Extract the files ``signed`` lists from the open bundle ``f`` into ``dest/bundle``.

    Every member must be one of them (or a folder on the way to one) with its
    declared size and sha256; the manifest files themselves are skipped. Returns
    ``dest/bundle``.
    """
    _extract(f, dest, signed.files)
    return Path(dest) / TOP


# -- bounded disk ----------------------------------------------------------------------
# The signed manifest declares every member's size; a run bundle's member is refused at
# the manifest, before anything is written, when it is not a file replay or the request
# check reads, or when it declares more than its episode can produce:
MAX_RUN_MANIFEST = 1024**2
RESULT_BASE, RESULT_PER_STEP = 256 * 1024, 1024  # eval_result.json: ids, actions, hashes
LOG_BASE, LOG_PER_DECISION = 4 * 1024**2, 8 * 1024**2  # every retry at the reply cap
MAX_IMAGE = 8 * 1024**2  # one JPEG frame (a raw frame is < 3 MB)
MAX_VIDEO = 64 * 1024**2  # one demonstration MP4
MEDIA_BASE = 4 * (MAX_VIDEO + 400 * MAX_IMAGE)  # up to four demonstrations
# and the whole unpack may write at most this multiple of the bundle file's size (gzip
# of vical's JSON and JPEG is 2-15x; a bomb is far beyond), with a floor for tiny bundles
EXPANSION_RATIO = 64
EXPANSION_FLOOR = 64 * 1024**2
_EPISODE_FILE = re.compile(
    r"run/episodes/([^/]+)/(eval_result\.json|log\.jsonl|media/[0-9a-f]{64}\.(jpg|png|mp4|bin))"
)


def write_budget(bundle_size: int) -> int:
    """The most bytes an unpack may write for a bundle file of ``bundle_size`` bytes."""
    return max(EXPANSION_FLOOR, EXPANSION_RATIO * bundle_size)


def check_sizes(signed: SignedManifest, bundle_size: int) -> None:
    """Refuse, before extracting, members no episode can produce (see the caps above)."""
    from vical.outcomes import episode_name
    from vical.spec import all_tasks

    total = signed.total_bytes
    if total > write_budget(bundle_size):
        raise VerifyError(
            "manifest",
            f"the manifest declares {total} bytes, more than {EXPANSION_RATIO}x the "
            f"{bundle_size}-byte bundle: refusing",
        )
    if signed.manifest.get("kind") == "wm":
        return
    budgets = {episode_name(t.id, 0).rsplit("__r", 1)[0]: t.max_steps for t in all_tasks()}
    media: dict[str, int] = {}
    for rel, entry in signed.files.items():
        if rel == "run/manifest.json":
            cap = MAX_RUN_MANIFEST
        else:
            m = _EPISODE_FILE.fullmatch(rel)
            if m is None:
                raise VerifyError("manifest", f"{rel!r} is not a file verification reads")
            folder, name = m.group(1), m.group(2)
            task, _, run = folder.rpartition("__r")
            steps = budgets.get(task)
            if steps is None or not run.isdigit():
                raise VerifyError(
                    "manifest", f"{rel!r}: {folder!r} is not an episode of this task data"
                )
            if name == "eval_result.json":
                cap = RESULT_BASE + RESULT_PER_STEP * (steps + 1)
            elif name == "log.jsonl":
                cap = LOG_BASE + LOG_PER_DECISION * (steps + 1)
            else:
                cap = MAX_VIDEO if name.endswith(".mp4") else MAX_IMAGE
                media[folder] = media.get(folder, 0) + entry.size
                if media[folder] > MEDIA_BASE + MAX_IMAGE * (steps + 1):
                    raise VerifyError(
                        "manifest", f"{folder}: media larger than the episode can produce"
                    )
        if entry.size > cap:
            raise VerifyError(
                "manifest",
                f"{rel!r} declares {entry.size} bytes, more than such a file can hold ({cap})",
            )


def unpack_bundle(
    bundle: Path, dest: Path, trusted: dict[str, Any]
) -> tuple[Path, dict[str, Any], str]:
    """Authenticate ``bundle`` against ``trusted`` keys, then extract it into ``dest``.

    Returns (``dest/bundle``, the signed manifest, the signer's key id); raises
    :class:`VerifyError` for any problem, before extracting anything when the
    manifest or its signature is at fault.
    """
    with open_bundle(Path(bundle)) as f:
        signed = read_signed_manifest(f, trusted)
        check_sizes(signed, os.fstat(f.fileno()).st_size)
        root = extract_signed(f, dest, signed)
    return root, signed.manifest, signed.signer


def safe_extract(
    bundle: Path, dest: Path, max_bytes: int = MAX_TOTAL_BYTES, max_files: int = MAX_FILES
) -> None:
    """Extract a bundle's regular files under ``dest/bundle`` without checking its manifest.

    For tools and tests that take apart a bundle they made; :func:`unpack_bundle`
    is what ``vical verify`` uses. The same member rules and caps apply (no links,
    devices, duplicates, paths outside ``bundle/``), but any file is accepted.
    """
    with open_bundle(Path(bundle)) as f:
        _extract(f, dest, None, max_bytes=max_bytes, max_files=max_files)
