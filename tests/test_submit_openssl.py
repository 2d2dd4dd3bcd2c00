"""A bundle's signature checks with the OpenSSL command line, as submissions/README.md says.

The shell blocks run here are read from the README (each follows a marker comment),
so the documented recipe and this test cannot drift apart. Nothing of vical checks
the signature in these tests: only ``tar``, ``sed``, ``base64`` and ``openssl``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import HANG

from vical.run import RunOptions, run_eval
from vical.spec import select_tasks
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen

README = Path(__file__).resolve().parents[1] / "submissions" / "README.md"
OPENSSL = shutil.which("openssl")

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")


def doc_block(marker: str) -> str:
    """The fenced ``sh`` block right after ``<!-- marker: ... -->`` in the README."""
    m = re.search(
        rf"^<!-- {re.escape(marker)}:[^\n]*-->\n```sh\n(.*?)^```$", README.read_text(), re.M | re.S
    )
    assert m, f"{README}: no ```sh block after a <!-- {marker}: ... --> line"
    return m.group(1)


def sh(script: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with bash in ``home`` (also its HOME, so ``~`` is the test folder)."""
    return subprocess.run(
        ["bash", "-c", script],
        cwd=home,
        env={"HOME": str(home), "PATH": os.environ["PATH"], "LC_ALL": "C"},
        capture_output=True,
        text=True,
        timeout=HANG,
    )


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A real bundle of a one-task run, laid out as the README's recipe expects:
    ``NAME.tar.gz`` in the working folder, the public key at ``~/.vical/team.key.pub``."""
    home = tmp_path_factory.mktemp("home")
    priv, pub = keygen(home / ".vical" / "team.key")
    run = home / "run"
    run_eval(
        select_tasks("taxi/state1"),
        run,
        options=RunOptions(runs=1, workers=1, progress=False, frames="none"),
    )
    make_bundle(run, priv, home / "NAME.tar.gz", team="Team O", partial=True)
    return home


def fresh(signed: Path, tmp_path: Path) -> Path:
    """A copy of the signed folder that a test may change."""
    home = tmp_path / "home"
    shutil.copytree(signed, home, ignore=shutil.ignore_patterns("run"))
    return home


def test_openssl_verifies_a_genuine_bundle(signed, tmp_path):
    home = fresh(signed, tmp_path)
    r = sh(doc_block("openssl-verify"), home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Signature Verified Successfully" in r.stdout
    sig = json.loads((home / "sigcheck/bundle/manifest.sig").read_text())
    assert len((home / "sigcheck/sig.bin").read_bytes()) == 64
    assert sig["algorithm"] == "ed25519"


def test_openssl_rejects_a_changed_manifest(signed, tmp_path):
    """One byte of manifest.json changed after signing (the team name): openssl refuses it."""
    home = fresh(signed, tmp_path)
    bundle = home / "NAME.tar.gz"
    with tarfile.open(bundle) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    name, data = members[0][0].name, members[0][1]
    assert name == "bundle/manifest.json" and b'"team": "Team O"' in data
    forged = data.replace(b'"team": "Team O"', b'"team": "Team Q"')
    with tarfile.open(bundle, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for m, d in members:
            m.size = len(forged if m.name == name else d)
            tar.addfile(m, io.BytesIO(forged if m.name == name else d))
    r = sh(doc_block("openssl-verify"), home)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "Signature Verification Failure" in r.stdout + r.stderr
    assert (home / "sigcheck/bundle/manifest.json").read_bytes() == forged


def test_openssl_rejects_a_signature_by_another_key(signed, tmp_path):
    """The trusted key is not the signer's: the same commands fail."""
    home = fresh(signed, tmp_path)
    keygen(tmp_path / "other.key")
    shutil.copy(tmp_path / "other.key.pub", home / ".vical" / "team.key.pub")
    r = sh(doc_block("openssl-verify"), home)
    assert r.returncode != 0 and "Signature Verification Failure" in r.stdout + r.stderr


def test_key_id_with_standard_tools(signed, tmp_path):
    """The documented key-id pipeline prints the id recorded in manifest.sig."""
    home = fresh(signed, tmp_path)
    script = doc_block("openssl-verify") + doc_block("openssl-key-id")
    r = sh(script, home)
    assert r.returncode == 0, r.stderr
    computed, recorded = r.stdout.splitlines()[-2:]
    sig = json.loads((home / "sigcheck/bundle/manifest.sig").read_text())
    assert re.fullmatch(r"[0-9a-f]{16}", computed)
    assert computed == recorded == sig["key_id"]


def test_raw_public_key_to_pem(signed, tmp_path):
    """A raw 32-byte key with the documented DER header prefixed is the same PEM key."""
    home = fresh(signed, tmp_path)
    pem = home / ".vical" / "team.key.pub"
    raw = subprocess.run(
        ["openssl", "pkey", "-pubin", "-in", str(pem), "-outform", "DER"],
        capture_output=True,
        check=True,
    ).stdout[-32:]
    (home / "raw.bin").write_bytes(raw)
    r = sh(doc_block("openssl-raw-key"), home)
    assert r.returncode == 0, r.stderr
    assert (home / "pub.der").read_bytes()[:12].hex() == "302a300506032b6570032100"
    assert (home / "pub.pem").read_text() == pem.read_text()
    # and the converted key verifies the bundle through the documented commands
    verify = doc_block("openssl-verify").replace(
        "PUBKEY=~/.vical/team.key.pub", f"PUBKEY={home / 'pub.pem'}"
    )
    assert verify != doc_block("openssl-verify")
    r = sh(verify, home)
    assert r.returncode == 0 and "Signature Verified Successfully" in r.stdout, r.stderr


def test_bundle_layout_matches_the_readme(signed):
    """What the README says about the archive: gzip tar, one top folder, the two
    manifest files first, regular files only, paths in the manifest relative to it."""
    bundle = signed / "NAME.tar.gz"
    with gzip.open(bundle) as g:
        g.read(1)  # a gzip stream
    with tarfile.open(bundle) as tar:
        members = tar.getmembers()
        manifest = json.loads(tar.extractfile(members[0]).read())  # type: ignore[union-attr]
    names = [m.name for m in members]
    assert names[:2] == ["bundle/manifest.json", "bundle/manifest.sig"]
    assert all(m.isfile() for m in members)
    assert {n.split("/", 1)[0] for n in names} == {"bundle"}
    assert sorted(names[2:]) == sorted(f"bundle/{p}" for p in manifest["files"])
    assert "bundle/run/manifest.json" in names
    assert any(re.fullmatch(r"bundle/run/episodes/[^/]+__[^/]+__r0/log\.jsonl", n) for n in names)
    assert names[2:] == sorted(names[2:])
    assert "```\nbundle/manifest.json\nbundle/manifest.sig\nbundle/run/" in README.read_text()
