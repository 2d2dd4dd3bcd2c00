"""Family recipes (vical.authoring.recipes): the stored packages of the MiniGrid and
ALE prefix-stream environments, the budgeted pool assignment, and regeneration."""

from __future__ import annotations

import pytest

from vical.authoring.make import make_demos
from vical.authoring.plan import MAX_FRAMES, MIN_FRAMES, Pool, assign_pools, frames
from vical.spec import DemoClip, load_envs

FAMILY_ENVS = [
    "multiroom",
    "unlockpickup",
    "demonattack",
    "enduro",
    "freeway",
    "frostbite",
    "mspacman",
    "pong",
]
# environments whose score or ending punishes a hazard: some package shows the loss
LOSS_LABEL = {
    "unlockpickup": "Terminated",
    "demonattack": "Terminated",
    "frostbite": "Terminated",
    "mspacman": "Terminated",
}


@pytest.mark.parametrize("env", FAMILY_ENVS)
def test_family_packages(env):
    spec = load_envs()[env]
    clips: dict[str, DemoClip] = {}
    for v in spec.tasks:
        assert 1 <= len(v.demos) <= 4, v.variant
        assert MIN_FRAMES <= sum(frames(c) for c in v.demos) <= MAX_FRAMES, v.variant
        for c in v.demos:
            assert clips.setdefault(c.id, c) == c  # one definition per id
            assert all(a in spec.actions for a in c.actions)
    # clips are shared across tasks, and every environment shows a failure
    assert sum(len(v.demos) for v in spec.tasks) > len(clips)
    assert any(c.label != "Victory" for c in clips.values())
    if env in LOSS_LABEL:
        assert any(c.label == LOSS_LABEL[env] for c in clips.values())
    if env == "frostbite":  # dying costs points: every package shows a loss
        assert all(any(c.label == "Terminated" for c in v.demos) for v in spec.tasks)


def _clip(cid: str, n: int) -> DemoClip:
    return DemoClip(id=cid, actions=["Up"] * n, label="Victory", source="scripted test clip")


def test_assign_pools_budgets():
    spec = load_envs()["pong"]
    clips = {c.id: c for c in (_clip("a", 40), _clip("b", 20), _clip("c", 8), _clip("f", 12))}
    pools = [Pool(variants=[v.variant for v in spec.tasks], wins=["a", "b", "c"], fails=["f"])]
    out = assign_pools(spec, pools, clips)
    assert len(out) == len(spec.tasks)
    for ids in out:
        assert 1 <= len(ids) <= 4
        assert MIN_FRAMES <= sum(frames(clips[i]) for i in ids) <= MAX_FRAMES
    assert out[1][1] == "f"  # every other package takes the failure second
    assert any(len(ids) == 1 for ids in out) and any(len(ids) > 1 for ids in out)


@pytest.mark.slow  # the recipes' regeneration in the default suite: test_authoring_recipes_arcade
def test_regeneration_matches_stored():
    spec = load_envs()["unlockpickup"]
    fresh = make_demos("unlockpickup")
    assert {v.variant: v.demos for v in spec.tasks} == fresh
