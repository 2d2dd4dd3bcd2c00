"""World-model cases: structure, visibly different branches, byte-identical rebuilds."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
from conftest import build_wm_cases

from vical.wm.cases import (
    BRANCHES,
    CONTEXTS,
    SCENARIOS,
    build,
    load_cases,
    load_frames,
    pixels_sha256,
    scenario,
)
from vical.wm.sim import ContextSim

SMALL = ("taxi", "breakout")  # the environments of the small case folder


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
