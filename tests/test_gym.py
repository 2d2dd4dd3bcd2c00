"""Tasks as Gymnasium environments."""

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

import vical.gym
from vical.envs import make_env


def test_every_task_is_registered():
    ids = vical.gym.register_all()
    assert len(ids) == len(set(ids)) and all(i in gym.registry for i in ids)


def test_check_env_and_rewards_sum_to_score():
    env = gym.make("vical/taxi-state1")
    check_env(env.unwrapped, skip_render_check=True)
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
