"""Behaviour is unchanged by refactoring: start frames, demo clips and random episodes
reproduce the fingerprints recorded in tests/data/behaviour.json (see tests/behaviour.py).

Every task's start frame is checked in the default suite; demo clips and random
episodes are checked on a spread of tasks here and on all of them under
``-m slow`` (``nox -s slow``)."""

from __future__ import annotations

import json

import pytest

from tests.behaviour import (
    BASELINE,
    clip_fingerprint,
    distinct_clips,
    random_fingerprint,
    start_fingerprint,
)

RECORDED = json.loads(BASELINE.read_text())


def _spread(keys: list[str], every: int) -> list[str]:
    """One key in ``every`` plus the first of each environment, so every family is seen."""
    out, envs = [], set()
    for i, k in enumerate(sorted(keys)):
        env = k.split("/")[0]
        if i % every == 0 or env not in envs:
            out.append(k)
        envs.add(env)
    return out


def test_the_baseline_covers_every_task_and_clip():
    from vical.spec import all_tasks

    ids = {t.id for t in all_tasks()}
    assert set(RECORDED["starts"]) == ids == set(RECORDED["random"])
    assert set(RECORDED["clips"]) == {f"{t}#{c}" for t, c in distinct_clips()}


@pytest.mark.parametrize("task_id", sorted(RECORDED["starts"]))
def test_start_frame_unchanged(task_id):
    assert start_fingerprint(task_id) == RECORDED["starts"][task_id]


CLIPS = sorted(RECORDED["clips"])


@pytest.mark.parametrize("key", _spread(CLIPS, 6))
def test_demo_clip_unchanged(key):
    task_id, clip_id = key.split("#")
    assert clip_fingerprint(task_id, clip_id) == RECORDED["clips"][key]


@pytest.mark.slow
@pytest.mark.parametrize("key", CLIPS)
def test_every_demo_clip_unchanged(key):
    task_id, clip_id = key.split("#")
    assert clip_fingerprint(task_id, clip_id) == RECORDED["clips"][key]


@pytest.mark.parametrize("task_id", _spread(sorted(RECORDED["random"]), 10))
def test_random_episode_unchanged(task_id):
    assert random_fingerprint(task_id) == RECORDED["random"][task_id]


@pytest.mark.slow
@pytest.mark.parametrize("task_id", sorted(RECORDED["random"]))
def test_every_random_episode_unchanged(task_id):
    assert random_fingerprint(task_id) == RECORDED["random"][task_id]
