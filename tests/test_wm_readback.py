"""Exact read-back: a true frame reads back to the simulator's own facts, on every exact family."""

import pytest

from vical.wm.cases import Scenario, build, build_scenario, load_frames
from vical.wm.readback import read_back
from vical.wm.state import EXACT_FAMILIES

# every exactly rendered family (Toy Text's two games, MiniGrid with its carried-object
# strip, Tetris, Breakout); the other two MiniGrid games run under slow
ENVS = ("taxi", "cliffwalking", "unlockpickup", "tetris", "breakout")
SLOW_ENVS = ("lavacrossing", "multiroom")


def _facts_after(case):
    return {**case.spec.context_facts, **{f.fact: f.after for f in case.spec.required_change}}


@pytest.mark.parametrize(
    "env", [*ENVS, *(pytest.param(e, marks=pytest.mark.slow) for e in SLOW_ENVS)]
)
def test_true_frames_read_back_exactly(env, tmp_path):
    cases = build_scenario(Scenario(f"t-{env}", env, (env,)), tmp_path, contexts=1)
    assert cases and all(c.family in EXACT_FAMILIES and c.spec.exact for c in cases)
    for case in cases:
        ctx = load_frames(tmp_path, case.context_frames[-1:])[0]
        assert read_back(case.task, ctx, case.spec.context_facts) == case.spec.context_facts
        final = load_frames(tmp_path, case.truth_frames[-1:])[0]
        assert read_back(case.task, final, case.spec.context_facts) == _facts_after(case)


def test_a_wrong_sized_frame_does_not_read(tmp_path):
    case = build_scenario(Scenario("t", "", ("taxi",)), tmp_path, contexts=1)[0]
    frame = load_frames(tmp_path, case.truth_frames[-1:])[0]
    assert read_back(case.task, frame[:-4], case.spec.context_facts) is None


def test_a_changed_frame_reads_as_a_different_state(tmp_path):
    cases = build_scenario(Scenario("t", "", ("breakout",)), tmp_path, contexts=1)
    a, b = cases[0], cases[1]
    fa = load_frames(tmp_path, a.truth_frames[-1:])[0]
    # the other branch's frame reads back to that branch's facts, not this one's
    assert read_back(a.task, fa, b.spec.context_facts) == _facts_after(a) != _facts_after(b)


@pytest.mark.slow
def test_every_exact_case_reads_back(tmp_path):
    """All 150 cases of the three scenarios made of exactly rendered families."""
    cases = build(tmp_path, ["grid-navigation", "minigrid", "arcade"])
    exact = [c for c in cases if c.spec.exact]
    assert len(exact) >= 100
    for case in exact:
        frames = load_frames(tmp_path, [case.context_frames[-1], *case.truth_frames])
        assert read_back(case.task, frames[0], case.spec.context_facts) == case.spec.context_facts
        last = read_back(case.task, frames[-1], case.spec.context_facts)
        assert last == _facts_after(case), case.id
