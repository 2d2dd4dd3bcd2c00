"""V-ICAL through Inspect AI, end to end against the baseline server.

Six tasks from six families are played twice with the server's ``expert`` and
``random`` models: by ``inspect_ai.eval()`` through Inspect's own OpenAI-compatible
provider (``openai-api/vical/<model>``), and by ``vical eval --agent openai-chat``.
Each episode's actions, score, pass flag and failure mode must be the same. The
Inspect log then opens with Inspect's reader, imports into a run folder
(``vical import-inspect``), bundles and verifies; a tampered run and a tampered
Inspect log fail.

Nothing stands between Inspect and the server: Inspect's provider writes
``"detail": "auto"`` into every ``image_url`` part, which ``openai-chat`` leaves out,
and the server's seeded policies answer from the conversation's content (texts,
frames, turn), not from the bytes of the body, so both clients get the same answers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log, write_eval_log
from typer.testing import CliRunner

from vical.cli import app
from vical.cli.inspect_import import import_app
from vical.interop.inspect_import import InspectImportError, import_inspect_log
from vical.interop.inspect_tasks import STORE_KEY, table1_cells, vical
from vical.report.table import build_report
from vical.run.results import EvalResult, load_results
from vical.serve import BaselineServer
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.verify import VerifyError, verify_bundle

# one task each from classic control, ALE, Procgen, Toy Text, MiniGrid and Tetris
TASKS = "cartpole/seed41,freeway/m0-lane7,bigfish/seed104,cliffwalking/base,lavacrossing/base,tetris/seed47"
MODELS = ("expert", "random")


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """{model: (Inspect log path, vical eval run folder)} for both models."""
    d = tmp_path_factory.mktemp("inspect")
    mp = pytest.MonkeyPatch()
    mp.setenv("VICAL_API_KEY", "k")
    out = {}
    with BaselineServer() as server:
        try:
            for model in MODELS:
                logs = inspect_eval(
                    vical(tasks=TASKS),
                    model=f"openai-api/vical/{model}",
                    model_base_url=server.openai_base_url,
                    log_dir=str(d / f"logs-{model}"),
                    display="none",
                )
                assert logs[0].status == "success", logs[0].error
                run = d / f"eval-{model}"
                result = CliRunner().invoke(
                    app,
                    [
                        "eval",
                        "--agent",
                        "openai-chat",
                        "--endpoint",
                        server.openai_base_url,
                        "--model",
                        model,
                        "--tasks",
                        TASKS,
                        "--out",
                        str(run),
                        "--skip-doctor",
                    ],
                )
                assert result.exit_code == 0, result.output
                out[model] = (Path(logs[0].location), run)
        finally:
            mp.undo()
    return d, out


def test_inspects_requests_reach_the_server_with_their_detail_field(played):
    """No proxy evens the bodies out: what Inspect logged as sent has the field."""
    _, out = played
    ev = read_eval_log(str(out["random"][0]))
    calls = [e.call for s in ev.samples for e in s.events if e.event == "model" and e.call]
    parts = [
        p
        for c in calls
        for m in c.request.get("messages", [])
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p.get("type") == "image_url"
    ]
    assert parts and all(p["image_url"].get("detail") == "auto" for p in parts)


def _inspect_results(log: Path) -> dict[str, dict]:
    ev = read_eval_log(str(log))
    return {str(s.id): s.store[STORE_KEY]["result"] for s in ev.samples}


@pytest.mark.parametrize("model", MODELS)
def test_inspect_plays_every_episode_as_vical_eval_does(played, model):
    _, out = played
    log, run = out[model]
    mine = _inspect_results(log)
    theirs = {f"{r.env}__{r.variant}__r{r.run_index}": r for r in load_results(run)}
    assert sorted(mine) == sorted(theirs) and len(mine) == 6
    for name, r in theirs.items():
        m = mine[name]
        assert m["actions"] == r.actions, name
        assert m["frame_hashes"] == r.frame_hashes, name
        assert (m["score"], m["passed"], m["failure_mode"]) == (
            r.score,
            r.passed,
            r.failure_mode,
        ), name
    if model == "expert":  # the expert passes where it has a plan or a controller
        assert mine["cartpole__seed41__r0"]["passed"] and mine["cliffwalking__base__r0"]["passed"]


def test_the_log_opens_with_inspects_reader_and_carries_the_metrics(played):
    _, out = played
    log, run = out["expert"]
    ev = read_eval_log(str(log))
    assert ev.status == "success" and ev.eval.task == "vical/vical" and len(ev.samples) == 6
    sample = next(s for s in ev.samples if s.id == "cartpole__seed41__r0")
    assert any(m.role == "assistant" for m in sample.messages)  # the conversation is there
    images = [
        c for m in sample.messages if m.role == "user" for c in m.content if c.type == "image"
    ]
    assert len(images) > 30  # demonstration frames, the start frame and every later frame
    metrics = ev.results.scores[0].metrics
    results = load_results(run)
    report = build_report(results, "x")
    assert metrics["mean_score"].value == pytest.approx(sum(r.score for r in results) / 6)
    assert metrics["pass_rate"].value == pytest.approx(100 * sum(r.passed for r in results) / 6)
    for col, cell in report.columns.items():
        if cell.score is not None:
            assert metrics[f"{col} S"].value == pytest.approx(cell.score, abs=1e-3), col
            assert metrics[f"{col} P%"].value == pytest.approx(cell.pass_rate, abs=1e-3), col
    assert table1_cells([]) == {}


@pytest.fixture(scope="module")
def imported(played):
    d, out = played
    runs = {}
    for model in MODELS:
        run = d / f"imported-{model}"
        result = CliRunner().invoke(
            import_app, ["import-inspect", str(out[model][0]), "--out", str(run)]
        )
        assert result.exit_code == 0, result.output
        # (the summary line wraps at the terminal's width around a long path)
        assert "6 episode(s) imported" in " ".join(result.output.split())
        runs[model] = run
    return runs


def _records(episode: Path) -> list[dict]:
    return [json.loads(x) for x in (episode / "log.jsonl").read_text().splitlines()]


def _kinds(episode: Path) -> list[str]:
    return [r["type"] for r in _records(episode)]


def _first_turn(episode: Path) -> list[dict]:
    return next(r["append"] for r in _records(episode) if r["type"] == "request")


@pytest.mark.parametrize("model", MODELS)
def test_the_imported_run_is_a_vical_eval_run_folder(played, imported, model):
    _, out = played
    run, reference = imported[model], out[model][1]
    for ep in sorted((reference / "episodes").iterdir()):
        mine = run / "episodes" / ep.name
        a = EvalResult.model_validate_json((mine / "eval_result.json").read_text())
        b = EvalResult.model_validate_json((ep / "eval_result.json").read_text())
        same = ("actions", "frame_hashes", "score", "passed", "outcome", "failure_mode", "steps")
        assert {k: getattr(a, k) for k in same} == {k: getattr(b, k) for k in same}
        assert a.agent == "inspect" and set(a.files) == set(b.files)
        assert a.files["trajectory.png"] == b.files["trajectory.png"]
        media = {p.name for p in (ep / "media").iterdir()}
        assert media == {p.name for p in (mine / "media").iterdir()}  # the same frames shown
        assert _kinds(mine) == _kinds(ep)
        assert _first_turn(mine) == _first_turn(ep)  # the same first turn, part for part


def _bundle(run: Path, d: Path, name: str):
    priv, pub = keygen(d / f"key-{name}")
    bundle = d / f"{name}.tar.gz"
    make_bundle(run, priv, bundle, team="T", partial=True)
    return bundle, pub


def test_the_imported_run_bundles_and_verifies_and_a_tampered_one_fails(played, imported, tmp_path):
    bundle, pub = _bundle(imported["expert"], tmp_path, "ok")
    verdict = verify_bundle(bundle, pubkeys=[pub], workers=2, progress=False)
    assert verdict.ok and len(verdict.results) == 6

    tampered = tmp_path / "tampered"
    shutil.copytree(imported["expert"], tampered)
    ep = tampered / "episodes" / "cliffwalking__base__r0"
    r = json.loads((ep / "eval_result.json").read_text())
    legal = ["Up", "Right", "Down", "Left"]
    r["actions"][0] = next(a for a in legal if a != r["actions"][0])
    (ep / "eval_result.json").write_text(json.dumps(r))
    lines = [json.loads(x) for x in (ep / "log.jsonl").read_text().splitlines()]
    next(x for x in lines if x["type"] == "step")["action"] = r["actions"][0]
    (ep / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    bundle, pub = _bundle(tampered, tmp_path, "bad")
    try:
        verdict = verify_bundle(bundle, pubkeys=[pub], workers=2, progress=False)
    except VerifyError:
        return
    assert not verdict.ok
    assert [e.episode for e in verdict.mismatches] == ["cliffwalking__base__r0"]


def test_the_imported_run_verifies_in_a_fresh_process(imported, tmp_path):
    """``vical verify`` in a new process, which has not imported ``vical.interop``: the
    ``inspect`` backend is loaded from the registry of agent kinds (vical.submit.kinds)."""
    from tests.test_submit_kinds import verify_in_subprocess

    bundle, pub = _bundle(imported["expert"], tmp_path, "fresh")
    proc = verify_in_subprocess(bundle, pub)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: 6/6 episodes replay exactly" in proc.stdout


def test_a_tampered_inspect_log_does_not_import(played, tmp_path):
    _, out = played
    ev = read_eval_log(str(out["expert"][0]))
    sample = next(s for s in ev.samples if s.id == "cliffwalking__base__r0")
    data = sample.store[STORE_KEY]
    first = next(d for d in data["decisions"] if d["action"])
    first["action"] = "Up" if first["action"] != "Up" else "Down"
    sample.store[STORE_KEY] = data
    log = tmp_path / "edited.eval"
    write_eval_log(ev, str(log))
    with pytest.raises(InspectImportError, match="cliffwalking__base__r0"):
        import_inspect_log(log, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing half-written is left


def _timing_overwrites_results(sample, data, meta):
    data["timing"].update(score=100.0, passed=True, steps=1, agent="other")


def _usage_lots(sample, data, meta):
    next(d for d in data["decisions"] if d["usage"])["usage"]["input_tokens"] = "lots"


def _append_not_a_message(sample, data, meta):
    rec = next(r for d in data["decisions"] for r in d["records"] if r["type"] == "request")
    rec["append"] = [1]


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (_timing_overwrites_results, "field 'timing.score': Extra inputs are not permitted"),
        (lambda s, d, m: d.update(run_index="zero"), "field 'run_index': Input should be a valid"),
        (lambda s, d, m: m.update(run_seed="abc"), "the eval's metadata: field 'run_seed'"),
        (_usage_lots, "usage.input_tokens': Input should be a valid integer (got lots)"),
        (lambda s, d, m: d.pop("task_id"), "field 'task_id': Field required (got missing)"),
        (lambda s, d, m: d.update(task_id="pong/none"), "is not one of the eval's"),
        (_append_not_a_message, "cannot be imported (AttributeError"),
    ],
)
def test_every_field_taken_from_the_log_is_checked(played, tmp_path, edit, words):
    """A sample's timing cannot overwrite the replay's results, and a value of the wrong
    type or a missing field is one line naming the field (never a traceback)."""
    from typer.testing import CliRunner

    _, out = played
    ev = read_eval_log(str(out["expert"][0]))
    sample = next(s for s in ev.samples if s.id == "cliffwalking__base__r0")
    data = sample.store[STORE_KEY]
    meta = ev.eval.metadata[STORE_KEY]
    edit(sample, data, meta)
    sample.store[STORE_KEY] = data
    log = tmp_path / "edited.eval"
    write_eval_log(ev, str(log))
    with pytest.raises(InspectImportError, match=None) as e:
        import_inspect_log(log, tmp_path / "run")
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert not (tmp_path / "run").exists()
    r = CliRunner().invoke(import_app, ["import-inspect", str(log), "--out", str(tmp_path / "r")])
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code != 0 and len(lines) == 1 and "Traceback" not in r.output, r.output


def test_an_errored_sample_is_an_infrastructure_failure_not_a_result(tmp_path, monkeypatch):
    monkeypatch.setenv("VICAL_API_KEY", "k")
    with BaselineServer() as server:
        logs = inspect_eval(
            vical(tasks="taxi/state1,cliffwalking/base"),
            model="openai-api/vical/fault-400",
            model_base_url=server.openai_base_url,
            log_dir=str(tmp_path / "logs"),
            display="none",
            fail_on_error=False,
        )
    ev = read_eval_log(logs[0].location)
    assert all(s.error is not None for s in ev.samples)
    assert all(STORE_KEY not in (s.store or {}) for s in ev.samples)
    with pytest.raises(InspectImportError, match="no sample holds a finished episode"):
        import_inspect_log(Path(logs[0].location), tmp_path / "run")
