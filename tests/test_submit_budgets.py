"""Verification, third pass: decode and work budgets, and never a traceback.

World-model and coupled-run bundles re-signed with the submitter's own key: a case id
beyond the published cases is refused before any context is rebuilt; oversized PNGs
(a prediction, an imagined frame) are refused from their header, before decoding, with
peak memory measured in a fresh process; a ``scores.jsonl`` line that is ``[]`` or not
JSON and a ``summary.json`` nested 100,000 deep are one-line verdicts; an exception the
checks did not foresee becomes a one-line refusal naming it (still a bug).
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.test_submit_kinds import ROOT, assert_refused, verify_in_subprocess
from vical.bounded import MAX_FRAME_PIXELS, MemberError, decode_image, parse_json
from vical.submit.bundle import BUNDLE_FORMAT, WM_KIND, file_entry, fingerprint, write_signed
from vical.submit.keys import keygen, load_private
from vical.submit.verify import UnexpectedError, VerifyError, verify_bundle


def big_png(width: int, height: int) -> bytes:
    """A valid all-black 1-bit PNG of ``width`` x ``height``, made as a stream (a few
    tens of kilobytes for 13000 x 13000; its pixels are never held here)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\0" * (1 + (width + 7) // 8)
    z = zlib.compressobj(9)
    parts = [z.compress(row) for _ in range(height)]
    idat = b"".join(parts) + z.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def black_sha256(width: int, height: int) -> str:
    """frame_sha256 of the RGB decoding of :func:`big_png` (streamed, never allocated)."""
    h = hashlib.sha256(f"{(height, width, 3)}|uint8|".encode())
    block = b"\0" * (1 << 24)
    left = width * height * 3
    while left:
        h.update(block[: min(left, len(block))])
        left -= min(left, len(block))
    return h.hexdigest()


# -- the bounded readers -------------------------------------------------------------------
def test_the_bounded_readers_refuse_before_work():
    png = big_png(20000, 20000)
    with pytest.raises(MemberError, match="20000x20000 image, larger than any frame"):
        decode_image(png)
    with pytest.raises(MemberError, match="a 8x8 image where the frame is 4x4"):
        decode_image(big_png(8, 8), size=(4, 4))
    assert decode_image(big_png(8, 8)).shape == (8, 8, 3)
    with pytest.raises(MemberError, match="not a readable PNG"):
        decode_image(b"\x89PNG\r\n\x1a\n" + b"x" * 50)
    with pytest.raises(MemberError, match="nests deeper than 64"):
        parse_json(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(MemberError, match="not JSON"):
        parse_json(b"{oops")
    with pytest.raises(MemberError, match="larger than 10 bytes"):
        parse_json(b"[1, 2, 3, 4, 5]", max_bytes=10)
    assert MAX_FRAME_PIXELS < 13000 * 13000


# -- world-model bundles ------------------------------------------------------------------
@pytest.fixture(scope="module")
def wm(tmp_path_factory):
    from vical.wm.cases import build
    from vical.wm.evaluate import evaluate

    d = tmp_path_factory.mktemp("wm-budgets")
    priv, pub = keygen(d / "team")
    build(d / "cases", ["grid-navigation"], contexts=1)
    evaluate("copy-last", d / "cases", d / "run")
    return d, priv, pub


def wm_bundle(run: Path, priv: Path, out: Path, edit=None, summary=None) -> Path:
    """A world-model bundle of ``run`` (its files edited by ``edit(files)``), signed with
    the team's key as `vical wm submit` signs one."""
    from vical.submit.bundle import collect_wm_files

    files = collect_wm_files(run)
    if edit is not None:
        edit(files)
    manifest = {
        "format": BUNDLE_FORMAT,
        "kind": WM_KIND,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "partial": False,
        "missing_tasks": [],
        "submitter": {
            "team": "T",
            "model": "m",
            "endpoint_kind": "copy-last",
            "date": "2026-01-01",
        },
        "fingerprint": fingerprint(),
        "summary": summary if summary is not None else json.loads(files["wm/summary.json"]),
        "files": {p: file_entry(b) for p, b in sorted(files.items())},
    }
    write_signed(manifest, files, load_private(priv), out)
    return out


def _verify_wm(bundle: Path, pub: Path):
    return verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False, accept_wm=True)


