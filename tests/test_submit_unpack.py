"""Trusted reading of bundles (vical.submit.unpack): hostile archives are verdicts.

Every bundle of ``tests/fuzz_bundles`` goes through :func:`verify_bundle` with a
fresh temporary folder, while an audit hook records every file Python opens
and a thread samples the temporary folder's size. Each must end in a one-line
:class:`VerifyError` (or, for harmless rewrites, pass with the original files)
within a few seconds, open no host path named by the archive, leave nothing
behind and never write more than the signed manifest declares.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from conftest import HANG
from fuzz_bundles import CASES, Source, load_source
from fuzz_bundles.generate import member, tar_bytes, write_gz
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vical.run import RunOptions, run_eval
from vical.spec import select_tasks
from vical.submit import archive, unpack
from vical.submit import verify as verify_mod
from vical.submit.archive import check_rel_path
from vical.submit.bundle import BUNDLE_FORMAT, make_bundle
from vical.submit.keys import keygen, load_private
from vical.submit.verify import VerifyError, verify_bundle

TASKS = "cliffwalking/base,cartpole/seed41"
STRACE = shutil.which("strace")
SECONDS = 120.0  # hang guard for one verification (a verdict, never a hang); speed: benchmarks/

# -- every file opened by this process while a verification runs ------------------------
_opened: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], str | bytes | os.PathLike):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> SimpleNamespace:
    d = tmp_path_factory.mktemp("unpack-source")
    priv, pub = keygen(d / "keys" / "team")
    run_eval(
        select_tasks(TASKS),
        d / "run",
        options=RunOptions(runs=1, workers=1, progress=False, frames="none"),
    )
    bundle = d / "valid.tar.gz"
    make_bundle(d / "run", priv, bundle, team="Team U", partial=True)
    src = load_source(bundle, load_private(priv))
    total = sum(len(b) for b in src.files.values())
    return SimpleNamespace(src=src, pub=pub, priv=priv, bundle=bundle, total=total)


class _DiskWatch(threading.Thread):
    """Samples the bytes under ``root`` every few ms; ``peak`` is the largest seen."""

    def __init__(self, root: Path):
        super().__init__(daemon=True)
        self.root, self.peak, self.done = root, 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            total = 0
            for folder, _, files in os.walk(self.root):
                for f in files:
                    with contextlib.suppress(OSError):
                        total += os.lstat(os.path.join(folder, f)).st_size
            self.peak = max(self.peak, total)
            self.done.wait(0.002)


@contextlib.contextmanager
def _time_limit(seconds: float):
    def expire(signum, frame):
        raise TimeoutError(f"verification still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_verify(bundle: Path, source: SimpleNamespace, work: Path, replay: bool = True):
    """verify_bundle in a fresh TMPDIR and working folder; returns what it did.

    (verdict or VerifyError, files extracted (if it got that far), manifest,
    peak bytes in TMPDIR, seconds, paths opened)
    """
    global _opened
    tmp, cwd = work / "tmpdir", work / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    seen: dict = {}
    real = verify_mod.unpack_bundle

    def spy(b, dest, trusted):
        root, manifest, signer = real(b, dest, trusted)
        seen["files"] = {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        }
        seen["manifest"] = manifest
        return root, manifest, signer

    watch = _DiskWatch(tmp)
    watch.start()
    old_tmp, old_cwd = tempfile.tempdir, os.getcwd()
    tempfile.tempdir = str(tmp)
    os.chdir(cwd)
    _opened = []
    t0 = time.monotonic()
    try:
        with mock.patch.object(verify_mod, "unpack_bundle", spy), _time_limit(3 * SECONDS):
            outcome = verify_bundle(
                bundle, pubkeys=[source.pub], keyring=None, workers=1, progress=False
            )
    except VerifyError as e:
        outcome = e
    finally:
        took = time.monotonic() - t0
        opened, _opened = _opened, None
        os.chdir(old_cwd)
        tempfile.tempdir = old_tmp
        watch.done.set()
        watch.join()
    assert list(tmp.iterdir()) == [], "verify left files in TMPDIR"
    assert list(cwd.iterdir()) == [], "verify wrote into the working folder"
    return SimpleNamespace(
        outcome=outcome,
        files=seen.get("files"),
        manifest=seen.get("manifest"),
        peak=watch.peak,
        took=took,
        opened=opened,
        tmp=tmp,
    )


_CODE_ROOTS = tuple(
    {sys.prefix, sys.base_prefix, str(Path(verify_mod.__file__).parents[1])} | set(sys.path[1:])
)


def _check_opened(r: SimpleNamespace, bundle: Path, pub: Path) -> None:
    """Only the bundle, the key, files inside the temporary folder and code were opened."""
    allowed = {str(bundle), str(pub)}
    for p in r.opened:
        if not os.path.isabs(p):
            # shutil.rmtree of the temporary folder opens entries by name relative to a
            # folder descriptor; verify itself only opens absolute paths
            assert "/" not in p and p not in (".", ".."), p
            continue
        if p in allowed or p.startswith(str(r.tmp) + os.sep):
            continue
        assert p.endswith((".py", ".pyc", ".so")) or p.startswith(_CODE_ROOTS), p
        assert not p.startswith(("/dev/", "/etc/", "/proc/")), p


def _one_line(e: VerifyError) -> str:
    msg = str(e)
    assert "\n" not in msg and msg.startswith(f"[{e.stage}] ") and len(msg) < 400, msg
    return msg


# -- every generated case ------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_bundle_is_a_clean_verdict(name, source, tmp_path):
    case = CASES[name]
    bundle = tmp_path / "bundle.tar.gz"
    case.build(source.src, bundle)
    assert bundle.stat().st_size < 32 * 1024**2  # the big ones are streamed, small on disk
    r = run_verify(bundle, source, tmp_path)
    # never more on disk than the (small) signed manifest declares
    assert r.peak <= source.total + 64 * 1024, r.peak
    _check_opened(r, bundle, source.pub)
    if isinstance(r.outcome, VerifyError):
        msg = _one_line(r.outcome)
        assert case.expect != "", f"{name} must verify, got {msg}"
        if case.expect:
            assert __import__("re").search(case.expect, msg), msg
        return
    assert case.expect in ("", None), f"{name} verified; expected rejection {case.expect!r}"
    assert r.outcome.ok, r.outcome.mismatches
    assert r.files == source.src.files and r.manifest == source.src.manifest


def test_cases_cover_the_issue():
    """The generator has every class of hostile bundle the issue names."""
    wanted = {
        "manifest_traversal", "manifest_absolute_dev_zero", "manifest_absolute_dev_stdin",
        "member_dotdot", "member_absolute", "symlink", "hardlink", "fifo", "char_device",
        "bomb_listed_member", "bomb_unlisted_member", "sparse_tar_129_bytes", "many_members",
        "truncated_gzip", "gzip_flipped_0", "reordered_manifest_last", "duplicate_member",
        "bundle_is_a_file", "file_used_as_folder", "pax_header_huge", "manifest_json_list",
        "sig_json_list", "sig_signature_number", "manifest_changed_after_signing",
        "unlisted_extra_file", "name_not_utf8", "manifest_format_1",
    }  # fmt: skip
    assert wanted <= set(CASES)
    assert sum(c.expect == "" for c in CASES.values()) >= 3  # harmless rewrites verify


# -- paths are never opened on the host ---------------------------------------------------------
def _signed_with_path(src: Source, path: str, out: Path) -> Path:
    m = src.edited(lambda m: m["files"].__setitem__(path, {"sha256": "0" * 64, "size": 4}))
    mb = src.manifest_bytes(m)
    write_gz(out, src.entries(mb, src.sig_bytes(mb)))
    return out


def test_manifest_path_to_a_host_file_is_never_opened(source, tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("host secret\n")
    before = sentinel.stat()
    # from TMPDIR/vical-verify-*/bundle/, three '..' reach tmp_path
    for i, path in enumerate(["../../../sentinel.txt", str(sentinel)]):
        bundle = _signed_with_path(source.src, path, tmp_path / f"b{i}.tar.gz")
        work = tmp_path / f"w{i}"
        work.mkdir()
        r = run_verify(bundle, source, work)
        assert isinstance(r.outcome, VerifyError) and r.outcome.stage == "manifest"
        assert str(sentinel) not in r.opened and not any("sentinel" in p for p in r.opened)
        _check_opened(r, bundle, source.pub)
    after = sentinel.stat()
    assert sentinel.read_text() == "host secret\n"
    assert (after.st_atime_ns, after.st_mtime_ns) == (before.st_atime_ns, before.st_mtime_ns)


def _cli(args: list[str], tmp: Path, stdin=subprocess.DEVNULL, strace: Path | None = None):
    env = {**os.environ, "TMPDIR": str(tmp), "SDL_VIDEODRIVER": "dummy", "COLUMNS": "300"}
    cmd = [sys.executable, "-m", "vical.cli", "verify", *args]
    if strace is not None:
        cmd = [STRACE, "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", str(strace), *cmd]
    return subprocess.Popen(
        cmd, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen, timeout: float = 30) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("vical verify hung") from None
    return proc.returncode, out, err


def _assert_cli_rejection(rc: int, err: str, pattern: str, codes: tuple[int, ...] = (1,)) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc in codes, (rc, err)
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err and "Aborted" not in err
    assert __import__("re").search(pattern, lines[0]), lines[0]


def test_cli_rejections_are_one_line_exit_1(source, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    names = {
        "truncated_gzip": "truncated",
        "manifest_json_list": "JSON object, not a list",
        "sig_signature_number": "'signature' must be a string",
        "bundle_is_a_file": "'bundle' is a file",
        "file_used_as_folder": "a file and a folder share",
        "pax_header_huge": "refusing",
    }
    procs = {}
    for name in names:
        bundle = tmp_path / f"{name}.tar.gz"
        CASES[name].build(source.src, bundle)
        procs[name] = _cli([str(bundle), "--pubkey", str(source.pub), "-j", "1"], tmp)
    for name, proc in procs.items():
        rc, _, err = _finish(proc)
        _assert_cli_rejection(rc, err, names[name])
    assert list(tmp.iterdir()) == []


def test_cli_bundle_that_is_stdin_a_fifo_or_a_device(source, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    procs = [
        _cli(["/dev/stdin", "--pubkey", str(source.pub)], tmp, stdin=subprocess.PIPE),
        _cli(["/dev/zero", "--pubkey", str(source.pub)], tmp),
        _cli([str(fifo), "--pubkey", str(source.pub)], tmp),
        _cli([str(tmp_path), "--pubkey", str(source.pub)], tmp),
    ]
    for proc in procs:  # stdin stays open and empty: reading it would hang
        rc, _, err = _finish(proc)
        # the CLI may refuse a path that is not a regular file itself (could not run: 2)
        _assert_cli_rejection(rc, err, "not a regular file|no such bundle file", codes=(1, 2))
    assert list(tmp.iterdir()) == []


def test_open_bundle_refuses_fifos_devices_and_folders(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes to it: a blocking open or read would hang
    for path in (fifo, Path("/dev/zero"), Path("/dev/null"), tmp_path):
        with _time_limit(SECONDS), pytest.raises(VerifyError, match="not a regular file"):
            archive.open_bundle(path)  # a blocking open of the FIFO would hang
    with pytest.raises(VerifyError, match="cannot open"):
        archive.open_bundle(tmp_path / "absent.tar.gz")


@pytest.mark.skipif(STRACE is None, reason="strace not installed")
def test_cli_under_strace_never_opens_manifest_paths(source, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("host secret\n")
    paths = {
        "dev_stdin": "/dev/stdin",
        "dev_zero": "/dev/zero",
        "hostname": "../" * 12 + "etc/hostname",
        "sentinel": "../../../sentinel.txt",
        "sentinel_abs": str(sentinel),
    }
    procs = {}
    for name, path in paths.items():
        bundle = _signed_with_path(source.src, path, tmp_path / f"{name}.tar.gz")
        log = tmp_path / f"{name}.strace"
        args = [str(bundle), "--pubkey", str(source.pub)]
        procs[name] = (_cli(args, tmp, stdin=subprocess.PIPE, strace=log), log)
    for name, (proc, log) in procs.items():
        rc, _, err = _finish(proc, timeout=HANG)
        if rc != 1 and "ptrace" in err:
            pytest.skip(f"strace cannot trace here: {err.strip()}")
        _assert_cli_rejection(rc, err, "absolute path|'\\.\\.'")
        trace = log.read_text()
        assert "openat" in trace or "open(" in trace  # the trace did record opens
        for needle in ('"/dev/stdin"', '"/dev/zero"', "/etc/hostname", "sentinel.txt"):
            assert needle not in trace, (name, needle)
    assert sentinel.read_text() == "host secret\n"
    assert list(tmp.iterdir()) == []


# -- caps and rules, directly ------------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    ["run/manifest.json", "run/episodes/a__b__r0/log.jsonl", "a", "é/ü.json", "a..b/c.d"],
)
def test_plain_relative_paths_accepted(path):
    assert check_rel_path(path) == tuple(path.split("/"))


@pytest.mark.parametrize(
    "path,rule",
    [
        ("../etc/passwd", "'..'"),
        ("run/../../x", "'..'"),
        ("/etc/passwd", "absolute"),
        ("/dev/zero", "absolute"),
        ("run\\x", "backslash"),
        ("run/\0x", "control character"),
        ("run/\nx", "control character"),
        ("run//x", "empty or '.'"),
        ("./run", "empty or '.'"),
        ("run/", "empty or '.'"),
        ("", "empty path"),
        ("manifest.json", "cannot be listed"),
        ("manifest.sig", "cannot be listed"),
        ("a/" * 600 + "b", "longer than"),
        ("x" * 300, "part longer"),
        ("\udcff", "not valid UTF-8"),
        (7, "not a string"),
    ],
)
def test_bad_manifest_paths_rejected(path, rule):
    with pytest.raises(VerifyError, match=rule):
        check_rel_path(path)


def test_absolute_caps():
    assert unpack.MAX_FILES == 200_000 and unpack.MAX_TOTAL_BYTES == 4 * 1024**3
    assert unpack.MAX_MANIFEST_BYTES == 16 * 1024**2 and unpack.MAX_SIG_BYTES == 64 * 1024


def test_signed_manifest_over_the_file_cap_rejected(source, tmp_path, monkeypatch):
    monkeypatch.setattr(unpack, "MAX_FILES", len(source.src.files) - 1)
    r = run_verify(source.bundle, source, tmp_path)
    assert isinstance(r.outcome, VerifyError) and "more than" in str(r.outcome)
    assert r.files is None and r.peak == 0  # refused before anything was written


def test_manifest_search_stops_after_the_member_cap(source, tmp_path, monkeypatch):
    monkeypatch.setattr(unpack, "MAX_SCAN_MEMBERS", 50)
    filler = [member(f"bundle/f/{i}", b"x") for i in range(60)]
    bundle = tmp_path / "late.tar.gz"
    write_gz(bundle, [*filler, *source.src.entries()])
    r = run_verify(bundle, source, tmp_path)
    assert isinstance(r.outcome, VerifyError)
    assert "no manifest.json and manifest.sig in the first 50 members" in str(r.outcome)
    assert r.peak == 0


def test_make_bundle_writes_format_2_manifest_first(source):
    with tarfile.open(source.bundle, "r:gz") as tar:
        names = tar.getnames()
        mbytes = tar.extractfile("bundle/manifest.json").read()  # type: ignore[union-attr]
    assert names[:2] == ["bundle/manifest.json", "bundle/manifest.sig"]
    manifest = json.loads(mbytes)
    assert manifest["format"] == BUNDLE_FORMAT == 2
    for rel, data in source.src.files.items():
        entry = manifest["files"][rel]
        assert entry["size"] == len(data) and len(entry["sha256"]) == 64


def test_valid_bundle_extracts_only_listed_files(source, tmp_path):
    with archive.open_bundle(source.bundle) as f:
        signed = unpack.read_signed_manifest(f, verify_mod.load_keyring([source.pub], None))
        assert signed.total_bytes == source.total
        root = unpack.extract_signed(f, tmp_path / "out", signed)
    got = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert got == source.src.files  # the manifest files themselves are not written


def test_no_trusted_key_rejected_before_extraction(source, tmp_path):
    with archive.open_bundle(source.bundle) as f, pytest.raises(VerifyError, match="no trusted"):
        unpack.read_signed_manifest(f, {})


# -- property: mutated bundles never pass with changed content ------------------------------------
MUTATIONS = (
    "gzip_flip",
    "tar_flip",
    "manifest_resigned",
    "manifest_after_signing",
    "reorder",
    "remove",
    "duplicate",
    "recompress",
)


def _mutate(src: Source, data: st.DataObject) -> tuple[bytes, str, dict]:
    """(bundle bytes, verdict required: 'reject', 'pass' or 'either', manifest it carries)."""
    kind = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    event(f"mutation {kind}")
    mask = data.draw(st.integers(1, 255), label="mask")
    if kind == "gzip_flip":
        pos = data.draw(st.integers(0, len(src.original) - 1), label="pos")
        b = bytearray(src.original)
        b[pos] ^= mask
        return bytes(b), "either", src.manifest
    if kind == "tar_flip":
        raw = bytearray(gzip.decompress(src.original))
        pos = data.draw(st.integers(0, len(raw) - 1), label="pos")
        raw[pos] ^= mask
        return gzip.compress(bytes(raw), mtime=0), "either", src.manifest
    if kind == "manifest_resigned":
        m = src.edited(lambda m: None)
        rel = data.draw(st.sampled_from(sorted(m["files"])), label="file")
        op = data.draw(st.sampled_from(["sha", "size", "drop", "add", "rename", "team"]))
        if op == "sha":
            d = m["files"][rel]["sha256"]
            i = data.draw(st.integers(0, 63))
            m["files"][rel]["sha256"] = d[:i] + ("0" if d[i] != "0" else "1") + d[i + 1 :]
        elif op == "size":
            m["files"][rel]["size"] += data.draw(st.integers(-3, 3).filter(bool))
        elif op == "drop":
            del m["files"][rel]
        elif op == "add":
            extra = data.draw(st.text(min_size=1, max_size=12), label="path")
            m["files"].setdefault("run/" + extra, {"sha256": "0" * 64, "size": 1})
        elif op == "rename":
            m["files"][rel + "x"] = m["files"].pop(rel)
        else:
            m["submitter"]["team"] = "Renamed"
        mb = src.manifest_bytes(m)
        bundle = gzip.compress(tar_bytes(src.entries(mb, src.sig_bytes(mb))), mtime=0)
        # signed by the trusted key: it may pass if only the team changed, files unchanged
        return bundle, "pass" if op == "team" else "reject", m
    if kind == "manifest_after_signing":
        mb = bytearray(src.manifest_bytes())
        pos = data.draw(st.integers(0, len(mb) - 1), label="pos")
        mb[pos] ^= mask
        sb = src.sig_bytes(src.manifest_bytes())
        return gzip.compress(tar_bytes(src.entries(bytes(mb), sb)), mtime=0), "reject", {}
    entries = src.entries()
    if kind == "reorder":
        order = data.draw(st.permutations(range(len(entries))), label="order")
        entries = [entries[i] for i in order]
        verdict = "pass"
    elif kind == "remove":
        del entries[data.draw(st.integers(0, len(entries) - 1), label="removed")]
        verdict = "reject"
    elif kind == "duplicate":
        i = data.draw(st.integers(0, len(entries) - 1), label="copied")
        j = data.draw(st.integers(0, len(entries)), label="at")
        entries.insert(j, entries[i])
        verdict = "reject"
    else:
        level = data.draw(st.integers(0, 9), label="level")
        fmt = data.draw(st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT]), label="fmt")
        return gzip.compress(tar_bytes(entries, fmt), level, mtime=0), "pass", src.manifest
    return gzip.compress(tar_bytes(entries), mtime=0), verdict, src.manifest


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_mutated_bundles_never_pass_with_changed_content(source, data):
    bundle_bytes, required, signed_manifest = _mutate(source.src, data)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        bundle = work / "mutated.tar.gz"
        bundle.write_bytes(bundle_bytes)
        r = run_verify(bundle, source, work)
    if isinstance(r.outcome, VerifyError):
        event(f"rejected at {r.outcome.stage}")
        _one_line(r.outcome)
        assert required != "pass", f"a harmless rewrite was rejected: {r.outcome}"
        return
    event("verified")
    assert required != "reject", "a changed bundle passed the unpack stage"
    # it verified: the files are exactly the signed originals, the manifest the signed one
    assert r.files == source.src.files
    assert r.manifest == signed_manifest
    assert r.outcome.ok


def test_random_byte_flips_in_gzip_stream_deterministic(source, tmp_path):
    """A wider net than Hypothesis: 40 seeded flips, each a verdict within the time limit."""
    rng = random.Random(20261201)
    for i in range(40):
        b = bytearray(source.src.original)
        b[rng.randrange(len(b))] ^= rng.randrange(1, 256)
        work = tmp_path / str(i)
        work.mkdir()
        bundle = work / "b.tar.gz"
        bundle.write_bytes(bytes(b))
        r = run_verify(bundle, source, work)
        if isinstance(r.outcome, VerifyError):
            _one_line(r.outcome)
        else:
            assert r.files == source.src.files and r.outcome.ok


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def test_long_and_non_ascii_names_round_trip(source, tmp_path, fmt):
    """Long paths (pax ``path``, GNU ``L`` or the ustar prefix) and UTF-8 names are read."""
    src = source.src
    extra = {
        "run/" + "d" * 90 + "/" + "f" * 60 + ".json": b"{}",
        "run/médias/clip-é.txt": "ünïcödé\n".encode(),
    }
    if fmt == tarfile.USTAR_FORMAT:
        extra.pop("run/médias/clip-é.txt")  # ustar has no way to say the name is UTF-8
    files = {**src.files, **extra}
    m = src.edited(
        lambda m: m["files"].update(
            {p: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for p, d in extra.items()}
        )
    )
    mb = src.manifest_bytes(m)
    bundle = tmp_path / "long.tar.gz"
    bundle.write_bytes(
        gzip.compress(tar_bytes([*src.head(mb, src.sig_bytes(mb)), *src.body(files)], fmt))
    )
    with archive.open_bundle(bundle) as f:
        signed = unpack.read_signed_manifest(f, verify_mod.load_keyring([source.pub], None))
        root = unpack.extract_signed(f, tmp_path / "out", signed)
    got = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert got == files
