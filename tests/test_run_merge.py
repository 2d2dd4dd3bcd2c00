"""``vical merge``: three shards of the random baseline, merged, give the unsharded run's
report, bundle and verification; shards that are not one whole run are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vical.cli import app
from vical.run import load_results
from vical.run.merge import MergeError, merge_runs
from vical.run.results import RunManifest
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.verify import verify_bundle

TASKS = "cartpole/seed41,cliffwalking/base,taxi/state1"
TIMING = ("wall_seconds", "agent_seconds", "started_at", "finished_at")
cli = CliRunner()


def _baseline(out: Path, *extra: str) -> None:
    r = cli.invoke(
        app,
        [
            "baseline",
            "random",
            "--tasks",
            TASKS,
            "--runs",
            "2",
            "-j",
            "1",
            "--out",
            str(out),
            *extra,
        ],
    )
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The unsharded run, its three shards (tasks listed in another order) and the merge."""
    d = tmp_path_factory.mktemp("merge")
    _baseline(d / "full")
    order = "taxi/state1,cartpole/seed41,cliffwalking/base"
    for i in range(3):
        r = cli.invoke(
            app,
            [
                *("baseline", "random", "--tasks", order, "--runs", "2", "-j", "1"),
                "--out",
                str(d / f"s{i}"),
                "--shard",
                f"{i}/3",
            ],
        )
        assert r.exit_code == 0, r.output
    r = cli.invoke(app, ["merge", *(str(d / f"s{i}") for i in (2, 0, 1)), "--out", str(d / "m")])
    assert r.exit_code == 0, r.output
    assert "merged 3 shard(s), 6 episodes" in r.output
    return d


def _result(path: Path) -> dict:
    r = json.loads(path.read_text())
    return {k: v for k, v in r.items() if k not in TIMING}


def test_merged_run_equals_the_unsharded_run(runs, tmp_path):
    full, merged = runs / "full", runs / "m"
    names = sorted(p.name for p in (full / "episodes").iterdir())
    assert sorted(p.name for p in (merged / "episodes").iterdir()) == names
    assert len(names) == 6
    for n in names:
        assert _result(full / "episodes" / n / "eval_result.json") == _result(
            merged / "episodes" / n / "eval_result.json"
        )
        for f in ("log.jsonl", "trajectory.png"):
            assert (full / "episodes" / n / f).read_bytes() == (
                merged / "episodes" / n / f
            ).read_bytes()

    m = RunManifest.model_validate_json((merged / "manifest.json").read_text())
    f = RunManifest.model_validate_json((full / "manifest.json").read_text())
    assert m.shard is None and f.merged_from is None
    assert [p.shard for p in m.merged_from or []] == ["0/3", "1/3", "2/3"]
    assert (m.run_id, m.agent, m.agent_settings, m.run_seed, m.runs_per_task, m.tasks_digest) == (
        "m",
        f.agent,
        f.agent_settings,
        f.run_seed,
        f.runs_per_task,
        f.tasks_digest,
    )
    assert sorted(m.tasks) == sorted(f.tasks)

    # report: the same Table 1
    for run in (full, merged):
        r = cli.invoke(app, ["report", str(run), "--out", str(tmp_path / run.name)])
        assert r.exit_code == 0, r.output
    reports = [json.loads((tmp_path / n / "report.json").read_text()) for n in ("full", "m")]
    for rep in reports:
        for run in rep["runs"]:
            run.pop("name", None)
    assert reports[0]["runs"] and reports[0]["runs"] == reports[1]["runs"]

    # bundle: the same files, the same logs byte for byte, the same summary
    priv, pub = keygen(tmp_path / "team")
    bundles = {}
    for run in (full, merged):
        out = tmp_path / f"{run.name}.tar.gz"
        bundles[run.name] = (out, make_bundle(run, priv, out, team="T", partial=True))
    (bf, mf), (bm, mm) = bundles["full"], bundles["m"]
    assert sorted(mf["files"]) == sorted(mm["files"])
    for path, entry in mf["files"].items():
        if path.endswith("log.jsonl"):
            assert mm["files"][path] == entry, path
    assert mf["missing_tasks"] == mm["missing_tasks"]
    for s in (mf["summary"], mm["summary"]):
        s.pop("name", None)
    assert mf["summary"] == mm["summary"]

    # verification: both pass, with the same replayed episodes, scores and frame hashes
    vf, vm = (verify_bundle(b, pubkeys=[pub], workers=1, progress=False) for b in (bf, bm))
    assert vf.ok and vm.ok
    assert [e.episode for e in vf.episodes] == [e.episode for e in vm.episodes]
    key = lambda r: {k: v for k, v in r.model_dump().items() if k not in TIMING}  # noqa: E731
    assert [key(r) for r in vf.results] == [key(r) for r in vm.results]
    assert [r.frame_hashes for r in vm.results] == [
        r.frame_hashes for r in load_results(full) if not r.infrastructure_failure
    ]


