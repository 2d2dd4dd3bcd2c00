"""World-model cases: structure, visibly different branches, byte-identical rebuilds."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
from conftest import build_wm_cases

from vical.wm.cases import (
    BRANCHES,
    CONTEXTS,
    all_scenarios,
    build,
    load_cases,
    load_frames,
    pixels_sha256,
    scenario,
)
from vical.wm.sim import ContextSim

SMALL = ("taxi", "breakout")  # the environments of the small case folder
SCENARIOS = all_scenarios()


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """One context of Taxi and one of Breakout (two families, ten cases)."""
    return build_wm_cases(tmp_path_factory.mktemp("wm-small"), SMALL)


def test_eight_scenarios_of_fifty():
    assert len(SCENARIOS) == 8
    assert len({s.name for s in SCENARIOS}) == 8
    assert CONTEXTS * BRANCHES == 50
    with pytest.raises(KeyError, match="scenarios: grid-navigation"):
        scenario("nope")


def test_the_game_modules_make_the_scenario_table():
    """Each game module's WORLD_MODEL_SCENARIO places it; together they give the table the
    published cases were built from, in the same build order."""
    assert [(s.name, s.envs) for s in SCENARIOS] == [
        ("grid-navigation", ("taxi", "cliffwalking")),
        ("classic-control", ("cartpole", "mountaincar", "acrobot")),
        ("atari-shooters", ("assault", "demonattack", "seaquest")),
        ("atari-dodging", ("freeway", "asterix", "roadrunner")),
        ("minigrid", ("lavacrossing", "multiroom", "unlockpickup")),
        ("procgen", ("bigfish", "leaper", "ninja", "bossfight")),
        ("driving", ("highway", "enduro")),
        ("arcade", ("tetris", "flappybird", "breakout")),
    ]


def test_a_game_module_joins_a_scenario_by_declaring_it(monkeypatch):
    import vical.envs.games.pong as pong

    monkeypatch.setattr(pong, "WORLD_MODEL_SCENARIO", ("atari-dodging", 0), raising=False)
    assert scenario("atari-dodging").envs == ("pong", "freeway", "asterix", "roadrunner")
    monkeypatch.setattr(pong, "WORLD_MODEL_SCENARIO", ("nowhere", 1))
    with pytest.raises(KeyError, match="pong: WORLD_MODEL_SCENARIO names scenario 'nowhere'"):
        all_scenarios()


def test_case_structure(small):
    cases = load_cases(small)
    assert len(cases) == 2 * BRANCHES
    for c in cases:
        assert len(c.branches) == BRANCHES and c.id in c.branches
        assert len(c.truth_frames) == len(c.intervention) == len(c.truth_sha256)
        assert len(c.context_actions) == len(c.context_frames) - 1
        assert all(a in c.actions for a in c.intervention)
        spec = c.spec
        assert spec.initial_condition and spec.permitted_intervention and spec.evidence_rule
        facts = {f.fact for f in spec.required_change} | {f.fact for f in spec.protected_state}
        assert facts == set(spec.context_facts)
        for f in spec.required_change:
            assert f.before != f.after
        frames = load_frames(small, c.truth_frames)
        assert [pixels_sha256(f) for f in frames] == c.truth_sha256


def test_branches_differ_visibly(small):
    cases = load_cases(small)
    for group in {c.group for c in cases}:
        finals = [load_frames(small, c.truth_frames[-1:])[0] for c in cases if c.group == group]
        for i in range(len(finals)):
            for j in range(i):
                assert np.any(finals[i] != finals[j], axis=2).sum() >= 16


def test_truth_rederives_from_the_origin(small):
    case = load_cases(small)[3]
    with ContextSim(case.origin) as sim:
        assert pixels_sha256(sim.frames[-1]) == case.context_sha256[-1]
        frames, _ = sim.play(case.intervention)
        again, _ = sim.play(case.intervention)
    assert [pixels_sha256(f) for f in frames] == case.truth_sha256
    assert [pixels_sha256(f) for f in again] == case.truth_sha256


def test_rebuild_is_byte_identical(small, tmp_path):
    build_wm_cases(tmp_path, SMALL)
    assert _tree(tmp_path) == _tree(small)


@pytest.mark.slow
def test_all_400_cases_rebuild_byte_identical(tmp_path):
    first = build(tmp_path / "a")
    assert len(first) == 400
    assert {c.scenario for c in first} == {s.name for s in SCENARIOS}
    for s in SCENARIOS:
        assert sum(c.scenario == s.name for c in first) == 50
    build(tmp_path / "b")
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


# ------------------------------------------------------------------ building in a pool


def _fake_pool(batch):
    """A pool that hands out ``batch`` jobs at a time and reports them in reverse order.

    It never runs the simulator: a candidate at position p has a context unless p % 3 == 1.
    """

    def pool(fn, jobs, workers, on_result, **_):
        it = iter(jobs)
        while True:
            held = []
            while len(held) < batch:
                job = next(it, None)
                if job is None:
                    break
                held.append(job)
            if not held:
                return True
            for job in reversed(held):
                on_result(job, None if job[1] % 3 == 1 else ("found", job[0], job[1]), None)

    return pool


def test_contexts_taken_do_not_depend_on_the_order_results_arrive():
    from vical.wm.cases import find_contexts

    chosen = [SCENARIOS[0], SCENARIOS[1]]
    one = find_contexts(chosen, 4, pool=_fake_pool(1))
    many = find_contexts(chosen, 4, pool=_fake_pool(7))
    want = [[("found", i, p) for p in (0, 2, 3, 5)] for i in range(2)]
    assert one == many == want


def test_too_few_contexts_is_an_error_naming_the_scenario():
    from vical.wm.cases import find_contexts

    def nothing(fn, jobs, workers, on_result, **_):
        for job in jobs:
            on_result(job, None, None)
        return True

    with pytest.raises(RuntimeError, match="scenario grid-navigation: only 0 of 2 contexts"):
        find_contexts([SCENARIOS[0]], 2, pool=nothing)


def test_two_workers_build_the_same_bytes_as_one(tmp_path):
    """Contexts found by two worker processes (some candidates fail, results arrive out of
    order) make the same case folder as one process finding them in turn."""
    from vical.run.pool import run_pool
    from vical.wm.cases import Scenario, build_scenario, write_cases

    sc = Scenario("t-mix", "two environments", ("cliffwalking", "breakout"))
    for name, workers, pool in (("one", 1, None), ("two", 2, run_pool)):
        out = tmp_path / name
        write_cases(out, build_scenario(sc, out, contexts=3, workers=workers, pool=pool))
    assert _tree(tmp_path / "one") == _tree(tmp_path / "two")
    assert len(load_cases(tmp_path / "one")) == 3 * BRANCHES


def test_an_interrupted_build_leaves_the_previous_folder_and_no_temporary(tmp_path):
    from vical.wm.cases import build

    out = tmp_path / "wm"
    out.mkdir()
    (out / "cases.jsonl").write_text("previous\n")
    calls = []

    def interrupt(fn, jobs, workers, on_result, **_):
        job = next(iter(jobs))
        on_result(job, fn(job), None)
        calls.append(job)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build(out, ["grid-navigation"], contexts=1, pool=interrupt)
    assert calls
    assert [p.name for p in tmp_path.iterdir()] == ["wm"]
    assert (out / "cases.jsonl").read_text() == "previous\n"