def test_an_honest_world_model_bundle_verifies_in_a_fresh_process(wm, tmp_path):
    d, priv, pub = wm
    proc = verify_in_subprocess(wm_bundle(d / "run", priv, tmp_path / "b.tar.gz"), pub)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: 5/5" in proc.stdout


@pytest.mark.parametrize("cid", ["grid-navigation/999999", "grid-navigation/050"])
def test_a_case_beyond_the_published_set_is_refused_before_any_work(wm, tmp_path, cid, monkeypatch):
    d, priv, pub = wm

    def edit(files):
        m = json.loads(files["wm/manifest.json"])
        m["cases"].append(cid)
        files["wm/manifest.json"] = json.dumps(m).encode()

    bundle = wm_bundle(d / "run", priv, tmp_path / "b.tar.gz", edit)
    import vical.wm.cases

    built: list[object] = []  # work measured: no context is rebuilt for the refusal
    monkeypatch.setattr(vical.wm.cases, "build", lambda *a, **k: built.append(a))
    with pytest.raises(VerifyError, match=r"^\[budget\] wm: case .* beyond the published 50"):
        _verify_wm(bundle, pub)
    assert built == []


@pytest.mark.parametrize(
    ("cases", "reason"),
    [
        (["grid-navigation"], "is not <scenario>/<number>"),
        ([7], "is not <scenario>/<number>"),
        (["nowhere/001"], "unknown scenario 'nowhere'"),
        (["grid-navigation/001", "grid-navigation/001"], "listed twice"),
        ("all", "no list of cases"),
    ],
)
def test_malformed_case_lists_are_one_line_refusals(wm, tmp_path, cases, reason):
    d, priv, pub = wm

    def edit(files):
        m = json.loads(files["wm/manifest.json"])
        m["cases"] = cases
        files["wm/manifest.json"] = json.dumps(m).encode()

    with pytest.raises(VerifyError) as e:
        _verify_wm(wm_bundle(d / "run", priv, tmp_path / "b.tar.gz", edit), pub)
    assert reason in str(e.value) and not isinstance(e.value, UnexpectedError)


@pytest.mark.parametrize(("line", "reason"), [(b"[]", "not a score record"), (b"{x", "not JSON")])
def test_a_bad_scores_line_is_a_verdict_not_a_traceback(wm, tmp_path, line, reason):
    d, priv, pub = wm

    def edit(files):
        files["wm/scores.jsonl"] = line + b"\n" + files["wm/scores.jsonl"]

    v = _verify_wm(wm_bundle(d / "run", priv, tmp_path / "b.tar.gz", edit), pub)
    assert not v.ok
    problems = [p for e in v.episodes for p in e.problems]
    assert problems == [f"scores.jsonl: line 1 is {reason}" if reason == "not JSON" else
                        f"scores.jsonl: line 1 is {reason} (an object naming its case)"]  # fmt: skip


def test_a_deeply_nested_summary_is_one_line(wm, tmp_path):
    d, priv, pub = wm

    def edit(files):
        files["wm/summary.json"] = b"[" * 100_000 + b"]" * 100_000

    bundle = wm_bundle(d / "run", priv, tmp_path / "b.tar.gz", edit, summary={"a": 1})
    assert_refused(verify_in_subprocess(bundle, pub), "nests deeper than 64")


def test_an_oversized_prediction_is_refused_from_its_header(wm, tmp_path):
    d, priv, pub = wm

    def edit(files):
        name = sorted(p for p in files if p.endswith("pred_1.png"))[0]
        files[name] = big_png(20000, 20000)

    with pytest.raises(VerifyError) as e:
        _verify_wm(wm_bundle(d / "run", priv, tmp_path / "b.tar.gz", edit), pub)
    msg = str(e.value)
    assert msg.startswith("[predictions] wm: grid-navigation/") and "\n" not in msg, msg
    assert "prediction pred_1.png: a 20000x20000 image where the frame is" in msg


