"""Verification trusts nothing the submitter wrote: bundles re-signed by their own key
with edited tags, log actions, a missing log, runs of another agent or settings, and
every field of a result, against the leaderboard cells that come out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vical.run import RunOptions, run_eval
from vical.serve import BaselineServer
from vical.spec import select_tasks, tasks_digest
from vical.submit import leaderboard
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.verify import VerifyError, check_contents, verify_bundle

TASKS = "taxi/state1,cartpole/seed41,cliffwalking/base"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("verify")
    priv, pub = keygen(d / "team")
    run_eval(select_tasks(TASKS), d / "run", options=RunOptions(runs=1, workers=1, progress=False))
    return d, priv, pub


def _edited(run, tmp_path: Path, edit) -> Path:
    """A copy of the run, edited by ``edit(run_copy)``, packed and signed by the team's key."""
    d, priv, _ = run
    copy = tmp_path / "run"
    shutil.copytree(d / "run", copy)
    edit(copy)
    out = tmp_path / "b.tar.gz"
    make_bundle(copy, priv, out, team="T", partial=True)
    return out


def _episode(copy: Path, task: str = "taxi/state1") -> Path:
    env, variant = task.split("/")
    return copy / "episodes" / f"{env}__{variant}__r0"


def _edit_result(copy: Path, **fields) -> None:
    p = _episode(copy) / "eval_result.json"
    r = json.loads(p.read_text())
    r.update(fields)
    p.write_text(json.dumps(r))


def _verify(bundle: Path, pub: Path):
    return verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False)


def test_untouched_bundle_passes_with_verified_results(run, tmp_path):
    bundle = _edited(run, tmp_path, lambda c: None)
    v = _verify(bundle, run[2])
    assert v.ok and len(v.results) == 3


def _retag(copy: Path) -> None:
    p = _episode(copy) / "eval_result.json"
    r = json.loads(p.read_text())
    r["tags"]["types"] = ["Shooter"]
    p.write_text(json.dumps(r))


def _change_log_action(copy: Path) -> None:
    log = _episode(copy) / "log.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    step = next(rec for rec in lines if rec["type"] == "step")
    step["action"] = "Down" if step["action"] != "Down" else "Up"
    log.write_text("".join(json.dumps(rec) + "\n" for rec in lines))


def _drop_log(copy: Path) -> None:
    (_episode(copy) / "log.jsonl").unlink()


def _other_agent(copy: Path) -> None:
    _edit_result(copy, agent="openai-chat")


def _extra_run(copy: Path) -> None:
    """(make_bundle refuses this run; the test packs it by hand, see below)"""
    src = _episode(copy)
    dst = src.with_name(src.name.replace("__r0", "__r1"))
    shutil.copytree(src, dst)
    p = dst / "eval_result.json"
    r = json.loads(p.read_text())
    r["run_index"] = 1
    p.write_text(json.dumps(r))


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (_retag, "tags differ from this task data"),
        (_change_log_action, "line 3 (step): is not step 1 with the decided action"),
        (_drop_log, "no log.jsonl"),
        (_other_agent, "played by agent 'openai-chat', the run's is 'random'"),
        (_extra_run, "run index 1 outside the run's 1 run(s)"),
    ],
    ids=["tags", "log-actions", "missing-log", "other-agent", "extra-run"],
)
def test_resigned_bundle_with_edited_data_fails_with_the_reason(run, tmp_path, edit, reason):
    if edit is _extra_run:  # vical submit refuses it, so a hostile submitter packs it by hand
        from tests.test_submit import repack, unpack

        root = unpack(_edited(run, tmp_path, lambda c: None), tmp_path / "u")
        edit(root / "run")
        bundle = repack(root, tmp_path / "hand.tar.gz", rehash=True, resign_key=run[1])
    else:
        bundle = _edited(run, tmp_path, edit)
    with pytest.raises(VerifyError) as e:
        _verify(bundle, run[2])
    assert reason in str(e.value)
    assert "\n" not in str(e.value)


def test_other_agent_settings_in_one_episode_fail(tmp_path):
    d = tmp_path
    priv, pub = keygen(d / "team")
    with BaselineServer() as srv:
        run_eval(
            select_tasks("taxi/state1,taxi/state2"),
            d / "run",
            agent="openai-chat",
            agent_kwargs={"endpoint": srv.openai_base_url, "model": "first"},
            options=RunOptions(workers=1, progress=False),
        )
    log = d / "run" / "episodes" / "taxi__state2__r0" / "log.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    for rec in lines:
        if rec["type"] == "agent_session":
            rec["settings"]["temperature"] = 1.5
    log.write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    make_bundle(d / "run", priv, d / "b.tar.gz", team="T", partial=True)
    with pytest.raises(VerifyError, match=r"agent settings differ from the run's \(temperature\)"):
        _verify(d / "b.tar.gz", pub)


def test_an_infrastructure_failure_is_not_accepted_as_a_result(run, tmp_path):
    d = run[0]
    root = tmp_path / "bundle"
    shutil.copytree(d / "run", root / "run")
    _edit_result(root / "run", failure_mode="api_error", passed=False)
    manifest = {"fingerprint": {"tasks_digest": tasks_digest()}, "partial": True}
    with pytest.raises(VerifyError, match="infrastructure failure"):
        check_contents(root, manifest)