def _copies(runs: Path, tmp_path: Path, *names: str) -> list[Path]:
    out = []
    for i, n in enumerate(names):
        dst = tmp_path / f"c{i}-{n}"
        shutil.copytree(runs / n, dst)
        out.append(dst)
    return out


@pytest.mark.parametrize(
    ("names", "edit", "words"),
    [
        (("s0", "s1"), None, r"gap: shard\(s\) 2/3 missing"),
        (("s0", "s1", "s1", "s2"), None, "overlap: shard 1/3 is given twice"),
        (("s0", "s1", "full"), None, "is not a shard"),
        (
            ("s0", "s1", "s2"),
            lambda c: shutil.rmtree(next((c[1] / "episodes").iterdir())),
            r"gap: .* lacks 1 of its 2 episode\(s\)",
        ),
        (
            ("s0", "s1", "s2"),
            lambda c: shutil.copytree(
                next((c[1] / "episodes").iterdir()),
                c[0] / "episodes" / next((c[1] / "episodes").iterdir()).name,
            ),
            "overlap: .* holds episode\\(s\\) outside its slice",
        ),
        (
            ("s0", "s1", "s2"),
            lambda c: next((c[2] / "episodes").iterdir()).joinpath("log.jsonl").write_text("{}"),
            r"is damaged \(log.jsonl changed\)",
        ),
        (
            ("s0", "s1", "s2"),
            lambda c: _edit_manifest(c[2], run_seed=5),
            r"not shards of one run: they differ in run_seed \(0 vs 5\)",
        ),
        (
            ("s0", "s1", "s2"),
            lambda c: _edit_manifest(c[1], agent_settings={"seed": 0, "temperature": 1.0}),
            r"differ in agent settings \(temperature\)",
        ),
    ],
    ids=[
        "gap",
        "twice",
        "not-a-shard",
        "missing-episode",
        "foreign-episode",
        "damaged",
        "seed",
        "settings",
    ],
)
def test_merge_refuses_what_is_not_one_whole_run(runs, tmp_path, names, edit, words):
    copies = _copies(runs, tmp_path, *names)
    if edit is not None:
        edit(copies)
    with pytest.raises(MergeError, match=words):
        merge_runs(copies, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.merge-")]


def _edit_manifest(folder: Path, **fields) -> None:
    p = folder / "manifest.json"
    m = json.loads(p.read_text())
    m.update(fields)
    p.write_text(json.dumps(m))


def test_merge_cli_refuses_a_used_out_folder_and_exits_1(runs, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("")
    r = cli.invoke(
        app, ["merge", *(str(runs / f"s{i}") for i in range(3)), "--out", str(tmp_path / "busy")]
    )
    assert r.exit_code == 1 and "exists and is not empty" in r.output


@pytest.mark.parametrize("alias", ["same", "symlink", "dot"])
def test_merge_cli_names_a_shard_folder_given_twice_as_an_overlap(runs, tmp_path, alias):
    """The same folder twice (or under another name) is an overlap of its episodes, said
    in one line; not the lock it would wait for on itself ("in use by vical pid N")."""
    s1 = runs / "s1"
    if alias == "same":
        again = s1
    elif alias == "symlink":
        again = tmp_path / "link"
        again.symlink_to(s1)
    else:
        again = runs / "." / "s1"
    shards = [str(runs / "s0"), str(s1), str(again), str(runs / "s2")]
    r = cli.invoke(app, ["merge", *shards, "--out", str(tmp_path / "m")])
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: overlap:"), r.output
    assert "in use" not in r.output and str(again) in lines[0] and "given twice" in lines[0]
    assert not (tmp_path / "m").exists()
