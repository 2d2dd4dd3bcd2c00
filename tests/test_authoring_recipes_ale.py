"""Demo packages of the beam-search ALE games (Alien, Assault, Asterix, BattleZone, Berzerk,
ChopperCommand), made by the recipes in ``vical/authoring/recipes/<env>.py``.

Per environment: every package keeps the paper's limits (1-4 clips, 10-80
frames), clips are defined once and shared across tasks, every clip replays to
its label on every task that shows it and starts away from every task opening
of the environment, every simulator setting (ALE mode) has a loss clip (one
life: dying ends and fails the episode in all six games), and regenerating
Assault's clips reproduces the stored ones. Berzerk: every mode has a clip
that walks out of the room (the main pass), first in every package of the
mode, and it replays to Victory through the room counter with the life kept.
"""

from __future__ import annotations

import pytest
from conftest import spread

from vical.authoring.make import make_demos
from vical.authoring.plan import MAX_FRAMES, MIN_FRAMES, frames, settings_groups
from vical.authoring.recipes._ale import ale_decision_sim
from vical.demos.render import clip_task, replay_clip, task_start_sha256
from vical.envs import make_env
from vical.envs.games.berzerk import ROOM_BYTE
from vical.spec import DemoClip, TaskSpec, load_envs

ENVS = ["alien", "assault", "asterix", "battlezone", "berzerk", "choppercommand"]


def _clips(env: str) -> dict[str, DemoClip]:
    out: dict[str, DemoClip] = {}
    for v in load_envs()[env].tasks:
        for c in v.demos:
            assert out.setdefault(c.id, c) == c, f"{c.id} defined twice, differently"
    return out


@pytest.mark.parametrize("env", ENVS)
def test_packages_within_limits(env):
    spec = load_envs()[env]
    clips = _clips(env)
    for v in spec.tasks:
        assert 1 <= len(v.demos) <= 4, v.variant
        assert MIN_FRAMES <= sum(frames(c) for c in v.demos) <= MAX_FRAMES, v.variant
        assert len({c.id for c in v.demos}) == len(v.demos), v.variant
        for c in v.demos:
            assert all(a in spec.actions for a in [*c.init_actions, *c.actions])
            assert c.source
    # reused across tasks, but not one clip for everything
    assert sum(len(v.demos) for v in spec.tasks) > len(clips) > 1
    assert any(c.label == "Victory" for c in clips.values())


@pytest.mark.parametrize("env", ENVS)
def test_every_setting_shows_a_loss(env):
    """One life in every game: each ALE mode's tasks can show how it is lost."""
    spec = load_envs()[env]
    by_variant = {v.variant: v for v in spec.tasks}
    for group in settings_groups(spec):
        labels = {c.label for name in group for c in by_variant[name].demos}
        assert "Terminated" in labels, group


def test_asterix_every_package_shows_the_death_penalty():
    for v in load_envs()["asterix"].tasks:
        assert any(c.label == "Terminated" for c in v.demos), v.variant


@pytest.mark.parametrize("env", spread(ENVS, 2))
def test_clips_replay_and_start_away_from_every_opening(env):
    spec = load_envs()[env]
    openings = {task_start_sha256(TaskSpec(env=spec, variant=v)) for v in spec.tasks}
    starts: dict[str, str] = {}
    for v in spec.tasks:
        task = TaskSpec(env=spec, variant=v)
        for c in v.demos:
            r = replay_clip(task, c)  # raises unless the replay ends in the stored label
            assert r.start_sha256 not in openings, (v.variant, c.id)
            starts.setdefault(c.id, r.start_sha256)
    # no two clips of a setting start from the same frame
    assert len(set(starts.values())) == len(starts)


def test_assault_regeneration_matches_stored():
    spec = load_envs()["assault"]
    fresh = make_demos("assault")
    assert {v.variant: v.demos for v in spec.tasks} == fresh


def _berzerk_exits() -> list[tuple[TaskSpec, DemoClip]]:
    """Each Berzerk exit clip once, with the first task that shows it."""
    spec = load_envs()["berzerk"]
    out: dict[str, tuple[TaskSpec, DemoClip]] = {}
    for v in spec.tasks:
        for c in v.demos:
            if c.id.endswith("-exit"):
                out.setdefault(c.id, (TaskSpec(env=spec, variant=v), c))
    return list(out.values())


def test_berzerk_every_package_opens_with_its_modes_room_exit():
    spec = load_envs()["berzerk"]
    by_variant = {v.variant: v for v in spec.tasks}
    for group in settings_groups(spec):
        firsts = {by_variant[name].demos[0].id for name in group}
        assert len(firsts) == 1, group  # one exit clip per mode, shared by its tasks
        assert firsts.pop().endswith("-exit"), group
        for name in group:
            assert sum(c.id.endswith("-exit") for c in by_variant[name].demos) == 1, name


@pytest.mark.parametrize("task,clip", _berzerk_exits(), ids=lambda x: getattr(x, "id", ""))
def test_berzerk_exit_clip_leaves_the_room_alive(task, clip):
    """Victory by walking out: the room counter moves on the clip's last decision, never
    before, and no life is lost (a death also moves the counter)."""
    assert clip.label == "Victory" and 10 <= len(clip.actions) <= 40
    env = make_env(clip_task(task, clip))
    try:
        env.reset()
        room0, lives0 = int(env.adapter.ram()[ROOM_BYTE]), env.adapter.lives()
        for i, name in enumerate(clip.actions):
            assert not env.done, (clip.id, i)
            assert int(env.adapter.ram()[ROOM_BYTE]) == room0, (clip.id, i)
            step = env.step(name)
        assert env.done and step.outcome == "Victory" and env.passed()
        assert int(env.adapter.ram()[ROOM_BYTE]) != room0
        assert env.adapter.lives() == lives0
        assert env.progress()["exited"] and not env.progress()["died"]
    finally:
        env.close()


def test_berzerk_exit_walk_reproduces_a_stored_clip():
    """The recipe's exit search, rerun from a stored clip's start, finds the same walk
    (one mode; the full regeneration is the slow test below)."""
    from vical.authoring.recipes.berzerk import exit_walk

    task, clip = _berzerk_exits()[0]
    sim = ale_decision_sim(clip_task(task, clip))
    try:
        assert exit_walk(sim) == clip.actions
    finally:
        sim.adapter.close()


@pytest.mark.slow
def test_berzerk_regeneration_matches_stored():
    spec = load_envs()["berzerk"]
    fresh = make_demos("berzerk")
    assert {v.variant: v.demos for v in spec.tasks} == fresh
