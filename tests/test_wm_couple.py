"""`vical wm couple`: an agent that sees a world model's imagined rollouts, logged,
bundled and verified like any run; a tampered coupled log is refused."""

import hashlib
import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from vical.agent.media import encode_jpeg, sha256_hex
from vical.cli import app
from vical.envs import make_env
from vical.envs.core import frame_sha256
from vical.run.results import RunManifest, load_results
from vical.serve.server import BaselineServer
from vical.spec import get_task
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.leaderboard import condition_label, is_ablation
from vical.submit.verify import VerifyError, verify_bundle
from vical.wm.couple import Coupling, candidate_actions
from vical.wm.sim import encode_png

runner = CliRunner()
TASK = "cliffwalking/base"  # 16 moves at most, 4 actions: a short coupled episode
WMS = ("simulator", "copy-last", "http")


def _couple(out, server, *extra):
    return runner.invoke(
        app,
        [
            "wm",
            "couple",
            "--tasks",
            TASK,
            "--wm",
            ",".join(WMS),
            "--wm-endpoint",
            server.url,
            "--out",
            str(out),
            "--horizon",
            "2",
            "--candidates",
            "3",
            "--agent",
            "openai-chat",
            "--endpoint",
            server.url + "/v1",
            "--model",
            "random",
            "--workers",
            "1",
            "--skip-doctor",
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def coupled(tmp_path_factory):
    """Coupled runs of one task with each world model, the agent a model backend talking
    to the baseline server, whose world-model endpoint draws black frames (`blank`)."""
    d = tmp_path_factory.mktemp("couple")
    priv, pub = keygen(d / "keys" / "team")
    with BaselineServer(wm="blank") as server:
        res = _couple(d / "runs", server)
    assert res.exit_code == 0, res.output
    return d, priv, pub, res.output


def _records(run, kind):
    log = next((run / "episodes").iterdir()) / "log.jsonl"
    return [r for r in map(json.loads, log.read_text().splitlines()) if r["type"] == kind]


def _bundle(run, priv, out):
    make_bundle(run, priv, out, team="Team C", partial=True)
    return out


@pytest.mark.parametrize("wm", WMS)
def test_a_coupled_run_is_a_normal_run_that_bundles_and_verifies(coupled, wm):
    d, priv, pub, _ = coupled
    run = d / "runs" / wm
    manifest = RunManifest.model_validate_json((run / "manifest.json").read_text())
    assert manifest.world_model["name"] == wm
    assert manifest.world_model["horizon"] == 2 and manifest.world_model["candidates"] == 3
    (result,) = load_results(run)
    verdict = verify_bundle(_bundle(run, priv, d / f"{wm}.tar.gz"), pubkeys=[pub], progress=False)
    assert verdict.ok, [e.problems for e in verdict.episodes]
    # the condition names the world model, so the run is never ranked as a plain one
    assert verdict.condition["world_model"]["name"] == wm
    assert "endpoint" not in verdict.condition["world_model"]
    entry = {"condition": verdict.condition}
    assert is_ablation(entry) and condition_label(verdict.condition).endswith(f"model {wm}")
    # one imagined record per decision, each candidate's frames stored as PNG
    imagined = _records(run, "imagined")
    assert [r["step"] for r in imagined] == list(range(result.steps))
    for rec in imagined:
        want = candidate_actions(get_task(TASK).action_names, 3, result.seed, rec["step"])
        assert [c["action"] for c in rec["candidates"]] == want


def _imagined_frames(run):
    """Every imagined frame of the run's episode by (step, candidate), read from media/."""
    from vical.wm.sim import decode_png

    folder = next((run / "episodes").iterdir())
    out = {}
    for rec in _records(run, "imagined"):
        for c in rec["candidates"]:
            out[rec["step"], c["action"]] = [
                decode_png((folder / "media" / f"{f['png']}.png").read_bytes()) for f in c["frames"]
            ]
    return out


def test_each_world_model_imagines_what_it_should(coupled):
    d, *_ = coupled
    task = get_task(TASK)
    (result,) = load_results(d / "runs" / "simulator")
    frames = _imagined_frames(d / "runs" / "simulator")
    # the simulator: the candidate played twice from the real state
    with make_env(task) as env:
        env.reset()
        for step, action in enumerate(result.actions):
            for (s, cand), imagined in frames.items():
                if s != step:
                    continue
                snap = env.snapshot()
                want = []
                for _ in range(2):
                    if not env.done:
                        env.step(cand)
                    want.append(env.frame.copy())
                env.restore(snap)
                assert [frame_sha256(f) for f in imagined] == [frame_sha256(f) for f in want]
            env.step(action)
    # copy-last: the current real frame; the blank http model: black frames
    (result,) = load_results(d / "runs" / "copy-last")
    for (step, _), imagined in _imagined_frames(d / "runs" / "copy-last").items():
        assert all(frame_sha256(f) == result.frame_hashes[step] for f in imagined)
    for imagined in _imagined_frames(d / "runs" / "http").values():
        assert all(not f.any() for f in imagined)


def test_the_agent_was_shown_the_imagined_frames(coupled):
    d, *_ = coupled
    run = d / "runs" / "simulator"
    frames = _imagined_frames(run)
    shown = set()
    for rec in _records(run, "request"):
        for msg in rec["append"]:
            shown |= {p["sha256"] for p in msg["content"] if p.get("type") == "image"}
    for imagined in frames.values():
        for f in imagined:
            assert sha256_hex(encode_jpeg(f)) in shown


def test_the_run_prints_the_table_of_the_three_world_models(coupled):
    *_, output = coupled
    assert (
        "| world model | episodes | task score | pass rate (%) | score vs simulator [95% CI] |"
        in output
    )
    for wm in WMS:
        assert f"| {wm}" in output
    res = runner.invoke(app, ["wm", "couple-table", *(str(coupled[0] / "runs" / w) for w in WMS)])
    assert res.exit_code == 0, res.output
    assert "| simulator | 1 |" in res.output


# -- tampering -------------------------------------------------------------------------
def _copy(coupled, wm, tmp_path):
    d, priv, pub, _ = coupled
    run = tmp_path / wm
    shutil.copytree(d / "runs" / wm, run)
    folder = next((run / "episodes").iterdir())
    return run, folder, priv, pub


def _rewrite_log(folder, edit):
    lines = [json.loads(x) for x in (folder / "log.jsonl").read_text().splitlines()]
    lines = edit(lines)
    (folder / "log.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))


def _swap_frame(folder, rec, frame):
    """Log ``frame`` (stored as PNG) as the first imagined frame of the record's first candidate."""
    png = encode_png(frame)
    sha = hashlib.sha256(png).hexdigest()
    (folder / "media" / f"{sha}.png").write_bytes(png)
    rec["candidates"][0]["frames"][0] = {"png": sha, "sha256": frame_sha256(frame)}


def _refused(run, priv, pub, tmp_path, *words):
    with pytest.raises(VerifyError) as e:
        verify_bundle(_bundle(run, priv, tmp_path / "t.tar.gz"), pubkeys=[pub], progress=False)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_another_imagined_frame_than_the_one_shown_is_refused(coupled, tmp_path):
    """The http model's logged reply is replaced by another frame: the requests the agent
    sent, rebuilt from the logged replies, no longer match."""
    run, folder, priv, pub = _copy(coupled, "http", tmp_path)

    def edit(lines):
        rec = next(r for r in lines if r["type"] == "imagined")
        _swap_frame(folder, rec, np.full((64, 64, 3), 200, np.uint8))
        return lines

    _rewrite_log(folder, edit)
    _refused(run, priv, pub, tmp_path, "the request's messages are not the protocol's rebuilt ones")


def test_a_random_agents_simulator_run_checks_the_imagination_by_replay(tmp_path):
    """With the random agent no request shows the frames, so only the re-derivation by
    the simulator can catch a forged imagined frame: it does, and the untouched run passes."""
    from vical.run import RunOptions, run_eval
    from vical.spec import select_tasks

    priv, pub = keygen(tmp_path / "keys" / "team")
    run = tmp_path / "run"
    coupling = Coupling("simulator", horizon=1, candidates=2)
    run_eval(
        select_tasks(TASK), run, options=RunOptions(workers=1, progress=False, world_model=coupling)
    )
    assert verify_bundle(_bundle(run, priv, tmp_path / "ok.tar.gz"), [pub], progress=False).ok
    folder = next((run / "episodes").iterdir())

    def edit(lines):
        rec = next(r for r in lines if r["type"] == "imagined")
        _swap_frame(folder, rec, np.zeros((32, 32, 3), np.uint8))
        return lines

    _rewrite_log(folder, edit)
    _refused(run, priv, pub, tmp_path, "the simulator's rollout of")


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda rec: rec["candidates"].reverse(), "candidates"),
        (lambda rec: rec.update(world_model="copy-last"), "imagined by"),
        (lambda rec: rec["candidates"][0]["intervention"].pop(), "intervention"),
        (lambda rec: rec.update(type="imagined-not"), "missing imagined record"),
    ],
)
def test_an_imagined_record_out_of_the_condition_is_refused(coupled, tmp_path, edit, words):
    run, folder, priv, pub = _copy(coupled, "simulator", tmp_path)

    def apply(lines):
        edit(next(r for r in lines if r["type"] == "imagined"))
        return lines

    _rewrite_log(folder, apply)
    _refused(run, priv, pub, tmp_path, words)


