"""Verification, third pass: one registry of agent kinds, default-deny.

Honest bundles of the reference agents verify in a fresh process (``vical verify``
run as a subprocess, so nothing imported by the tests helps); forgeries re-signed with
the submitter's own key are refused with one line: an agent renamed to a name no kind
declares, and the expert's plan run relabelled as the random agent. The references
are never ranked, whatever their labels say.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_submit import repack, unpack
from vical.agent.base import _MODULES
from vical.run import RunOptions, run_eval
from vical.serve import BaselineServer
from vical.spec import select_tasks
from vical.submit import leaderboard
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.kinds import AGENT_KINDS, WORLD_MODEL_KINDS, agent_kind, is_ranked_agent
from vical.submit.verify import VerifyError
from vical.wm.couple import WORLD_MODELS

TASKS = "taxi/state1,cliffwalking/base"
ROOT = Path(__file__).resolve().parents[1]


# `vical verify` with another file as the packaged expert plans (see expert_plans)
WITH_PLANS = (
    "import sys; from pathlib import Path; import vical.agent.plans as p; "
    "p.DEFAULT_PLANS = Path(sys.argv.pop(1)); from vical.cli import main; main()"
)


def verify_in_subprocess(
    bundle: Path, pub: Path, plans: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``vical verify`` in a new Python process (only vical's own imports); ``plans``:
    the file it takes for the packaged expert plans."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    start = ["-m", "vical.cli"] if plans is None else ["-c", WITH_PLANS, str(plans)]
    return subprocess.run(
        [sys.executable, *start, "verify", str(bundle), "--pubkey", str(pub), "-j", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def assert_refused(proc: subprocess.CompletedProcess[str], reason: str) -> str:
    """Exit 1 with one ``error:`` line naming ``reason``; never a traceback, nor the
    last-resort refusal (which would be a bug)."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out and "[unexpected]" not in out, out
    lines = [x for x in out.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and reason in lines[0], out
    return lines[0]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    from fuzz_bundles.mutate import expert_plans

    import vical.agent.plans

    d = tmp_path_factory.mktemp("kinds")
    priv, pub = keygen(d / "team")
    opts = RunOptions(workers=1, progress=False)
    run_eval(select_tasks(TASKS), d / "random", options=opts)
    mp = pytest.MonkeyPatch()  # the packaged plans, for this task data, for this module
    mp.setattr(vical.agent.plans, "DEFAULT_PLANS", vical.agent.plans.DEFAULT_PLANS)
    expert_plans(d, TASKS)
    run_eval(
        select_tasks(TASKS),
        d / "plan",
        agent="plan",
        agent_kwargs={"plans": str(d / "expert-plans.json")},
        options=RunOptions(workers=1, progress=False, demos=False),
    )
    with BaselineServer() as srv:
        run_eval(
            select_tasks(TASKS),
            d / "api",
            agent="openai-chat",
            agent_kwargs={"endpoint": srv.openai_base_url, "model": "baseline"},
            options=RunOptions(workers=1, progress=False, demos=False),
        )
    for name in ("random", "plan", "api"):
        make_bundle(d / name, priv, d / f"{name}.tar.gz", team="Team A", partial=True)
    yield d, priv, pub
    mp.undo()


def _edit_json(path: Path, **fields) -> None:
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _relabel(root: Path, agent: str, settings: dict, demos: bool | None = None) -> None:
    """The run manifest and every result say ``agent`` (and the condition ``demos``)."""
    run = root / "run" / "manifest.json"
    extra = {} if demos is None else {"demos": demos}
    _edit_json(run, agent=agent, agent_settings=settings, **extra)
    for p in (root / "run" / "episodes").glob("*/eval_result.json"):
        _edit_json(p, agent=agent)
    bm = json.loads((root / "manifest.json").read_text())
    bm["submitter"]["endpoint_kind"] = agent
    bm["submitter"]["model"] = "gpt-5-vision"
    if demos is not None:
        bm["condition"]["demos"] = demos
    (root / "manifest.json").write_text(json.dumps(bm, indent=2, sort_keys=True) + "\n")


def _edit_logs(root: Path, edit) -> None:
    for log in (root / "run" / "episodes").glob("*/log.jsonl"):
        recs = [json.loads(x) for x in log.read_text().splitlines()]
        log.write_text("".join(json.dumps(r) + "\n" for r in edit(recs)))


# -- honest bundles of each reference, in a fresh process ---------------------------------
@pytest.mark.parametrize("name", ["random", "plan", "api"])
def test_honest_bundles_verify_in_a_fresh_process(bundles, name):
    d, _, pub = bundles
    proc = verify_in_subprocess(d / f"{name}.tar.gz", pub, d / "expert-plans.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: 2/2 episodes replay exactly" in proc.stdout


@pytest.mark.parametrize("backend", ["openai-responses", "gemini", "openrouter"])
def test_every_other_protocol_backend_verifies_in_a_fresh_process(tmp_path, backend):
    """(openai-chat is the `api` bundle above, inspect in tests/test_inspect_eval.py)"""
    priv, pub = keygen(tmp_path / "team")
    with BaselineServer() as srv:
        run_eval(
            select_tasks("cliffwalking/base"),
            tmp_path / "run",
            agent=backend,
            agent_kwargs={
                "endpoint": srv.url if backend == "gemini" else srv.openai_base_url,
                "model": "baseline",
            },
            options=RunOptions(workers=1, progress=False, demos=False),
        )
    make_bundle(tmp_path / "run", priv, tmp_path / "b.tar.gz", team="Team A", partial=True)
    proc = verify_in_subprocess(tmp_path / "b.tar.gz", pub)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: 1/1 episodes replay exactly" in proc.stdout


# -- forgeries --------------------------------------------------------------------------
def test_an_agent_renamed_to_an_undeclared_kind_is_refused(bundles, tmp_path):
    """A --no-demos API run relabelled demos-on, its agent renamed and every request,
    response, session and media removed: no looser path checks an unknown agent."""
    d, priv, pub = bundles
    root = unpack(d / "api.tar.gz", tmp_path / "u")
    _relabel(root, "my-agent", {"model": "gpt-5-vision"}, demos=True)
    keep = {"start", "decision", "step", "end", "agent_failure"}
    _edit_logs(root, lambda recs: [r for r in recs if r["type"] in keep])
    for media in (root / "run" / "episodes").glob("*/media"):
        for f in media.iterdir():
            f.unlink()
        media.rmdir()
    bundle = repack(root, tmp_path / "forged.tar.gz", rehash=True, resign_key=priv)
    assert_refused(verify_in_subprocess(bundle, pub), "[agent] run/manifest.json: agent 'my-agent'")


def test_the_expert_run_relabelled_random_is_refused(bundles, tmp_path):
    """The plan run as the random agent (labels, demos on, a model name, the plan's own
    record fields removed): the random agent's actions are drawn again from the seed."""
    d, priv, pub = bundles
    root = unpack(d / "plan.tar.gz", tmp_path / "u")
    _relabel(root, "random", {"seed": 0}, demos=True)
    _edit_logs(
        root,
        lambda recs: [
            {k: v for k, v in r.items() if k not in ("source", "expert")}
            if r["type"] == "decision"
            else r
            for r in recs
        ],
    )
    bundle = repack(root, tmp_path / "forged.tar.gz", rehash=True, resign_key=priv)
    assert_refused(verify_in_subprocess(bundle, pub), "is not the seed's decision for step")


def test_a_plan_run_from_another_plan_file_is_refused(bundles, tmp_path):
    d, priv, pub = bundles
    root = unpack(d / "plan.tar.gz", tmp_path / "u")
    run = json.loads((root / "run" / "manifest.json").read_text())
    _edit_json(
        root / "run" / "manifest.json",
        agent_settings={**run["agent_settings"], "plans_sha256": "0" * 64},
    )
    bundle = repack(root, tmp_path / "forged.tar.gz", rehash=True, resign_key=priv)
    with pytest.raises(VerifyError, match=r"not the plan file packaged with this vical"):
        from vical.submit.verify import verify_bundle

        verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False)


def test_a_random_run_whose_actions_were_changed_is_refused_before_replay(bundles, tmp_path):
    """Changing one of the random agent's actions (log and result alike) no longer needs
    the replay to notice: the seed gives the action back."""
    d, priv, pub = bundles
    root = unpack(d / "random.tar.gz", tmp_path / "u")
    ep = sorted((root / "run" / "episodes").iterdir())[0]
    recs = [json.loads(x) for x in (ep / "log.jsonl").read_text().splitlines()]
    dec = next(r for r in recs if r["type"] == "decision")
    other = next(a for a in recs[0]["actions"] if a != dec["action"])
    step = next(r for r in recs if r["type"] == "step")
    dec["action"] = step["action"] = other
    (ep / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    r = json.loads((ep / "eval_result.json").read_text())
    r["actions"][0] = other
    (ep / "eval_result.json").write_text(json.dumps(r))
    bundle = repack(root, tmp_path / "forged.tar.gz", rehash=True, resign_key=priv)
    from vical.submit.verify import verify_bundle

    with pytest.raises(VerifyError, match=r"is not the seed's decision for step 0"):
        verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False)


# -- the registry -------------------------------------------------------------------------
def test_every_backend_and_world_model_has_a_declared_kind():
    from vical.play.human import AGENT_NAME

    # a new backend must be declared for verify
    assert set(_MODULES) | {AGENT_NAME} <= set(AGENT_KINDS)
    assert set(WORLD_MODELS) == set(WORLD_MODEL_KINDS)
    assert "inspect" in AGENT_KINDS and AGENT_KINDS["inspect"].module
    for name in ("plain", "my-agent", "", None, 3):
        with pytest.raises(VerifyError, match=r"^\[agent\] .* is not a kind vical can verify"):
            agent_kind(name)
    from vical.submit.kinds import bundle_kind, world_model_kind

    assert bundle_kind({}) == "run" and bundle_kind({"kind": "wm"}) == "wm"
    with pytest.raises(VerifyError, match=r"^\[manifest\] bundle kind 'model' is not one"):
        bundle_kind({"kind": "model"})
    with pytest.raises(VerifyError, match=r"world model 'oracle' is not one vical can verify"):
        world_model_kind("oracle")


def test_the_references_are_never_ranked_whatever_their_labels(bundles, tmp_path):
    assert not is_ranked_agent("random") and not is_ranked_agent("plan")
    assert not is_ranked_agent("human")
    assert not is_ranked_agent("my-agent") and not is_ranked_agent(None)
    assert is_ranked_agent("openai-chat") and is_ranked_agent("inspect")
    d, _, pub = bundles
    subs = tmp_path / "subs"
    entry = json.loads(
        leaderboard.add(
            d / "random.tar.gz", pubkeys=[pub], submissions=subs, workers=1, progress=False
        ).read_text()
    )
    assert entry["agent"] == "random"
    complete = {**entry, "partial": False}  # as a complete bundle's entry would be
    assert not leaderboard.is_ranked(complete)
    assert leaderboard.is_reference_run(complete)
    assert leaderboard.is_ranked({**complete, "agent": "openai-chat"})
    assert not leaderboard.is_ranked({k: v for k, v in complete.items() if k != "agent"})
    (subs / "complete.json").write_text(json.dumps({**complete, "id": "complete"}))
    md = leaderboard.render_markdown_board(leaderboard.load_entries(subs))
    ranked = md.partition("\n## ")[0]
    refs = md.partition("## Reference agents (not ranked)")[2].partition("\n## ")[0]
    assert "Team A" not in ranked and "random (Team A) |" in refs.replace("\\", "")


def test_an_entry_is_never_replaced_and_its_id_holds_the_full_digest(bundles, tmp_path):
    d, _, pub = bundles
    subs = tmp_path / "subs"
    path = leaderboard.add(
        d / "random.tar.gz", pubkeys=[pub], submissions=subs, workers=1, progress=False
    )
    from vical.run.results import file_sha256

    assert path.stem.endswith("--" + file_sha256(d / "random.tar.gz"))
    before = path.read_bytes()
    with pytest.raises(leaderboard.LeaderboardError, match="never replaced"):
        leaderboard.add(
            d / "random.tar.gz", pubkeys=[pub], submissions=subs, workers=1, progress=False
        )
    assert path.read_bytes() == before and len(list(subs.iterdir())) == 1


# -- the archive ends where its stream ends ----------------------------------------------
@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (lambda gz: gz + b"x", "bytes after the end of the compressed stream"),
        (lambda gz: gz + __import__("gzip").compress(b"\0" * 1024), "bytes after the end of"),
        (
            lambda gz: __import__("gzip").compress(
                __import__("gzip").decompress(gz) + b"hidden" + b"\0" * 506
            ),
            "data after the end of the archive",
        ),
    ],
)
def test_bytes_after_the_archive_are_refused(bundles, tmp_path, tail, reason):
    """A bundle whose file holds more than its archive (a second gzip member, trailing
    bytes, data after the tar's end): no two files of different bytes verify alike."""
    d, _, pub = bundles
    out = tmp_path / "tail.tar.gz"
    out.write_bytes(tail((d / "random.tar.gz").read_bytes()))
    from vical.submit.verify import verify_bundle

    with pytest.raises(VerifyError, match=r"^\[unpack\] " + reason):
        verify_bundle(out, pubkeys=[pub], workers=1, progress=False)


