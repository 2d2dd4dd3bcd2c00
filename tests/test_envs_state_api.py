"""The adapter's public state API (:mod:`vical.envs.states`) on every environment of the
world-model track: a state read, played past and set again draws the same frame."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from vical.envs import make_env
from vical.envs.games.cliffwalking import CliffState
from vical.envs.games.taxi import TaxiState
from vical.envs.states import NativeState, StateKindError
from vical.spec import load_envs
from vical.wm.cases import all_scenarios

WM_ENVS = sorted({e for s in all_scenarios() for e in s.envs})


def _task(env_key: str) -> str:
    return f"{env_key}/{load_envs()[env_key].tasks[0].variant}"


def _moves(env) -> list[str]:
    """Two decisions that are not the NOOP, so that the state moves on."""
    names = [a for a in env.action_names if a != env.noop] or env.action_names
    return [names[0], names[-1]]


def test_the_world_model_track_covers_its_environments():
    from vical.paper import ENVS

    paper = [e for e in WM_ENVS if e in ENVS]  # an added game may join a scenario too
    assert len(paper) == 23 and {"taxi", "highway", "ninja", "tetris"} <= set(paper)


@pytest.mark.parametrize("env_key", WM_ENVS)
def test_a_state_set_again_draws_the_same_frame(env_key):
    with make_env(_task(env_key)) as env:
        env.reset()
        env.step(_moves(env)[1])
        adapter = env.adapter
        state = adapter.read_state()
        frame = adapter.frame().tobytes()
        facts = adapter.state_facts()
        json.dumps(facts)  # JSON-able
        moved = False  # play on until the frame shows another state
        for i in range(30):
            step = env.step(_moves(env)[i % 2])
            moved = step.frame.tobytes() != frame
            if moved or step.done:
                break
        assert moved
        adapter.set_state(state)
        assert adapter.frame().tobytes() == frame
        assert adapter.state_facts() == facts
        if not isinstance(state, NativeState):  # a game's state is a comparable value
            assert adapter.read_state() == state
        # the state is a value: playing on does not change it
        env.step(_moves(env)[0])
        adapter.set_state(state)
        assert adapter.frame().tobytes() == frame


@pytest.mark.parametrize("env_key", ["taxi", "cliffwalking"])
def test_a_game_state_built_by_hand_draws_as_the_simulator_does(env_key):
    """Toy Text states are values a caller builds: a second simulator set to the first
    one's state draws the first one's frame."""
    task = _task(env_key)
    with make_env(task) as a:
        a.reset()
        for name in _moves(a):
            a.step(name)
        built = dataclasses.replace(a.adapter.read_state())  # a new value, same fields
        frame = a.adapter.frame().copy()
        facts = a.adapter.state_facts()
    with make_env(task, starts="replayed") as b:
        b.reset()
        b.adapter.set_state(built)
        assert np.array_equal(b.adapter.frame(), frame)
        assert b.adapter.state_facts() == facts


def test_taxi_facts_name_the_state():
    s = TaxiState(row=3, column=1, passenger=4, destination=2, heading=2)
    assert s.facts() == {
        "taxi row": 3,
        "taxi column": 1,
        "taxi faces": "right",
        "passenger": "in taxi",
        "destination": "yellow",
    }
    assert CliffState(2, 7, None).facts() == {"row": 2, "column": 7}


def test_a_state_of_another_kind_is_refused():
    with make_env(_task("taxi")) as taxi, make_env(_task("cliffwalking")) as cliff:
        taxi.reset()
        cliff.reset()
        with pytest.raises(StateKindError):
            taxi.adapter.set_state(cliff.adapter.read_state())
        with pytest.raises(StateKindError):
            taxi.adapter.set_state(NativeState(taxi.adapter.snapshot()))
    with make_env(_task("breakout")) as breakout:
        breakout.reset()
        with pytest.raises(StateKindError):
            breakout.adapter.set_state(TaxiState(0, 0, 0, 1, 0))