# -- coupled runs ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def coupled(tmp_path_factory):
    from vical.run import RunOptions, run_eval
    from vical.spec import select_tasks
    from vical.submit.bundle import make_bundle
    from vical.wm.couple import Coupling

    d = tmp_path_factory.mktemp("couple-budgets")
    priv, pub = keygen(d / "team")
    coupling = Coupling("simulator", horizon=2, candidates=2)
    run_eval(
        select_tasks("cliffwalking/base"),
        d / "run",
        options=RunOptions(workers=1, progress=False, world_model=coupling),
    )
    make_bundle(d / "run", priv, d / "ok.tar.gz", team="T", partial=True)
    return d, priv, pub


def test_an_honest_coupled_bundle_verifies_in_a_fresh_process(coupled):
    d, _, pub = coupled
    proc = verify_in_subprocess(d / "ok.tar.gz", pub)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: 1/1" in proc.stdout


MEASURE = """
import resource, sys
from pathlib import Path
from vical.submit.verify import VerifyError, verify_bundle
try:
    verify_bundle(Path(sys.argv[1]), pubkeys=[Path(sys.argv[2])], workers=1, progress=False)
    print("accepted")
except VerifyError as e:
    print("refused", e)
# VmHWM is this process's own high-water mark. getrusage's ru_maxrss is not: the kernel
# keeps the parent's mark across fork and exec, so under pytest-xdist it reports the
# size of the worker that started this process.
hwm = next(ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("VmHWM:"))
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # verify runs inline here
print("peak_kib", max(int(hwm.split()[1]), children))
"""


def test_imagined_frames_all_naming_one_huge_png_are_refused_in_bounded_memory(coupled, tmp_path):
    """Every imagined frame of the episode points at one 13000x13000 1-bit PNG whose
    logged pixel sha256 is right: refused from the PNG's header, in a fresh process
    whose peak resident memory stays far below what decoding it would take (500 MB)."""
    from tests.test_submit import repack, unpack

    d, priv, pub = coupled
    root = unpack(d / "ok.tar.gz", tmp_path / "u")
    ep = next((root / "run" / "episodes").iterdir())
    png = big_png(13000, 13000)
    sha = hashlib.sha256(png).hexdigest()
    (ep / "media" / f"{sha}.png").write_bytes(png)
    pixels = black_sha256(13000, 13000)
    recs = [json.loads(x) for x in (ep / "log.jsonl").read_text().splitlines()]
    for r in recs:
        if r["type"] == "imagined":
            for c in r["candidates"]:
                c["frames"] = [{"sha256": pixels, "png": sha} for _ in c["frames"]]
    (ep / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    bundle = repack(root, tmp_path / "huge.tar.gz", rehash=True, resign_key=priv)
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(bundle), str(pub)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=600,
    )
    out = proc.stdout.splitlines()
    assert proc.returncode == 0 and out[0].startswith("refused [log]"), proc.stdout + proc.stderr
    assert "13000x13000 image, larger than any frame" in out[0] and "Traceback" not in proc.stderr
    peak_mib = int(out[-1].split()[1]) / 1024
    assert peak_mib < 450, f"peak RSS {peak_mib:.0f} MiB"


# -- the last resort ---------------------------------------------------------------------
def test_an_unforeseen_exception_is_a_one_line_refusal_that_names_it(
    coupled, tmp_path, monkeypatch
):
    """Any exception the checks let through is refused in one line naming it and where
    it was raised (the tests above assert it never happens for the cases they cover)."""
    from typer.testing import CliRunner

    import vical.submit.verify as verify
    from vical.cli import app

    def boom(*args, **kwargs):
        raise ZeroDivisionError("a check that was not foreseen")

    monkeypatch.setattr(verify, "check_contents", boom)
    d, _, pub = coupled
    with pytest.raises(UnexpectedError, match=r"^\[unexpected\] ZeroDivisionError in test_sub"):
        verify_bundle(d / "ok.tar.gz", pubkeys=[pub], workers=1, progress=False)
    for args in (["verify"], ["leaderboard", "add", "--submissions", str(tmp_path / "s")]):
        r = CliRunner().invoke(app, [*args, str(d / "ok.tar.gz"), "--pubkey", str(pub)])
        lines = [x for x in r.output.splitlines() if x.strip()]
        assert r.exit_code == 1 and len(lines) == 1, r.output
        assert "ZeroDivisionError" in lines[0] and "bug in vical" in lines[0]
