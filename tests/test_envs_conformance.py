"""One conformance test over every vical task (the Gymnasium habit): contract,
replay determinism, score bounds, vocabulary checks and distinct start states."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import numpy as np
import pytest
from conftest import ALL_TASKS, task_params

from vical.envs import InvalidActionError, make_env
from vical.envs.core import EpisodeOverError, frame_sha256


def random_actions(task, n, salt=""):
    rng = random.Random(f"{task.id}{salt}")
    return [rng.choice(task.action_names) for _ in range(n)]


def play(env, actions, check=False):
    """Reset, play ``actions`` until the episode ends; return hashes and per-step trace."""
    task = env.task
    frame = env.reset()
    if check:
        assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
        assert 0.0 <= env.score() <= 100.0
        with pytest.raises(InvalidActionError):
            env.step("Definitely Not An Action")
    hashes = [frame_sha256(frame)]
    trace = []
    for a in actions:
        if env.done:
            break
        s = env.step(a)
        hashes.append(s.frame_sha256)
        trace.append((s.score, s.passed, s.outcome, s.terminated, s.truncated))
        if check:
            assert 0.0 <= s.score <= 100.0
            assert s.index <= task.max_steps
    return hashes, trace, env.score(), env.passed(), env.outcome


@pytest.mark.parametrize("task", task_params())
def test_contract_bounds_and_replay_determinism(task):
    """A random episode to its end respects the contract; replaying its actions in a
    fresh env reproduces every frame hash, score, pass flag and outcome."""
    actions = random_actions(task, task.max_steps)
    env = make_env(task)
    try:
        first = play(env, actions, check=True)
        assert env.done and env.outcome in ("Victory", "Terminated", "Time Out", "Draw")
        if env.outcome == "Time Out":
            assert env.steps == task.max_steps
        with pytest.raises(EpisodeOverError):
            env.step(task.action_names[0])
    finally:
        env.close()
    env = make_env(task)
    try:
        second = play(env, actions)
    finally:
        env.close()
    assert first[0] == second[0], "frame hashes differ between two replays"
    assert first[1:] == second[1:], "score / pass / outcome differ between two replays"


def _start_key(t):
    v = t.variant
    return json.dumps(
        [v.seed, v.initial_skip, v.init_actions, t.env_kwargs, v.params],
        sort_keys=True,
        default=str,
    )


@pytest.mark.parametrize("env_key", sorted({t.env.env for t in ALL_TASKS}))
def test_start_frames_differ_where_start_state_differs(env_key):
    tasks = [t for t in ALL_TASKS if t.env.env == env_key]
    by_hash = defaultdict(list)
    for t in tasks:
        env = make_env(t)
        try:
            by_hash[frame_sha256(env.reset())].append(t)
        finally:
            env.close()
    for group in by_hash.values():
        keys = {_start_key(t) for t in group}
        assert len(keys) == 1, (
            f"tasks {[t.id for t in group]} have different stored start states but the "
            "same start frame"
        )