def test_a_copy_last_frame_that_is_not_the_current_frame_is_refused(coupled, tmp_path):
    run, folder, priv, pub = _copy(coupled, "copy-last", tmp_path)

    def edit(lines):
        _swap_frame(
            folder, next(r for r in lines if r["type"] == "imagined"), np.ones((8, 8, 3), np.uint8)
        )
        return lines

    _rewrite_log(folder, edit)
    _refused(run, priv, pub, tmp_path, "copy-last frame that is not the current frame")


def test_a_relabelled_world_model_is_refused(coupled, tmp_path):
    """A copy-last run relabelled as a simulator run: its records name copy-last."""
    run, _, priv, pub = _copy(coupled, "copy-last", tmp_path)
    m = json.loads((run / "manifest.json").read_text())
    m["world_model"]["name"] = "simulator"
    (run / "manifest.json").write_text(json.dumps(m))
    _refused(run, priv, pub, tmp_path, "imagined by 'copy-last'")


# -- the condition and the command line ------------------------------------------------
def test_candidates_are_a_seeded_subset_in_vocabulary_order():
    names = ["A", "B", "C", "D", "E"]
    assert candidate_actions(names, None, 1, 0) == names
    assert candidate_actions(names, 9, 1, 0) == names
    picks = [candidate_actions(names, 2, 7, step) for step in range(20)]
    assert all(len(p) == 2 and p == sorted(p, key=names.index) for p in picks)
    assert picks == [candidate_actions(names, 2, 7, step) for step in range(20)]
    assert len({tuple(p) for p in picks}) > 1  # the draw changes with the step


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"world_model": "oracle"}, "'oracle' is not one of"),
        ({"world_model": "copy-last", "horizon": 0}, "horizon 0"),
        ({"world_model": "copy-last", "candidates": 0}, "candidates 0"),
        ({"world_model": "http"}, "http:// or https:// endpoint"),
    ],
)
def test_a_bad_condition_names_the_value(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Coupling(**kwargs)


def test_the_manifest_entry_round_trips_and_redacts_the_endpoint():
    c = Coupling("http", 2, 3, "http://user:secret@host:9/")
    from vical.agent.redact import redact_url

    entry = c.manifest(redact_url)
    assert "secret" not in json.dumps(entry)
    back = Coupling.from_manifest(entry)
    assert (back.world_model, back.horizon, back.candidates) == ("http", 2, 3)
    with pytest.raises(ValueError):
        Coupling.from_manifest({**entry, "extra": 1})


@pytest.mark.parametrize(
    "args, words",
    [
        (["--wm", "oracle"], "--wm 'oracle': choose from simulator, copy-last, http"),
        (["--wm", "http"], "needs an http:// or https:// endpoint"),
        (["--wm", "copy-last", "--wm-endpoint", "http://x"], "only used with --wm http"),
        (["--wm", "copy-last,copy-last"], "names a world model twice"),
        (["--wm", "copy-last", "--horizon", "0"], "horizon 0 is not between 1"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, args, words):
    res = runner.invoke(app, ["wm", "couple", "-t", TASK, "-o", str(tmp_path / "o"), *args])
    assert res.exit_code == 2
    assert words in " ".join(res.output.split())
    assert not (tmp_path / "o").exists()


def test_a_coupled_run_resumes_only_under_its_own_world_model(tmp_path):
    from vical.errors import RunFolderError
    from vical.run import RunOptions, run_eval
    from vical.spec import select_tasks

    tasks = select_tasks(TASK)
    run_eval(
        tasks,
        tmp_path / "r",
        options=RunOptions(workers=1, progress=False, world_model=Coupling("copy-last")),
    )
    with pytest.raises(RunFolderError, match="world model"):
        run_eval(
            tasks,
            tmp_path / "r",
            options=RunOptions(workers=1, progress=False, world_model=Coupling("simulator")),
        )
    with pytest.raises(RunFolderError, match="world model"):
        run_eval(tasks, tmp_path / "r", options=RunOptions(workers=1, progress=False))


def test_a_world_model_that_is_down_stops_the_run_before_any_episode(tmp_path):
    res = runner.invoke(
        app,
        [
            *("wm", "couple", "-t", TASK, "-o", str(tmp_path / "o")),
            *("--wm", "http", "--wm-endpoint", "http://127.0.0.1:9"),
        ],
    )
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "--wm-endpoint http://127.0.0.1:9: the world model did not answer" in text
    assert not (tmp_path / "o").exists()


def test_the_imagined_frames_leave_the_start_frame_last_in_the_first_message():
    """The baseline server (and any reader of the protocol) finds the start frame as the
    first message's last image; imagination goes before it, and after it in later turns."""
    from vical.agent.messages import first_message, imagination_parts, next_message

    task = get_task(TASK)
    frame = {"type": "image", "sha256": "1" * 64, "mime": "image/jpeg"}
    seen = {"type": "image", "sha256": "2" * 64, "mime": "image/jpeg"}
    imagined = imagination_parts([("Up", [seen, seen]), ("Down", [seen, seen])])
    first = first_message(task, task.action_names, 16, "basic", [], "frames", frame, imagined)
    images = [p for p in first["content"] if p.get("type") == "image"]
    assert images == [seen] * 4 + [frame]
    later = next_message("Up", frame, imagined)["content"]
    assert later[1] == frame and later[2:-1] == imagined
    texts = " ".join(p["text"] for p in imagined if "text" in p)
    assert "2 candidate moves" in texts and "played 2 times in a row" in texts
    assert "Imagined if you play Down (2 screens, in order):" in texts
    assert imagination_parts([]) == []
