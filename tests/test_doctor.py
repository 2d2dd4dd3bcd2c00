"""``vical doctor``: replays recorded episodes and names the first step that differs.

The checks run against records made here from the current code (a few cheap
environments, written by ``vical doctor --record``), so they hold while the packaged
record waits to be re-recorded; one test holds the packaged record to the task data
and this machine. A tampered copy of a record (one frame hash, one score, one float
state) must be reported with its environment, episode, step and quantity. The state
hook is exercised on a 38th environment from outside the package whose adapter has
``doctor_state()``. Then the integration: ``vical eval`` with an API backend (the
local baseline server) runs the quick check before its first request, a divergence
stops it, ``--skip-doctor`` skips it, the manifest and the bundle record it, and a
verification that finds a mismatch prints both machines.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vical.cli import app
from vical.run.doctor import (
    FLOAT_FAMILIES,
    QUICK_STEPS,
    RECORD,
    RECORD_VAR,
    load_record,
    probes,
    run_doctor,
)
from vical.run.doctor_record import write_record
from vical.spec import EXTRA_TASKS_DIRS, TASKS_DIR, load_envs, tasks_digest

runner = CliRunner()
ENVS = ["cartpole", "mountaincar", "taxi"]  # two float-physics environments, one discrete


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """A record of ENVS made now by the command maintainers run."""
    path = tmp_path_factory.mktemp("doctor") / "doctor.json"
    r = runner.invoke(
        app, ["doctor", "--record", "--record-file", str(path), "--env", ",".join(ENVS)]
    )
    assert r.exit_code == 0, r.output
    assert f"wrote the doctor record {path}" in r.output
    return path


def _tampered(fresh: Path, tmp_path: Path, env: str, kind: str, step: int, key: str, value) -> Path:
    data = json.loads(fresh.read_text())
    (episode,) = [e for e in data["envs"][env] if e["kind"] == kind]
    episode["steps"][step][key] = value
    out = tmp_path / "tampered.json"
    out.write_text(json.dumps(data))
    return out


def _doctor(*args: str, env: dict | None = None):
    return runner.invoke(app, ["doctor", *args], env=env)


# ---------------------------------------------------------------------------
# the record
# ---------------------------------------------------------------------------
def test_the_packaged_record_covers_every_environment_of_this_task_data():
    """Fails when the record is stale: re-record with `vical doctor --record`."""
    record = load_record(RECORD)
    assert record["tasks_digest"] == tasks_digest(TASKS_DIR), "stale: run `vical doctor --record`"
    assert record["complete"] and set(record["envs"]) == set(load_envs(TASKS_DIR))
    for env, episodes in record["envs"].items():
        assert [e["kind"] for e in episodes] == [p.kind for p in probes()[env]], env
        for e in episodes:
            assert len(e["steps"]) == len(e["actions"]) + 1, (env, e["kind"])


@pytest.mark.parametrize("folder", EXTRA_TASKS_DIRS, ids=lambda p: p.name)
def test_an_added_folder_passes_against_the_record_beside_its_task_files(folder):
    """An environment added from a folder (``$VICAL_TASKS_DIR``) is checked against
    the record ``vical tasks record`` wrote beside its task files."""
    r = _doctor("--tasks-dir", str(folder), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["status"] == "ok" and out["envs"] == sorted(load_envs(folder))


def test_recording_is_deterministic_and_one_step_a_line(fresh, tmp_path):
    again = write_record(tmp_path / "again.json", ENVS)
    assert again.read_bytes() == fresh.read_bytes()
    data = json.loads(fresh.read_text())
    (clip,) = [e for e in data["envs"]["cartpole"] if e["kind"] == "clip"]
    lines = fresh.read_text().splitlines()
    assert len(lines) > sum(len(e["steps"]) for v in data["envs"].values() for e in v)
    assert data["complete"] is False and data["tasks_digest"] == tasks_digest(TASKS_DIR)
    assert re.fullmatch(r"[0-9a-f]{16}", clip["steps"][0]["frame"])


def test_the_packaged_record_passes_quickly_on_this_machine():
    r = _doctor("--quick", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["status"] == "ok" and out["mode"] == "quick" and not out["divergences"]
    float_envs = sorted(e for e, s in load_envs(TASKS_DIR).items() if s.family in FLOAT_FAMILIES)
    assert out["envs"] == float_envs
    assert out["machine"]["numpy_features"] and "glibc" in out["machine"]["versions"]
    assert set(out["machine"]["env"]) >= {"NPY_DISABLE_CPU_FEATURES", "GLIBC_TUNABLES"}


def test_ok_against_a_fresh_record_and_the_text_fits_80_columns(fresh):
    r = _doctor("--record-file", str(fresh))
    assert r.exit_code == 0, r.output
    assert "OK: every frame, score and float state matches the record" in r.output
    assert "numpy cpu" in r.output and "NPY_DISABLE_CPU_FEATURES" in r.output
    assert all(len(line) <= 80 for line in r.output.splitlines()), r.output


# ---------------------------------------------------------------------------
# divergences: the right environment, episode, step and quantity
# ---------------------------------------------------------------------------
def test_a_tampered_frame_hash_is_the_first_divergence(fresh, tmp_path):
    bad = _tampered(fresh, tmp_path, "cartpole", "clip", 5, "frame", "0123456789abcdef")
    r = _doctor("--record-file", str(bad), "--json")
    assert r.exit_code == 1, r.output
    out = json.loads(r.output)
    assert out["status"] == "diverged"
    (d,) = out["divergences"]
    assert (d["env"], d["step"], d["quantity"], d["recorded"]) == (
        "cartpole",
        5,
        "frame",
        "0123456789abcdef",
    )
    assert d["episode"].startswith("cartpole/") and " clip " in d["episode"]
    text = _doctor("--record-file", str(bad))
    assert text.exit_code == 1
    assert "DIVERGED: cartpole/" in text.output and "step 5:" in text.output
    assert "frame " in text.output and "!= recorded 0123456789abcdef" in text.output
    assert "the record was made on:" in text.output
    assert all(len(line) <= 80 for line in text.output.splitlines()), text.output


def test_a_tampered_score_of_a_random_episode_is_named(fresh, tmp_path):
    bad = _tampered(fresh, tmp_path, "taxi", "random", 3, "score", "12.5")
    r = _doctor("--json", env={RECORD_VAR: str(bad)})  # the record named by the variable
    assert r.exit_code == 1, r.output
    (d,) = json.loads(r.output)["divergences"]
    assert (d["env"], d["step"], d["quantity"], d["recorded"]) == ("taxi", 3, "score", "12.5")
    assert " random seed " in d["episode"]


def test_quick_is_a_prefix_of_the_full_check(fresh):
    full = run_doctor(fresh, workers=1)
    quick = run_doctor(fresh, quick=True, workers=1)
    assert full.ok and quick.ok
    assert quick.envs == ["cartpole", "mountaincar"]  # the float-physics ones of the record
    by_label = {e.episode: e for e in full.episodes}
    for e in quick.episodes:
        assert e.steps == min(QUICK_STEPS + 1, by_label[e.episode].steps)
    assert sum(e.steps for e in quick.episodes) < sum(e.steps for e in full.episodes)


def _longest(fresh: Path) -> tuple[str, str, int]:
    """(env, kind, last step) of the record's longest float-physics episode."""
    data = json.loads(fresh.read_text())
    env, kind, n = max(
        ((e, ep["kind"], len(ep["steps"])) for e in ("cartpole", "mountaincar")
         for ep in data["envs"][e]),
        key=lambda x: x[2],
    )  # fmt: skip
    assert n > QUICK_STEPS + 2  # mountaincar's random episode runs 70 steps
    return env, kind, n - 1


