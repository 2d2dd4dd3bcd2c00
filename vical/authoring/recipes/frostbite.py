"""Frostbite demo clips: random-shooting chunks over the seeded hopper; the failure is the
hopper without look-ahead until a life is lost.

The human-init generator (:func:`generate_init_actions`) keeps short deathless plays
of the same hopper from each variant's own skip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vical.authoring.recipes._ale import chunk_recipe, weighted_policy
from vical.authoring.search import live_beam_search, play_without_dying, prefix_streams
from vical.authoring.sim import DecisionSim
from vical.envs.games.frostbite import LANDING_MAX, Adapter
from vical.spec import EnvSpec, TaskSpec

# human-init preload length (decisions) per variant
LENGTHS: dict[str, int] = {"floes-a": 5, "floes-b": 8}  # floes-c replays Figure 5

# Seeded hopper: mostly jumps between rows, sometimes walks or waits.
policy = weighted_policy(
    ["Down", "Up", "Down+Right", "Down+Left", "Up+Right", "Up+Left", "Right", "Left", "NOOP"],
    (4, 2, 2, 2, 1, 1, 1, 1, 2),
)

RECIPE = chunk_recipe(
    policy,
    wins=((30, 0, 30), (70, 3, 30), (20, 6, 30)),
    fail_policy=policy,
    fail_every=True,  # a lost life costs the death penalty
    fail_start=(40, 0),
    fail_len=14,
    fail_note="failure clip: the game's seeded random hopper, without look-ahead, until a life is lost",
)


# decisions a preload must leave survivable: the game ignores the joystick for about
# 13 decisions while the player sinks, and only then takes the life
SURVIVAL_MARGIN = 16


def survivable(sim: DecisionSim, margin: int = SURVIVAL_MARGIN) -> bool:
    """Whether some seeded hopping of ``margin`` decisions from here keeps the life
    (the state is restored either way)."""
    state = sim.clone()
    try:
        play_without_dying(sim, policy, margin, seed=0)
        return True
    except RuntimeError:
        return False
    finally:
        sim.restore(state)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Deterministic preloads: deathless seeded hopping from each variant's own skip,
    never ending where the player is already sinking (:func:`survivable`)."""
    return prefix_streams(env_spec, Adapter, LENGTHS, policy, seed=11, viable=survivable)


INIT_STRATEGY = (
    "deathless seeded hopping between floe rows (clone/restore rewinds whenever a life "
    "would be lost), a few decisions long so the player stands among moving floes"
)


def landings(reward: float) -> int:
    """Floe rows reached in a decision's reward, as the task's adapter counts them."""
    return 1 if 0 < reward <= LANDING_MAX else 0


def floe_beam(sim: Any, n: int, seed: int = 0, width: int = 32) -> list[str]:
    """Expert decisions: :func:`~vical.authoring.search.live_beam_search` over all actions
    for the task's ``floes`` target of landings (states of a sinking player, who ignores
    the input for about a dozen decisions before the life is lost, set aside)."""
    goal = int(sim.task.target("floes"))
    return live_beam_search(sim, n, width=width, seed=seed, events=landings, goal=goal)


def _floe_expert(task: TaskSpec) -> list[str]:
    from vical.authoring.recipes._ale import ale_expert

    return ale_expert(task, floe_beam, task.max_steps).actions


# experts tried after the recipe's own (benchmarks/policy_audit.py): (variant, task -> actions)
EXTRA_EXPERTS: list[tuple[str, Callable[[TaskSpec], list[str]]]] = [
    ("floe beam width 32", _floe_expert),  # life-safe beam for the landings target
]
