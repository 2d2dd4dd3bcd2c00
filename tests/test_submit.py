"""Bundles, signatures, replay verification, tamper resistance and the leaderboard."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tests.conftest import interrupt_group, processes_naming
from vical import __version__
from vical.run import RunOptions, run_eval
from vical.spec import select_tasks
from vical.submit import leaderboard
from vical.submit.bundle import BundleError, make_bundle
from vical.submit.keys import key_id, keygen, load_private, public_pem, sign
from vical.submit.unpack import safe_extract
from vical.submit.verify import VerifyError, verify_bundle

TASKS = "taxi/state1,taxi/state2,cartpole/seed41,cliffwalking/base"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("submit")
    priv, pub = keygen(d / "keys" / "team")
    run_eval(
        select_tasks(TASKS),
        d / "run",
        options=RunOptions(runs=1, workers=1, progress=False, frames="none"),
    )
    bundle = d / "bundle.tar.gz"
    make_bundle(d / "run", priv, bundle, team="Team A", partial=True)
    return d, priv, pub, bundle


def unpack(bundle: Path, dest: Path) -> Path:
    safe_extract(bundle, dest)
    return dest / "bundle"


def repack(root: Path, out: Path, rehash: bool = False, resign_key: Path | None = None) -> Path:
    """Re-create a bundle from a folder, optionally re-hashing and re-signing the manifest."""
    manifest = json.loads((root / "manifest.json").read_text())
    if rehash:
        import hashlib

        manifest["files"] = {
            p.relative_to(root).as_posix(): {  # bundle format 2: sha256 and size
                "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                "size": p.stat().st_size,
            }
            for p in sorted(root.rglob("*"))
            if p.is_file()
            and p.relative_to(root).as_posix() not in ("manifest.json", "manifest.sig")
        }
        (root / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    if resign_key is not None:
        key = load_private(resign_key)
        mbytes = (root / "manifest.json").read_bytes()
        sig = {
            "key_id": key_id(key.public_key()),
            "public_key": public_pem(key.public_key()).decode(),
            "signature": sign(key, mbytes),
            "algorithm": "ed25519",
        }
        (root / "manifest.sig").write_text(json.dumps(sig))
    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname="bundle")
    return out


def first_episode(root: Path) -> Path:
    return sorted((root / "run" / "episodes").iterdir())[0]


def test_keygen_modes(setup):
    d, priv, pub, _ = setup
    assert (priv.stat().st_mode & 0o777) == 0o600
    assert pub.read_text().startswith("-----BEGIN PUBLIC KEY-----")


def test_round_trip_verifies(setup):
    d, _, pub, bundle = setup
    v = verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False)
    assert v.ok and v.partial and len(v.episodes) == 4


def test_incomplete_run_refused_without_partial(setup):
    d, priv, _, _ = setup
    with pytest.raises(BundleError, match=r"missing .* task"):
        make_bundle(d / "run", priv, d / "x.tar.gz", team="t")


def test_changed_byte_in_log_rejected(setup, tmp_path):
    d, _, pub, bundle = setup
    root = unpack(bundle, tmp_path / "u")
    log = first_episode(root) / "log.jsonl"
    data = bytearray(log.read_bytes())
    data[10] ^= 1
    log.write_bytes(bytes(data))
    bad = repack(root, tmp_path / "bad.tar.gz")
    with pytest.raises(VerifyError, match=r"sha256 mismatch.*log\.jsonl"):
        verify_bundle(bad, pubkeys=[pub], progress=False)


def _edit_score(root: Path, score: float) -> None:
    p = first_episode(root) / "eval_result.json"
    r = json.loads(p.read_text())
    r["score"] = score
    p.write_text(json.dumps(r))


def test_rehashed_but_not_resigned_rejected(setup, tmp_path):
    d, _, pub, bundle = setup
    root = unpack(bundle, tmp_path / "u")
    _edit_score(root, 99.0)
    bad = repack(root, tmp_path / "bad.tar.gz", rehash=True)
    with pytest.raises(VerifyError, match="signature does not match"):
        verify_bundle(bad, pubkeys=[pub], progress=False)


def test_unknown_key_rejected(setup, tmp_path):
    d, _, pub, bundle = setup
    other, _ = keygen(tmp_path / "other")
    root = unpack(bundle, tmp_path / "u")
    bad = repack(root, tmp_path / "bad.tar.gz", resign_key=other)
    with pytest.raises(VerifyError, match="unknown key"):
        verify_bundle(bad, pubkeys=[pub], progress=False)


def test_fabricated_score_with_valid_signature_caught_by_replay(setup, tmp_path):
    d, priv, pub, bundle = setup
    root = unpack(bundle, tmp_path / "u")
    _edit_score(root, 100.0)
    bad = repack(root, tmp_path / "bad.tar.gz", rehash=True, resign_key=priv)
    v = verify_bundle(bad, pubkeys=[pub], workers=1, progress=False)
    assert not v.ok
    (ep,) = v.mismatches
    assert any("score claimed 100.0" in p for p in ep.problems)


def test_missing_episode_rejected(setup, tmp_path):
    d, priv, pub, bundle = setup
    root = unpack(bundle, tmp_path / "u")
    shutil.rmtree(first_episode(root))
    bad = repack(root, tmp_path / "bad.tar.gz", rehash=True, resign_key=priv)
    with pytest.raises(VerifyError, match="missing-task list"):
        verify_bundle(bad, pubkeys=[pub], progress=False)


def _tar_with(tmp_path: Path, add) -> Path:
    p = tmp_path / "evil.tar.gz"
    with tarfile.open(p, "w:gz") as tar:
        add(tar)
    return p


def _file(tar, name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize(
    "kind,message",
    [
        ("dotdot", "'..'"),
        ("absolute", "absolute path"),
        ("symlink", "link in archive"),
        ("bomb", "exceeds"),
    ],
)
def test_hostile_archives_rejected(tmp_path, kind, message):
    def add(tar):
        if kind == "dotdot":
            _file(tar, "bundle/../../etc/evil")
        elif kind == "absolute":
            _file(tar, "/tmp/evil")
        elif kind == "symlink":
            info = tarfile.TarInfo("bundle/link")
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
        else:
            _file(tar, "bundle/big", b"\0" * 4096)

    p = _tar_with(tmp_path, add)
    with pytest.raises(VerifyError, match=message):
        safe_extract(p, tmp_path / "out", max_bytes=1024)
    assert not (tmp_path / "out" / "bundle" / "big").exists() or kind != "bomb"


def test_leaderboard_add_and_build(setup, tmp_path):
    d, _, pub, bundle = setup
    subs = tmp_path / "submissions"
    entry = leaderboard.add(bundle, pubkeys=[pub], submissions=subs, workers=1, progress=False)
    data = json.loads(entry.read_text())
    assert data["verified"] and data["team"] == "Team A"
    index = leaderboard.build(tmp_path / "site", subs)
    page = index.read_text()
    assert "Team A" in page and "Human (paper)" in page
    board = json.loads((tmp_path / "site" / "leaderboard.json").read_text())
    assert board["entries"][0]["id"] == data["id"]


def test_leaderboard_refuses_fabricated_bundle(setup, tmp_path):
    d, priv, pub, bundle = setup
    root = unpack(bundle, tmp_path / "u")
    _edit_score(root, 100.0)
    bad = repack(root, tmp_path / "bad.tar.gz", rehash=True, resign_key=priv)
    with pytest.raises(leaderboard.LeaderboardError, match="failed replay"):
        leaderboard.add(bad, pubkeys=[pub], submissions=tmp_path / "s", workers=1, progress=False)
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").iterdir())


def test_leaderboard_page_in_headless_chromium(setup, tmp_path, browser):
    d, _, pub, bundle = setup
    subs = tmp_path / "submissions"
    leaderboard.add(bundle, pubkeys=[pub], submissions=subs, workers=1, progress=False)
    index = leaderboard.build(tmp_path / "site", subs)
    errors: list[str] = []
    page = browser.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(index.as_uri())
    names = page.locator("#board tbody tr td.name").all_inner_texts()
    assert len(names) == 2  # a partial bundle is listed apart, never ranked
    assert "Human (paper)" in names and "Random (paper)" in names
    partial = page.locator("#partial tbody tr td.name").all_inner_texts()
    assert len(partial) == 1 and "Team A" in partial[0] and "(partial)" in partial[0]
    # sort by overall score (the "All" S column): first click sorts descending
    col = page.locator("#board thead th[data-col]").filter(has_text="S").last
    col.click()
    ordered = page.locator("#board tbody tr td.name").all_inner_texts()
    assert ordered[0] == "Human (paper)"
    col.click()
    ordered = page.locator("#board tbody tr td.name").all_inner_texts()
    assert ordered[-1] == "Human (paper)"
    page.screenshot(path=str(tmp_path / "board.png"))
    assert not errors


# -- interrupts: verify and submit --endpoint -----------------------------------
# enough episodes that replay with two workers lasts several seconds
MANY = "taxi/*,cliffwalking/*,lavacrossing/*,cartpole/*,mountaincar/*,acrobot/*"


@pytest.fixture(scope="module")
def big_bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    priv, pub = keygen(d / "keys" / "team")
    run_eval(
        select_tasks(MANY),
        d / "run",
        options=RunOptions(runs=1, workers=2, progress=False, frames="none"),
    )
    bundle = d / "big-bundle.tar.gz"
    make_bundle(d / "run", priv, bundle, team="Team B", partial=True)
    return bundle, pub


@pytest.mark.parametrize("times", [1, 2])
def test_sigint_stops_verify_without_leftovers(big_bundle, tmp_path, times):
    bundle, pub = big_bundle
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "SDL_VIDEODRIVER": "dummy", "TMPDIR": str(tmpdir)}
    cmd = [
        sys.executable,
        "-m",
        "vical.cli",
        "verify",
        str(bundle),
        "--pubkey",
        str(pub),
        "-j",
        "2",
    ]
    # replay has started once the two forked workers (same command line) exist
    rc, took, out, err = interrupt_group(
        cmd, lambda p: len(processes_naming(str(bundle))) >= 3, times, env=env
    )
    assert rc == 130, (rc, took, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "PASS" not in out  # it stopped before the end
    if times == 1:
        assert "run the same command again" in err
    time.sleep(0.3)
    assert processes_naming(str(bundle)) == []
    assert list(tmpdir.iterdir()) == []  # the vical-verify-* unpack folder is gone


def test_replay_verdicts_in_bundle_order_with_workers(setup):
    _, _, pub, bundle = setup
    one = verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False)
    two = verify_bundle(bundle, pubkeys=[pub], workers=2, progress=False)
    assert one.ok and two.ok
    names = [e.episode for e in two.episodes]
    assert names == [e.episode for e in one.episodes] == sorted(names)
    assert len(names) == len(one.results) == 4


def _docker_client():
    """A Docker-SDK client that answers (Docker, or Podman's socket in DOCKER_HOST)."""
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as e:
        pytest.skip(f"no container engine answers (set DOCKER_HOST to Podman's socket): {e}")
    return client


SUBMIT_IMAGE = os.environ.get("VICAL_IMAGE", f"localhost/vical:{__version__}")


@pytest.mark.parametrize("times", [1, 2])
def test_sigint_stops_and_removes_the_submit_container(tmp_path, times):
    from vical.serve import BaselineServer

    client = _docker_client()
    try:
        client.images.get(SUBMIT_IMAGE)
    except Exception:
        pytest.skip(f"image {SUBMIT_IMAGE} is not built (docker/build.sh)")
    before = {c.id for c in client.containers.list(all=True)}
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "README.md").write_text("local dataset copy for the test\n")
    priv, _ = keygen(tmp_path / "key")
    with BaselineServer(delay=0.5) as srv:
        cmd = [
            sys.executable, "-m", "vical.cli", "submit", "--endpoint", srv.openai_base_url,
            "--model", "random", "--dataset", str(dataset), "--key", str(priv),
            "--out", str(tmp_path / "b.tar.gz"), "--tasks", "taxi/state1,cliffwalking/base",
            "--workdir", str(tmp_path / "runs"), "--image", SUBMIT_IMAGE, "--team", "t",
        ]  # fmt: skip
        # the evaluation inside the container is running once requests arrive
        rc, took, _, err = interrupt_group(
            cmd, lambda p: srv.counts.total() >= 2, times, gap=0.2, wait=15, start_within=90
        )
    assert rc == 130, (rc, took, err)
    assert "Traceback" not in err, err
    if times == 1:
        assert "container was stopped and removed" in err
    assert not (tmp_path / "b.tar.gz").exists()
    left = [c.name for c in client.containers.list(all=True) if c.id not in before]
    assert left == [], f"containers left behind: {left}"


