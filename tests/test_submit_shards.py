"""Verification in shards: ``vical verify --shard I/N --out`` on each slice, then
``vical merge`` of the verdict files, gives the verdict of one unsharded verification;
verdicts that are not the slices of one bundle's verification are refused."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from vical.cli import app
from vical.run import RunOptions, run_eval
from vical.run.shard import Shard
from vical.spec import select_tasks
from vical.submit.bundle import BundleError, collect_files, file_entry, make_bundle, write_signed
from vical.submit.keys import keygen, load_private
from vical.submit.shards import (
    VerdictMergeError,
    merge_verdicts,
    read_verdict,
    verdict_json,
)
from vical.submit.verify import VerifyError, verify_bundle

TASKS = "cartpole/seed41,cliffwalking/base,taxi/state1"
cli = CliRunner()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("vshards")
    priv, pub = keygen(d / "team")
    run_eval(select_tasks(TASKS), d / "run", options=RunOptions(runs=2, workers=1, progress=False))
    make_bundle(d / "run", priv, d / "b.tar.gz", team="T", partial=True)
    for i in range(3):
        r = cli.invoke(
            app,
            [
                "verify",
                str(d / "b.tar.gz"),
                "--pubkey",
                str(pub),
                "-j",
                "1",
                "--shard",
                f"{i}/3",
                "--out",
                str(d / f"v{i}.json"),
            ],
        )
        assert r.exit_code == 0, r.output
        assert f"shard {i}/3 of the replay" in r.output
    return d, priv, pub


def test_merged_verdict_equals_the_unsharded_verification(bundle):
    d, _, pub = bundle
    whole = verify_bundle(d / "b.tar.gz", pubkeys=[pub], workers=1, progress=False)
    assert whole.ok and len(whole.episodes) == 6
    sizes = [len(read_verdict(d / f"v{i}.json")[0].episodes) for i in range(3)]
    assert sum(sizes) == 6 and all(sizes)  # each slice replayed a part

    r = cli.invoke(
        app, ["merge", *(str(d / f"v{i}.json") for i in (1, 2, 0)), "--out", str(d / "v.json")]
    )
    assert r.exit_code == 0, r.output
    assert "PASS: 6/6 episodes replay exactly" in r.output
    merged, digest, shard = read_verdict(d / "v.json")
    assert shard is None
    assert verdict_json(merged, digest, None) == verdict_json(whole, digest, None)


def test_a_mismatch_in_one_slice_fails_the_merged_verdict(bundle, tmp_path):
    d, _, _ = bundle
    data = json.loads((d / "v1.json").read_text())
    data["ok"] = False
    data["episodes"][0] = {**data["episodes"][0], "ok": False, "problems": ["frame hashes differ"]}
    data["results"] = []
    (tmp_path / "v1.json").write_text(json.dumps(data))
    merged, _ = merge_verdicts([d / "v0.json", tmp_path / "v1.json", d / "v2.json"])
    assert not merged.ok and merged.results == []
    assert [e.episode for e in merged.mismatches] == [data["episodes"][0]["episode"]]
    r = cli.invoke(
        app,
        [
            "merge",
            str(d / "v0.json"),
            str(tmp_path / "v1.json"),
            str(d / "v2.json"),
            "--out",
            str(tmp_path / "v.json"),
        ],
    )
    assert r.exit_code == 1 and "FAIL" in r.output


def _edited(src, dst, **fields):
    data = json.loads(src.read_text())
    data.update(fields)
    dst.write_text(json.dumps(data))
    return dst


@pytest.mark.parametrize(
    ("files", "words"),
    [
        (["v0", "v1"], r"gap: verdict\(s\) of shard\(s\) 2/3 missing"),
        (["v0", "v1", "v1", "v2"], "overlap: shard 1/3 is given twice"),
        (["v0", "v1", "other-bundle"], "verified another bundle"),
        (["v0", "v1", "whole"], "the verdict of a whole bundle"),
        (["v0", "v1", "four"], "different numbers of shards"),
        (["v0", "v1", "signer"], "disagree on the bundle's signer"),
        (["v0", "v1", "v2", "not-json"], "not a verdict file"),
    ],
)
def test_merge_refuses_verdicts_that_are_not_one_verification(bundle, tmp_path, files, words):
    d, _, _ = bundle
    v2 = d / "v2.json"
    made = {
        "other-bundle": lambda p: _edited(v2, p, bundle_sha256="0" * 64),
        "whole": lambda p: _edited(v2, p, shard=None),
        "four": lambda p: _edited(v2, p, shard="2/4"),
        "signer": lambda p: _edited(v2, p, signer="someone else"),
        "not-json": lambda p: p.write_text("{") and p,
    }
    paths = []
    for name in files:
        if name in made:
            p = tmp_path / f"{name}.json"
            made[name](p)
            paths.append(p)
        else:
            paths.append(d / f"{name}.json")
    with pytest.raises(VerdictMergeError, match=words):
        merge_verdicts(paths)


def test_verify_shard_needs_out_and_a_lone_shard_run_is_not_accepted(bundle, tmp_path):
    d, priv, pub = bundle
    r = cli.invoke(app, ["verify", str(d / "b.tar.gz"), "--pubkey", str(pub), "--shard", "0/2"])
    assert r.exit_code == 2 and "--shard 0/2 needs --out FILE" in r.output
    run = tmp_path / "s0"
    run_eval(
        select_tasks("taxi/state1"),
        run,
        options=RunOptions(workers=1, progress=False, shard=Shard(0, 2)),
    )
    shutil.rmtree(run / ".partial", ignore_errors=True)
    with pytest.raises(BundleError, match=r"shard 0/2 of a sharded evaluation; merge all 2"):
        make_bundle(run, priv, tmp_path / "s.tar.gz", team="T", partial=True)
    # packed and signed by hand around the shard, it still fails verification
    plain = tmp_path / "plain"
    shutil.copytree(run, plain)
    m = json.loads((plain / "manifest.json").read_text())
    m.pop("shard")
    (plain / "manifest.json").write_text(json.dumps(m))
    manifest = make_bundle(plain, priv, tmp_path / "p.tar.gz", team="T", partial=True)
    files = collect_files(run)
    manifest["files"] = {p: file_entry(b) for p, b in sorted(files.items())}
    write_signed(manifest, files, load_private(priv), tmp_path / "s.tar.gz")
    with pytest.raises(VerifyError, match=r"shard 0/2 of a sharded evaluation; merge"):
        verify_bundle(tmp_path / "s.tar.gz", pubkeys=[pub], workers=1, progress=False)