def test_a_mixed_script_look_alike_is_flagged_on_the_board(bundles, tmp_path):
    d, priv, pub = bundles
    root = unpack(d / "random.tar.gz", tmp_path / "u")
    bm = json.loads((root / "manifest.json").read_text())
    bm["submitter"]["team"] = "Anthr\u043epic"  # a Cyrillic o
    (root / "manifest.json").write_text(json.dumps(bm, indent=2, sort_keys=True) + "\n")
    bundle = repack(root, tmp_path / "b.tar.gz", rehash=True, resign_key=priv)
    subs = tmp_path / "subs"
    leaderboard.add(bundle, pubkeys=[pub], submissions=subs, workers=1, progress=False)
    md = leaderboard.render_markdown_board(leaderboard.load_entries(subs))
    assert "Anthr\u043epic" in md and "mixed scripts" in md


def test_a_bundle_of_other_task_data_is_refused(bundles, tmp_path):
    d, priv, pub = bundles
    root = unpack(d / "random.tar.gz", tmp_path / "u")
    bm = json.loads((root / "manifest.json").read_text())
    bm["fingerprint"]["tasks_digest"] = "0" * 64
    (root / "manifest.json").write_text(json.dumps(bm, indent=2, sort_keys=True) + "\n")
    _edit_json(root / "run" / "manifest.json", tasks_digest="0" * 64)
    bundle = repack(root, tmp_path / "b.tar.gz", rehash=True, resign_key=priv)
    from vical.submit.verify import verify_bundle

    with pytest.raises(VerifyError, match=r"^\[dataset\] task data 000000000000 is not this"):
        verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False)


