"""Behaviour is unchanged by refactoring: start frames, demo clips and random episodes
reproduce the fingerprints recorded in tests/data/behaviour.json (see tests/behaviour.py),
and those an added folder records beside its task files (``vical tasks record``).

Every task's start frame is checked in the default suite; demo clips and random
episodes are checked on a spread of tasks here and on all of them under
``-m slow`` (``nox -s slow``)."""

from __future__ import annotations

import json

import pytest
from conftest import sampled_task_ids

from tests.behaviour import LEVELS, RECORDED, child_environ, float_cases
from vical.run.fingerprints import (
    clip_fingerprint,
    distinct_clips,
    longest_clip,
    random_fingerprint,
    start_fingerprint,
)


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

    tasks = all_tasks()
    ids = {t.id for t in tasks}
    assert set(RECORDED["starts"]) == ids == set(RECORDED["random"]) == set(RECORDED["demos"])
    assert set(RECORDED["clips"]) == {f"{t}#{c}" for t, c in distinct_clips(tasks)}


@pytest.mark.parametrize("task_id", sampled_task_ids(sorted(RECORDED["starts"])))
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


@pytest.mark.slow
@pytest.mark.parametrize("task_id", sorted(RECORDED["demos"]))
def test_every_task_demo_unchanged(task_id):
    from vical.spec import get_task

    assert clip_fingerprint(task_id, longest_clip(get_task(task_id))) == RECORDED["demos"][task_id]


def _recorded(key: str) -> str:
    kind, rest = key.split(":", 1)
    return RECORDED[kind][rest]


def _numpy_found() -> list[str]:
    from numpy.core._multiarray_umath import __cpu_features__

    return [k for k, v in __cpu_features__.items() if v]


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_float_physics_same_bits_at_every_cpu_level(level):
    """The longest clip and a random episode of every float-physics environment give
    the recorded fingerprints with numpy, glibc's libm and OpenBLAS held to each
    feature level (from the machine's maximum down to the x86-64 baseline), in a
    child process that imports numpy before vical, as any user's script may."""
    import subprocess
    import sys

    env = child_environ(level, _numpy_found())
    code = "import numpy, runpy, sys; sys.argv = ['x', '--float-check']; " + (
        "runpy.run_module('tests.behaviour', run_name='__main__')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(got) == 2 * 7 == len(float_cases())
    wrong = {k: v[:12] for k, v in got.items() if v != _recorded(k)}
    assert not wrong, f"{level}: {wrong}"


def test_a_feature_level_really_changes_numpy():
    """The levels are not a no-op: under the baseline level numpy's float64 arctan
    of a fixed input set differs from the machine's maximum wherever the machine
    has AVX-512 (and the disabled list is accepted everywhere)."""
    import subprocess
    import sys

    code = (
        "import numpy as np, hashlib; x = np.linspace(-3, 3, 100001); "
        "print(hashlib.sha256(np.arctan(x).tobytes()).hexdigest(), "
        "hashlib.sha256(np.exp(x).tobytes()).hexdigest())"
    )
    found = _numpy_found()
    outs = {}
    for level in ("numpy-max", "numpy-baseline"):
        env = child_environ(level, found)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs[level] = r.stdout
    if "AVX512_SKX" in found:
        assert outs["numpy-max"] != outs["numpy-baseline"]
