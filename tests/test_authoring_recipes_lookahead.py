"""Demo packages of the look-ahead ALE games (River Raid, Road Runner, Seaquest, Tennis,
TRON Deadly Discs, Turmoil), made by vical/authoring/recipes/<env>.py.

Per game: every package keeps the package rules (1-4 clips, 10-80 frames, labels
replay on the task's own settings, no clip from the task's opening), clips are
shared across tasks without one clip serving everything, and losing a life (which
ends the episode in all six games) is shown. The RAM-parameterized games (River Raid
sections, Trondead levels) show a loss within every section/level. Turmoil's clips
are regenerated and compared with the stored ones.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from vical.authoring.make import make_demos
from vical.authoring.plan import MAX_FRAMES, MIN_FRAMES, check_package, frames
from vical.authoring.recipes._lookahead import exact_groups
from vical.spec import DemoClip, TaskSpec, load_envs

GAMES = ["riverraid", "roadrunner", "seaquest", "tennis", "trondead", "turmoil"]
# the two longest replays go to `nox -s slow` (every clip of theirs is also replayed to
# its label on every task by tests/test_demos.py)
REPLAYED = [
    pytest.param(g, marks=pytest.mark.slow) if g in ("riverraid", "trondead") else g for g in GAMES
]


@pytest.mark.parametrize("env", GAMES)
def test_lookahead_packages(env):
    spec = load_envs()[env]
    clips: dict[str, DemoClip] = {}
    for v in spec.tasks:
        assert 1 <= len(v.demos) <= 4, v.variant
        assert MIN_FRAMES <= sum(frames(c) for c in v.demos) <= MAX_FRAMES, v.variant
        for c in v.demos:
            assert clips.setdefault(c.id, c) == c  # one definition per id
            assert all(a in spec.actions for a in c.actions)
    assignments = sum(len(v.demos) for v in spec.tasks)
    assert assignments > len(clips) > 1  # shared, but not one clip for everything
    assert any(c.label == "Terminated" for c in clips.values())
    assert any(c.label == "Victory" for c in clips.values())


@pytest.mark.parametrize("env", REPLAYED)
def test_lookahead_clips_replay_on_each_task(env):
    spec = load_envs()[env]
    for v in spec.tasks:
        # labels, start frames and frame counts, on the task's own settings
        check_package(TaskSpec(env=spec, variant=v), list(v.demos))


@pytest.mark.parametrize(
    ("env", "param", "n_groups"), [("riverraid", "section", 20), ("trondead", "level", 5)]
)
def test_ram_settings_groups_each_show_a_loss(env, param, n_groups):
    spec = load_envs()[env]
    assert len(exact_groups(spec)) == n_groups
    losses = defaultdict(bool)
    for v in spec.tasks:
        key = TaskSpec(env=spec, variant=v).params.get(param, 1 if env == "riverraid" else 0)
        losses[key] |= any(c.label == "Terminated" for c in v.demos)
    assert losses and all(losses.values()), dict(losses)


@pytest.mark.slow  # the recipes' regeneration in the default suite: test_authoring_recipes_arcade
def test_turmoil_regeneration_matches_stored():
    spec = load_envs()["turmoil"]
    assert make_demos("turmoil") == {v.variant: v.demos for v in spec.tasks}
