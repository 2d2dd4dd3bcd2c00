"""Demo clips of Flappy Bird: a scripted pilot threading gaps, and two crashes.

The tasks differ by seed and by the bird, pipe and background colours. The
colours are drawn from sprite sets of the same sizes and do not enter the
dynamics, so one pool of clips serves every task; each clip is replayed (and
its label checked) under the colours of the task it is shown with.

The first pipe needs about sixty steps to arrive, and every task's opening
frame is the bird alone before any pipe, so every clip starts later, after a
warm-up of the pilot from a seed no task uses:

- the pilot from when the first pipe is 90 px ahead of the bird through its gap;
- the pilot from just after the first pipe through the second gap;
- a failure: the pilot brings the bird near the first pipe, then Flap is held
  and the bird shoots up into the upper pipe (Terminated);
- a failure: the same approach with Idle held, so the bird sinks onto the
  lower pipe (Terminated).

The pilot (the rule of ``tests/test_flappy.py``) flaps when the bird has sunk
to 20 pixels above the next gap's lower edge and is not already climbing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from flappy_bird_gymnasium.envs.constants import PIPE_WIDTH, PLAYER_HEIGHT

from vical.authoring.plan import ClipPlan, ClipPool, Pool, seed_env
from vical.envs.compat import flappy as compat
from vical.envs.environment import VicalEnv
from vical.spec import EnvSpec

if TYPE_CHECKING:
    from flappy_bird_gymnasium import FlappyBirdEnv

    from vical.envs.games.flappybird import FlappyAdapter

PILOT = (
    "scripted expert: pilot that flaps when the bird sinks to 20 px above the next gap's lower "
    "edge and is not climbing (simulator state), {what}"
)
CRASH = (
    "scripted failure: the pilot flies toward the first pipe, then {action} is held from "
    "{dist} px before the pipe until the bird hits it"
)
# seeds no task uses, tried in this order
SEEDS = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31)
LIMIT = 200
# the first-pipe clip starts when the pipe is this far (px) ahead of the bird
APPROACH = 90


def _game(env: VicalEnv) -> FlappyBirdEnv:
    return cast("FlappyAdapter", env.adapter).env


def _next_pipe(env: VicalEnv) -> tuple[dict[str, float], dict[str, float]]:
    """(upper, lower) of the nearest pipe pair whose right edge is still ahead of the bird."""
    g = _game(env)
    ahead = [pair for pair in compat.pipes(g) if pair[0]["x"] + PIPE_WIDTH > compat.bird(g).x]
    return min(ahead, key=lambda pair: pair[0]["x"])


def pilot(env: VicalEnv) -> str:
    g = _game(env)
    _, lower = _next_pipe(env)
    floor = lower["y"] - 20 - PLAYER_HEIGHT
    bird = compat.bird(g)
    return "Flap" if bird.y > floor and bird.vel_y >= 0 else "Idle"


def _play(
    spec: EnvSpec, seed: int, policy: Callable[[VicalEnv, list[str]], str | None]
) -> tuple[list[str], str | None, int]:
    """Actions of ``policy(env, actions_so_far)`` until it returns None or the game ends,
    with the outcome and the pipes passed."""
    env = seed_env(spec, seed, LIMIT)
    try:
        acts: list[str] = []
        while not env.done:
            a = policy(env, acts)
            if a is None:
                break
            env.step(a)
            acts.append(a)
        return acts, env.outcome, env.progress()["pipes"]
    finally:
        env.close()


def _pipe_within(env: VicalEnv, dist: int) -> bool:
    """The next pipe's left edge is at most ``dist`` px ahead of the bird's."""
    upper, _ = _next_pipe(env)
    bird_x = compat.bird(_game(env)).x
    return upper["x"] - bird_x <= dist


def _through_pipes(n: int, after: int) -> Callable[[VicalEnv, list[str]], str | None]:
    """The pilot until ``n`` pipes are passed, then ``after`` more steps."""
    extra: list[int] = []

    def policy(env: VicalEnv, acts: list[str]) -> str | None:
        if env.progress()["pipes"] >= n:
            extra.append(1)
            if len(extra) > after:
                return None
        return pilot(env)

    return policy


def _crash(
    hold: str, dist: int, held_from: list[int]
) -> Callable[[VicalEnv, list[str]], str | None]:
    """The pilot until the next pipe is ``dist`` px ahead of the bird, then ``hold`` held;
    the index of the first held action is appended to ``held_from``."""

    def policy(env: VicalEnv, acts: list[str]) -> str | None:
        if held_from or _pipe_within(env, dist):
            if not held_from:
                held_from.append(len(acts))
            return hold
        return pilot(env)

    return policy


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
    on = next(v.variant for v in spec.tasks if v.kind == "base")
    clips = ClipPool(spec, on, fail_every=True)
    add = clips.add
    seeds = iter(SEEDS)

    # the first pipe, from when it is APPROACH px ahead of the bird
    for seed in seeds:
        acts, outcome, pipes = _play(spec, seed, _through_pipes(1, after=3))
        if pipes < 1 or outcome is not None:
            continue
        k = len(_play(spec, seed, lambda e, a: None if _pipe_within(e, APPROACH) else pilot(e))[0])
        note = PILOT.format(what=f"from {APPROACH} px before the first pipe through its gap")
        if add(f"flappybird-seed{seed}-first-pipe", seed, acts[:k], acts[k:], note):
            break
    # the second pipe, from just after the first
    for seed in seeds:
        acts, outcome, pipes = _play(spec, seed, _through_pipes(2, after=3))
        if pipes < 2 or outcome is not None:
            continue
        k = len(_play(spec, seed, _through_pipes(1, after=3))[0])
        note = PILOT.format(what="joined just after the first pipe, through the second gap")
        if add(f"flappybird-seed{seed}-second-pipe", seed, acts[:k], acts[k:], note):
            break
    # the crashes: the clip opens a few steps before the held action starts
    for hold, dist, tag in (("Flap", 60, "flap-into-pipe"), ("Idle", 48, "sink-onto-pipe")):
        for seed in seeds:
            held_from: list[int] = []
            acts, outcome, pipes = _play(spec, seed, _crash(hold, dist, held_from))
            if outcome != "Terminated" or pipes:
                continue
            k = max(0, held_from[0] - 4)
            note = CRASH.format(action=hold, dist=dist)
            if add(f"flappybird-seed{seed}-{tag}", seed, acts[:k], acts[k:], note, fail=True):
                break
    return clips.plans, [clips.pool]


# benchmarks/policy_audit.py: this game's expert, and its players in the order tried
AUDIT_EXPERT = "scripted pilot"
AUDIT_POLICIES: list[tuple[str, Callable[[VicalEnv], str]]] = [("pilot", pilot)]