def test_a_divergence_past_the_quick_steps_is_left_to_the_full_check(fresh, tmp_path):
    env, kind, late = _longest(fresh)
    bad = _tampered(fresh, tmp_path, env, kind, late, "frame", "f" * 16)
    assert run_doctor(bad, quick=True, workers=1).ok
    full = run_doctor(bad, workers=1)
    assert full.first is not None and (full.first.env, full.first.step) == (env, late)


def test_a_stale_record_and_an_unknown_environment_end_with_status_2(fresh, tmp_path):
    data = json.loads(fresh.read_text())
    data["tasks_digest"] = "0" * 64
    data["task_files"]["taxi"] = "0" * 16
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(data))
    r = _doctor("--record-file", str(stale))
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "stale record" in text and "taxi.yaml" in text and "vical doctor --record" in text
    r = _doctor("--record-file", str(fresh), "--env", "nope")
    assert r.exit_code == 2 and "error: unknown environment(s) nope" in r.output


# ---------------------------------------------------------------------------
# the float-state hook, on an environment added from outside the package
# ---------------------------------------------------------------------------
GAME_MODULE = """
from vical.envs.gymbase import GymAdapter


class Adapter(GymAdapter):
    def start(self):
        self.reached = False

    def on_tick(self, tick):
        self.reached = self.reached or tick.reward > 0

    def score(self):
        return 100.0 if self.reached else 0.0

    def passed(self):
        return self.reached

    def doctor_state(self):
        s = int(self.env.s)
        return {"cell": s / 3.0, "rowcol": [s // 4 + 0.1, (s % 4) / 7.0], "walker": {"x": s % 4}}
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    from tests.test_toy_environment import toy_folder

    yield from toy_folder(tmp_path, monkeypatch, "doctorgames", GAME_MODULE)


def test_the_state_hook_is_recorded_as_float_hex_and_checked(toy, tmp_path):
    path = write_record(tmp_path / "toy.json", workers=1, tasks_dir=toy)
    data = json.loads(path.read_text())
    clip, rnd = data["envs"]["toyline"]
    assert clip["clip"] == "toyline-route" and rnd["kind"] == "random"
    zero = (0.0).hex()
    assert clip["steps"][0]["state"] == {
        "cell": zero,
        "rowcol": [(0.1).hex(), zero],
        "walker.x": zero,  # a nested name, dotted
    }
    report = run_doctor(path, workers=1, tasks_dir=toy)
    assert report.ok and sum(e.floats for e in report.episodes) > 0

    def first_divergence(edit):
        copy = json.loads(path.read_text())
        edit(copy["envs"]["toyline"][0]["steps"])
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(copy))
        return run_doctor(bad, workers=1, tasks_dir=toy).first

    # one float of one step changed: that step, that element, both values in hex
    d = first_divergence(lambda steps: steps[2]["state"]["rowcol"].__setitem__(1, (0.5).hex()))
    assert d is not None and (d.env, d.step, d.quantity) == ("toyline", 2, "rowcol[1]")
    assert d.recorded == "0x1.0000000000000p-1" and d.value.startswith("0x")
    assert d.line().startswith("toyline/base clip toyline-route: step 2: rowcol[1] 0x")

    def state_and_frame(steps):
        steps[2]["state"]["walker.x"] = (3.0).hex()
        steps[2]["frame"] = "0" * 16

    # a state that differs wins over the frame of the same step
    assert first_divergence(state_and_frame).quantity == "walker.x"
    # a name the record lacks is named as such
    d = first_divergence(lambda steps: steps[3]["state"].pop("cell"))
    assert (d.step, d.quantity, d.recorded) == (3, "cell", "(not recorded)")


# ---------------------------------------------------------------------------
# eval, the run manifest, the bundle, verify
# ---------------------------------------------------------------------------
def _eval(srv, out: Path, *extra: str, record: Path):
    args = [
        "eval", "--backend", "openai-chat", "--endpoint", srv.openai_base_url, "--model",
        "first", "--tasks", "taxi/state1", "--out", str(out), "-j", "1", "--no-report", *extra,
    ]  # fmt: skip
    return runner.invoke(app, args, env={RECORD_VAR: str(record), "OPENAI_API_KEY": "k"})


@pytest.fixture(scope="module")
def served():
    from vical.serve import BaselineServer

    with BaselineServer() as srv:
        yield srv


def test_eval_checks_first_and_records_the_result_and_the_machine(served, fresh, tmp_path):
    out = tmp_path / "run"
    r = _eval(served, out, record=fresh)
    assert r.exit_code == 0, r.output
    assert "self-check: ok (quick" in r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["doctor"]["status"] == "ok" and m["doctor"]["mode"] == "quick"
    assert m["machine"]["numpy_features"] and "cpu_model" in m["machine"]


def test_a_divergence_stops_eval_before_any_request_unless_skipped(served, fresh, tmp_path):
    bad = _tampered(fresh, tmp_path, "cartpole", "random", 2, "frame", "0" * 16)
    before = len(served.requests)
    out = tmp_path / "run"
    r = _eval(served, out, record=bad)
    assert r.exit_code == 2, r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert "self-check (vical doctor --quick) failed" in line
    assert "cartpole/" in line and "step 2: frame" in line and "--skip-doctor" in line
    assert len(served.requests) == before and not (out / "episodes").exists()
    r = _eval(served, out, "--skip-doctor", record=bad)
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["doctor"] == {
        "status": "skipped",
        "summary": "--skip-doctor",
        "vical_version": m["versions"]["vical"],
    }


def test_old_manifests_without_the_fields_still_load(tmp_path):
    from vical.run.results import RunManifest

    m = RunManifest(
        run_id="r", agent="random", agent_settings={}, run_seed=0, runs_per_task=1,
        tasks=[], tasks_digest="x", versions={}, created_at="now",
    )  # fmt: skip
    old = json.loads(m.model_dump_json())
    del old["doctor"], old["machine"]
    back = RunManifest.model_validate(old)
    assert back.doctor is None and back.machine is None


@pytest.fixture(scope="module")
def bundled(served, fresh, tmp_path_factory):
    """A tiny API run (the local baseline server) whose manifest names a forged CPU, bundled."""
    from vical.submit.bundle import make_bundle
    from vical.submit.keys import keygen

    d = tmp_path_factory.mktemp("bundled")
    r = _eval(served, d / "run", record=fresh)
    assert r.exit_code == 0, r.output
    path = d / "run" / "manifest.json"
    m = json.loads(path.read_text())
    m["machine"]["cpu_model"] = "Forged CPU 9000"
    path.write_text(json.dumps(m))
    priv, pub = keygen(d / "team")
    good = d / "good.tar.gz"
    manifest = make_bundle(d / "run", priv, good, team="T", partial=True)
    # the same run with one claimed frame hash edited: its replay disagrees
    shutil.copytree(d / "run", d / "edited")
    (ep,) = (d / "edited" / "episodes").iterdir()
    res = json.loads((ep / "eval_result.json").read_text())
    res["frame_hashes"][1] = "0" * 64
    (ep / "eval_result.json").write_text(json.dumps(res))
    bad = d / "bad.tar.gz"
    make_bundle(d / "edited", priv, bad, team="T", partial=True)
    return manifest, good, bad, pub


def test_the_bundle_fingerprint_records_the_machine_and_its_self_check(bundled):
    manifest, *_ = bundled
    machine = manifest["fingerprint"]["machine"]
    assert machine["cpu_model"] == "Forged CPU 9000" and machine["source"] == "run manifest"
    assert machine["doctor"]["status"] == "ok" and machine["numpy_features"]


def test_verify_prints_both_machines_when_a_replay_disagrees(bundled, tmp_path):
    _, good, bad, pub = bundled
    r = runner.invoke(app, ["verify", str(good), "--pubkey", str(pub)])
    assert r.exit_code == 0, r.output
    assert "submitter's machine" not in r.output
    r = runner.invoke(app, ["verify", str(bad), "--pubkey", str(pub)])
    assert r.exit_code == 1, r.output
    assert "MISMATCH" in r.output and "frame hashes differ from frame 1" in r.output
    sub = r.output.index("the submitter's machine (from the bundle):")
    here = r.output.index("this machine:")
    assert sub < r.output.index("Forged CPU 9000") < here
    assert "numpy cpu" in r.output[here:] and "doctor" in r.output[here:]
    from vical.submit import leaderboard

    with pytest.raises(leaderboard.LeaderboardError) as e:
        leaderboard.add(bad, pubkeys=[pub], submissions=tmp_path / "subs", progress=False)
    assert "submitter: Forged CPU 9000" in str(e.value) and "this machine: " in str(e.value)


def test_a_bundle_from_before_machines_were_recorded_says_so():
    from vical.submit.verify import machines_lines

    lines = machines_lines({"submitter": None, "verifier": {"cpu_model": "X", "machine": "x86_64"}})
    assert lines[:2] == ["the submitter's machine (from the bundle):", "  (not recorded)"]
    assert lines[2] == "this machine:" and "X (x86_64)" in lines[3]