def test_stop_container_stops_kills_and_removes_a_real_container():
    """stop_container on a container whose main process ignores SIGTERM: it is
    killed after the grace period and removed; a missing one is not an error."""
    from vical.submit.container import stop_container

    client = _docker_client()
    image = next(
        (i for i in ("localhost/vical-base:bookworm", SUBMIT_IMAGE) if _has_image(client, i)),
        None,
    )
    if image is None:
        pytest.skip("no local image to start a container from")
    c = client.containers.create(
        image, ["sh", "-c", "trap '' TERM; sleep 60"], entrypoint=[], name=None
    )
    c.start()
    stop_container(client, c.id, timeout=1)  # it ignores TERM: only the kill ends it
    assert c.id not in {x.id for x in client.containers.list(all=True)}
    stop_container(client, c.id, timeout=1)  # already gone: no error


def _has_image(client, name: str) -> bool:
    try:
        client.images.get(name)
    except Exception:
        return False
    return True


# -- trusted reading (vical.submit.unpack): manifest format 2, paths never read -----------
def _edit_manifest(root: Path, edit) -> None:
    m = json.loads((root / "manifest.json").read_text())
    edit(m)
    (root / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")


def test_format_1_bundle_asks_to_repack(setup, tmp_path):
    d, priv, pub, bundle = setup
    root = unpack(bundle, tmp_path / "u")

    def to_format_1(m):
        m["format"] = 1
        m["files"] = {p: e["sha256"] for p, e in m["files"].items()}

    _edit_manifest(root, to_format_1)
    old = repack(root, tmp_path / "old.tar.gz", resign_key=priv)
    with pytest.raises(VerifyError, match=r"format 1 .*re-pack"):
        verify_bundle(old, pubkeys=[pub], progress=False)


@pytest.mark.parametrize("path", ["../../../../../../etc/hostname", "/dev/zero", "/dev/stdin"])
def test_signed_manifest_naming_a_host_file_is_rejected_unread(setup, tmp_path, path):
    d, priv, pub, bundle = setup
    root = unpack(bundle, tmp_path / "u")
    _edit_manifest(root, lambda m: m["files"].update({path: {"sha256": "0" * 64, "size": 1}}))
    bad = repack(root, tmp_path / "bad.tar.gz", resign_key=priv)
    with pytest.raises(VerifyError, match=r"absolute path|'\.\.'"):
        verify_bundle(bad, pubkeys=[pub], progress=False)  # reading /dev/zero would hang


@pytest.mark.parametrize("fault", [KeyboardInterrupt, OSError])
def test_packing_cut_short_leaves_no_half_written_bundle(tmp_path, fault):
    from vical.submit.bundle import write_signed

    class Cut(bytes):  # content whose packing is cut (a signal, a full disk)
        def __len__(self) -> int:
            raise fault("cut")

    priv = tmp_path / "k.pem"
    keygen(priv)
    out = tmp_path / "out" / "bundle.tar.gz"
    files = {"a.json": b"{}", "b.json": Cut(b"x" * 10)}
    with pytest.raises(fault):
        write_signed({"files": {}}, files, load_private(priv), out)
    assert list(out.parent.iterdir()) == []  # neither the bundle nor its .tmp
