"""Tasks as Gymnasium environments: Gymnasium's own checker (check_env and the passive
checker gym.make keeps on), exact repeated resets, versioned ids and the render modes.

One task of every environment is checked in the default suite; every task under
``-m slow``. Start frames are compared with the fingerprints in
tests/data/behaviour.json (the frame_sha256 of ``make_env(task).reset()``), or for an
environment added from a folder with those recorded beside its task file."""

from __future__ import annotations

import random
import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import spread
from gymnasium.envs.registration import ENV_ID_RE
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import HumanRendering, PassiveEnvChecker, TimeLimit

import vical.gym
from tests.behaviour import RECORDED
from vical.envs import frame_sha256, make_env
from vical.gym import VicalGymEnv, gym_id
from vical.spec import TaskSpec, all_tasks

STARTS: dict[str, str] = RECORDED["starts"]
TASKS = all_tasks()
# set to 1, every reset replays the start from the simulator's own reset (vical.envs.core)
REPLAY_STARTS = "VICAL_REPLAY_STARTS"
ONE_PER_ENV = [t for i, t in enumerate(TASKS) if t.env.env not in {u.env.env for u in TASKS[:i]}]


def _ids(t: TaskSpec) -> str:
    return t.id


@pytest.fixture(autouse=True)
def _headless(monkeypatch):
    """HumanRendering opens a pygame window: draw it off-screen."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")


def _gym_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    # gymnasium.logger.warn prefixes every message of the checkers with "WARN:"
    return [str(w.message) for w in caught if "WARN:" in str(w.message)]


def _check(task: TaskSpec) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(gym_id(task))
        # gym.make's own wrappers: TimeLimit (the spec's budget) outside, the passive
        # checker on, and run on first use
        assert isinstance(env, TimeLimit) and isinstance(env.env.env, PassiveEnvChecker), env
        env.reset()
        env.step(env.action_space.sample())
        assert env.render().shape == env.observation_space.shape
        # every render mode listed (rgb_array, human) is made and checked through the spec
        check_env(env.unwrapped)
        env.close()
    assert not _gym_warnings(caught)


@pytest.mark.parametrize("task", spread(ONE_PER_ENV, 12, ids=_ids))
def test_check_env(task):
    _check(task)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=_ids)
def test_check_env_every_task(task):
    _check(task)


def _actions(task: TaskSpec, n: int = 17) -> list[int]:
    # 17: no multiple of the short cycles a leak can hide in (Flappy Bird: 12 frames)
    return random.Random(task.id).choices(range(len(task.action_names)), k=n)


def _runtime_play(env, task: TaskSpec, actions: list[int]) -> list[str]:
    out = []
    for a in actions:
        if env.done:
            break
        out.append(env.step(task.action_names[a]).frame_sha256)
    return out


def _gym_play(env: gym.Env, actions: list[int]) -> list[str]:
    out = []
    for a in actions:
        obs, _r, term, trunc, info = env.step(a)
        assert frame_sha256(obs) == info["frame_sha256"]
        out.append(frame_sha256(obs))
        if term or trunc:
            break
    return out


def _check_resets(task: TaskSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    start, actions = STARTS[task.id], _actions(task)
    # the runtime: a new environment, then the same object reset again, both with the
    # start state restored from its snapshot (the default) and replayed from the
    # simulator's own reset (which must not leak the previous episode either)
    played: list[str] | None = None
    for replay in ("", "1"):
        monkeypatch.setenv(REPLAY_STARTS, replay)
        runtime = make_env(task)
        try:
            for k in range(2):
                assert frame_sha256(runtime.reset()) == start, f"reset {k + 1}, replay={replay!r}"
                run = _runtime_play(runtime, task, actions)
                assert played is None or run == played, f"reset {k + 1}, replay={replay!r}"
                played = run
        finally:
            runtime.close()
    monkeypatch.delenv(REPLAY_STARTS)
    # the Gymnasium environment: two consecutive resets, then play after each reset
    env = gym.make(gym_id(task))
    try:
        for _ in range(2):
            obs, info = env.reset()
            assert frame_sha256(obs) == info["frame_sha256"] == start
        assert _gym_play(env, actions) == played
        obs, _ = env.reset(seed=7)
        assert frame_sha256(obs) == start, "the seed does not move a task's start"
        assert _gym_play(env, actions) == played
    finally:
        env.close()


@pytest.mark.parametrize("task", spread(ONE_PER_ENV, 12, ids=_ids))
def test_repeated_resets_return_the_recorded_start(task, monkeypatch):
    _check_resets(task, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=_ids)
def test_repeated_resets_every_task(task, monkeypatch):
    _check_resets(task, monkeypatch)


def test_ids_are_versioned_and_keep_the_checker():
    ids = vical.gym.register_all()
    assert len(ids) == len(set(ids)) == len(TASKS)
    for gid, t in zip(ids, TASKS, strict=True):
        assert gid == f"vical/{t.env.env}-{t.variant.variant}-v0"
        m = ENV_ID_RE.fullmatch(gid)
        assert m is not None and m.group("namespace", "version") == ("vical", "0"), gid
        spec = gym.spec(gid)
        assert spec.kwargs == {"task_id": t.id}
        assert not spec.disable_env_checker and not spec.nondeterministic
    assert "vical/taxi-state1" not in gym.registry  # the unversioned form is gone


def test_render_modes():
    env = gym.make("vical/taxi-state1-v0")
    meta = env.unwrapped.metadata
    assert set(meta["render_modes"]) == {"rgb_array", "human"} and meta["render_fps"] > 0
    assert env.render_mode == "rgb_array"
    obs, _ = env.reset()
    frame = env.render()
    assert np.array_equal(frame, obs) and frame is not obs
    env.close()

    quiet = gym.make("vical/taxi-state1-v0", render_mode=None)
    quiet.reset()
    assert quiet.render() is None
    quiet.close()

    with pytest.raises(ValueError, match="HumanRendering"):
        VicalGymEnv("taxi/state1", render_mode="human")


def test_human_render_mode_is_gymnasiums_wrapper():
    env = gym.make("vical/flappybird-seed43-v0", render_mode="human")
    assert env.render_mode == "human"
    wrapper = env
    while not isinstance(wrapper, HumanRendering):
        wrapper = wrapper.env  # type: ignore[attr-defined]
    assert wrapper.env.render_mode == "rgb_array"
    obs, _ = env.reset()
    assert frame_sha256(obs) == STARTS["flappybird/seed43"]
    env.step(1)
    assert env.render() is None  # drawn in the window, nothing returned
    env.close()


def test_rewards_sum_to_score():
    env = gym.make("vical/taxi-state1-v0")
    obs, info0 = env.reset()
    total, done = 0.0, False
    rng = np.random.default_rng(0)
    while not done:
        obs, r, term, trunc, info = env.step(int(rng.integers(env.action_space.n)))
        total += r
        done = term or trunc
    assert abs(total - (info["score"] - info0["score"])) < 1e-6
    ref = make_env("taxi/state1")
    assert obs.shape == ref.reset().shape
    env.close()


def test_spec_max_episode_steps_is_the_task_budget():
    """Every registered id carries the task's decision budget in its spec."""
    wrong = {
        t.id: gym.spec(gym_id(t)).max_episode_steps
        for t in TASKS
        if gym.spec(gym_id(t)).max_episode_steps != t.max_steps
    }
    assert not wrong, wrong


def test_time_limit_tools_read_the_budget_and_truncate_with_the_task():
    """What a tool that reads the spec sees (gymnasium.make(...).spec, its TimeLimit):
    the budget; and the wrapper truncates at the step where the task itself does."""
    task = next(t for t in TASKS if t.id == "cliffwalking/base")
    env = gym.make(gym_id(task))
    try:
        assert env.spec.max_episode_steps == task.max_steps
        assert isinstance(env, TimeLimit) and env._max_episode_steps == task.max_steps
        env.reset()
        up = task.action_names.index("Up")  # against the top wall: never ends the game
        for n in range(1, task.max_steps + 1):
            _, _, terminated, truncated, _ = env.step(up)
            assert not terminated
            assert truncated == (n == task.max_steps)
            assert env.unwrapped.env.done == (n == task.max_steps)
    finally:
        env.close()