# every field of a result a submitter could edit, and what verify must do with it
FIELD_EDITS = {
    "score": {"score": 100.0},
    "passed": {"passed": True},
    "outcome": {"outcome": "Victory"},
    "failure_mode": {"failure_mode": None},
    "steps": {"steps": 1},
    "max_steps": {"max_steps": 5},
    "env": {"env": "pong"},
    "frame_hashes": {"frame_hashes": ["0" * 64]},
    "actions": {"actions": []},
    "progress": {"progress": {"distance": 1.0}},
    "usage": {"usage": {"input_tokens": 1}},
    "wall_seconds": {"wall_seconds": 0.001},
}


@pytest.mark.parametrize("field", sorted(FIELD_EDITS))
def test_no_submitter_edit_changes_a_leaderboard_cell(run, tmp_path, field):
    """An edited field is either rejected, or verified away: the leaderboard's cells
    equal the untouched bundle's."""
    d, priv, pub = run
    clean = tmp_path / "clean"
    clean.mkdir()
    good = _edited(run, clean, lambda c: None)
    subs = tmp_path / "subs"
    base = json.loads(
        leaderboard.add(
            good, pubkeys=[pub], submissions=subs, workers=1, progress=False
        ).read_text()
    )["report"]
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bundle = _edited(run, bad_dir, lambda c: _edit_result(c, **FIELD_EDITS[field]))
    try:
        entry = leaderboard.add(
            bundle, pubkeys=[pub], submissions=tmp_path / "subs2", workers=1, progress=False
        )
    except (VerifyError, leaderboard.LeaderboardError):
        return  # rejected
    report = json.loads(entry.read_text())["report"]
    assert report["columns"] == base["columns"] and report["envs"] == base["envs"], field
    assert field in ("progress", "usage", "wall_seconds")  # only fields no cell reads pass


def test_submit_refuses_a_run_missing_some_runs_of_a_task(tmp_path):
    from vical.submit.bundle import BundleError

    priv, _ = keygen(tmp_path / "team")
    run_eval(
        select_tasks("taxi/state1"),
        tmp_path / "run",
        options=RunOptions(runs=2, workers=1, progress=False),
    )
    shutil.rmtree(tmp_path / "run" / "episodes" / "taxi__state1__r1")
    with pytest.raises(BundleError, match=r"lack some of the run's 2 run\(s\).*taxi/state1"):
        make_bundle(tmp_path / "run", priv, tmp_path / "b.tar.gz", team="T", partial=True)


def test_verify_cli_exit_codes(run, tmp_path):
    """0 verifies, 1 rejected, 2 could not run (no bundle file, no trusted key)."""
    import subprocess
    import sys

    d, _, pub = run
    good = _edited(run, tmp_path, lambda c: None)
    cli = [sys.executable, "-m", "vical.cli", "verify"]
    ok = subprocess.run([*cli, str(good), "--pubkey", str(pub)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    other, other_pub = keygen(tmp_path / "other")
    bad = subprocess.run([*cli, str(good), "--pubkey", str(other_pub)], capture_output=True,
                         text=True)  # fmt: skip
    assert bad.returncode == 1 and "unknown key" in bad.stderr
    gone = subprocess.run([*cli, str(tmp_path / "nope.tar.gz"), "--pubkey", str(pub)],
                          capture_output=True, text=True)  # fmt: skip
    assert gone.returncode == 2 and "no such bundle file" in gone.stderr
    nokey = subprocess.run([*cli, str(good)], capture_output=True, text=True, cwd=tmp_path)
    assert nokey.returncode == 2 and "no trusted public key" in nokey.stderr


def test_a_wrong_saved_start_cannot_fail_an_honest_episode(run):
    """Verification restores each task's start from a snapshot saved without the check;
    an episode that then disagrees with its claims is replayed again from replayed
    starts, and only that second replay decides. A saved start that lies (here: the
    state a few decisions later) shows up as problems on the fast path and as none in
    the verdict."""
    from vical.envs import close_idle, make_env
    from vical.envs.core import frame_sha256
    from vical.envs.environment import _TRUSTED, StartState
    from vical.submit.replay import replay_one, replay_task

    d = run[0]
    payload = (_episode(d / "run") / "eval_result.json").read_text()
    close_idle()
    env = make_env("taxi/state1", starts="trusted")
    start = frame_sha256(env.reset())
    for a in env.action_names:
        if env.done or env.step(a).frame_sha256 != start:
            break
    assert not env.done and frame_sha256(env.frame) != start
    _TRUSTED[env.adapter] = StartState(env.adapter.snapshot(), env.frame.copy())
    env.close()  # the poisoned simulator waits in the pool for the next taxi/state1

    _, problems, _ = replay_one(payload, starts="trusted")
    assert problems, "the poisoned start was not used"
    [(index, name, problems, facts)] = replay_task([(7, payload)])
    assert (index, name, problems) == (7, "taxi__state1__r0", [])
    assert facts["frame_hashes"] == json.loads(payload)["frame_hashes"]
    close_idle()
