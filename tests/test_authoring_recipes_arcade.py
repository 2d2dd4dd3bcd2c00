"""Demo packages of the arcade environments (highway, tetris, flappybird, breakout):
package limits, clips shared within the environment, a loss shown where dying matters,
starts that differ from every task opening, and regeneration equal to the stored clips."""

from __future__ import annotations

import pytest
from conftest import spread

from vical.authoring.make import make_demos
from vical.authoring.plan import MAX_FRAMES, MIN_FRAMES, frames
from vical.demos.render import clip_task, task_start_sha256
from vical.spec import DemoClip, TaskSpec, load_envs

ARCADE = ["breakout", "tetris", "flappybird", "highway"]
# a loss ends every one of these games (crash, top-out, pipe hit, ball lost): each shows one
LOSS = {env: "Terminated" for env in ARCADE}
# cheap enough to regenerate in a test (seconds); highway takes minutes
REGENERATE = ["breakout", "tetris", "flappybird"]


def _tasks(env: str) -> list[TaskSpec]:
    spec = load_envs()[env]
    return [TaskSpec(env=spec, variant=v) for v in spec.tasks]


@pytest.mark.parametrize("env", ARCADE)
def test_packages_follow_the_limits_and_share_clips(env):
    spec = load_envs()[env]
    clips: dict[str, DemoClip] = {}
    for v in spec.tasks:
        assert 1 <= len(v.demos) <= 4, v.variant
        assert MIN_FRAMES <= sum(frames(c) for c in v.demos) <= MAX_FRAMES, v.variant
        for c in v.demos:
            assert clips.setdefault(c.id, c) == c, f"{c.id} is defined twice differently"
            assert all(a in spec.actions for a in c.actions + c.init_actions)
    assert sum(len(v.demos) for v in spec.tasks) > len(clips), "no clip is shared"
    assert len(clips) > 1, "one clip for everything"
    assert any(c.label == LOSS[env] for c in clips.values()), "no failure clip"
    assert any(c.label == "Victory" for c in clips.values())


@pytest.mark.parametrize("env", ARCADE)
def test_clip_starts_differ_from_every_task_opening(env):
    """Replayed under a task's own settings, no clip of the environment starts on the
    opening frame of any task with those settings (not only the task it demonstrates).
    Labels are replayed by tests/test_demos.py; here only the start states are built."""
    tasks = _tasks(env)
    openings: dict[str, set[str]] = {}
    for t in tasks:
        key = repr(sorted(t.env_kwargs.items()))
        openings.setdefault(key, set()).add(task_start_sha256(t))
    for t in tasks:
        key = repr(sorted(t.env_kwargs.items()))
        for c in t.variant.demos:
            assert task_start_sha256(clip_task(t, c)) not in openings[key], f"{t.id}: {c.id}"


@pytest.mark.parametrize("env", ARCADE)
def test_clips_start_from_unused_seeds_or_later(env):
    tasks = _tasks(env)
    starts = {
        (t.variant.seed, t.variant.initial_skip, tuple(t.variant.init_actions)) for t in tasks
    }
    for t in tasks:
        for c in t.variant.demos:
            ct = clip_task(t, c)
            assert (ct.variant.seed, c.initial_skip, tuple(c.init_actions)) not in starts


@pytest.mark.parametrize("env", spread(REGENERATE, 1))
def test_regeneration_matches_stored(env):
    spec = load_envs()[env]
    assert make_demos(env) == {v.variant: v.demos for v in spec.tasks}
