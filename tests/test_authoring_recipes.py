"""The recipe modules' public API (vical.authoring.recipes): every module is found and
gives a callable recipe, the family recipe data (``RECIPE``) is called like a
``recipe`` function, and the Classic Control table makes the clips it always made.

Cheap checks only: no expert runs here (tests/test_behaviour.py replays the stored
clips; ``vical demos make --env <env> --dry-run`` reruns a recipe)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from vical.authoring import author_module, recipe_for
from vical.authoring.plan import ClipPool, gathered, group_pools, settings_groups
from vical.authoring.recipes import _scripted
from vical.spec import load_envs

RECIPE_MODULES = sorted(
    m.name
    for m in pkgutil.iter_modules(importlib.import_module("vical.authoring.recipes").__path__)
    if not m.name.startswith("_")
)


@pytest.mark.parametrize("env", RECIPE_MODULES)
def test_every_recipe_module_gives_a_recipe(env):
    spec = load_envs()[env]
    mod = author_module(spec)
    assert mod is not None and mod.__name__ == f"vical.authoring.recipes.{env}"
    recipe = recipe_for(spec)
    assert callable(recipe)
    # a module states either a recipe function or its family's recipe data, not both
    assert hasattr(mod, "recipe") != hasattr(mod, "RECIPE")


# the clips and packages of the Classic Control recipes as they were written out by hand
CONTROL = {
    "acrobot": (
        [
            ("acrobot-s3-swingup", 3, None, _scripted.CTL.format("acrobot")),
            ("acrobot-s5-swingup", 5, None, _scripted.CTL.format("acrobot")),
            (
                "acrobot-s7-idle",
                7,
                12,
                "scripted: Torque 0 held, the arm does not rise by itself",
            ),
        ],
        [
            ["acrobot-s3-swingup"],
            ["acrobot-s5-swingup", "acrobot-s7-idle"],
            ["acrobot-s3-swingup", "acrobot-s7-idle"],
            ["acrobot-s5-swingup"],
            ["acrobot-s3-swingup"],
        ],
    ),
    "cartpole": (
        [
            ("cartpole-s3-balance", 3, None, _scripted.CTL.format("cartpole")),
            ("cartpole-s5-balance", 5, None, _scripted.CTL.format("cartpole")),
            ("cartpole-s7-fall", 7, None, "scripted failure: Push Right held until the pole falls"),
        ],
        [
            ["cartpole-s3-balance", "cartpole-s7-fall"],
            ["cartpole-s5-balance"],
            ["cartpole-s5-balance", "cartpole-s7-fall"],
            ["cartpole-s3-balance"],
            ["cartpole-s7-fall", "cartpole-s3-balance"],
        ],
    ),
    "mountaincar": (
        [
            ("mountaincar-s3-pump", 3, None, _scripted.CTL.format("mountaincar")),
            ("mountaincar-s5-pump", 5, None, _scripted.CTL.format("mountaincar")),
            (
                "mountaincar-s7-push-right",
                7,
                16,
                "scripted: Accelerate Right held, the engine alone cannot climb the slope",
            ),
        ],
        [
            ["mountaincar-s3-pump", "mountaincar-s7-push-right"],
            ["mountaincar-s5-pump"],
            ["mountaincar-s3-pump"],
            ["mountaincar-s5-pump", "mountaincar-s7-push-right"],
            ["mountaincar-s7-push-right", "mountaincar-s3-pump"],
        ],
    ),
}


@pytest.mark.parametrize("env", sorted(CONTROL))
def test_control_recipe_makes_its_clips(env):
    spec = load_envs()[env]
    recipe = recipe_for(spec)
    assert isinstance(recipe, _scripted.ControlRecipe)
    plans, packages = recipe(spec)
    clips, expected_packages = CONTROL[env]
    got = [(p.id, p.seed, p.horizon, p.source) for p in plans]
    assert got == clips
    assert all((p.initial_skip, p.init_actions, p.on) == (0, [], None) for p in plans)
    assert packages == expected_packages
    assert len(packages) == len(spec.tasks)


def test_group_pools_share_claimed_starts():
    spec = load_envs()["highway"]
    pools = group_pools(spec, fail_every=True)
    groups = settings_groups(spec)
    assert [c.pool.variants for c in pools] == groups
    assert [c.on for c in pools] == [g[0] for g in groups]
    assert all(c.pool.fail_every for c in pools)
    # one set of claimed start frames: a start taken by one group is taken for all
    assert all(c.taken is pools[0].taken for c in pools)
    plans, out = gathered(pools)
    assert plans == [] and out == [c.pool for c in pools]


def test_clip_pool_defaults_to_every_task():
    spec = load_envs()["tetris"]
    on = next(v.variant for v in spec.tasks if v.kind == "base")
    clips = ClipPool(spec, on)
    assert clips.pool.variants == [v.variant for v in spec.tasks]
    assert not clips.pool.fail_every
    assert 0 < len(clips.taken) <= len(spec.tasks)