def test_a_persons_play_verifies_and_is_never_ranked(bundles, tmp_path):
    """A `vical play` run (agent `human`: a session, then decisions with the key pressed
    and the time taken) verifies; its actions only the replay can check, and it is
    listed apart, never ranked. Made here from the random run's actions, written as the
    human agent writes its records."""
    d, priv, pub = bundles
    root = unpack(d / "random.tar.gz", tmp_path / "u")
    _edit_json(root / "run" / "manifest.json", agent="human", agent_settings={"participant": "p"})
    for p in (root / "run" / "episodes").glob("*/eval_result.json"):
        _edit_json(p, agent="human")

    def as_human(recs):
        out = []
        for r in recs:
            if r["type"] == "decision":
                if r["step"] == 0:
                    task = recs[0]["task"]
                    out.append(
                        {"type": "agent_session", "backend": "human", "task": task,
                         "settings": {"participant": "p"}}
                    )  # fmt: skip
                r = {**r, "failure": None, "input": "key:ArrowUp", "wall_seconds": 0.4}
            out.append(r)
        return out

    _edit_logs(root, as_human)
    honest = repack(root, tmp_path / "human.tar.gz", rehash=True, resign_key=priv)
    from vical.submit.verify import verify_bundle

    v = verify_bundle(honest, pubkeys=[pub], workers=1, progress=False)
    assert v.ok and v.agent == "human" and not v.rankable
    # a decision naming an action outside the task's is refused before the replay
    _edit_logs(
        root,
        lambda recs: [
            {**r, "action": "Fly"} if r["type"] == "decision" and r["step"] == 0 else r
            for r in recs
        ],
    )
    forged = repack(root, tmp_path / "forged.tar.gz", rehash=True, resign_key=priv)
    with pytest.raises(VerifyError, match="not one of the task's actions: 'Fly'"):
        verify_bundle(forged, pubkeys=[pub], workers=1, progress=False)
