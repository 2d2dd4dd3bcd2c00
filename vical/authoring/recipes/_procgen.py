"""Shared demo recipe of the Procgen games (bigfish, bossfight, caveflyer, dodgeball,
heist, leaper, ninja).

Every Procgen task is one fixed level (``start_level`` = the task seed), so the
clips play other levels: seeds that no task of the environment uses, which
show the same rules on a different layout. Per *label group* (tasks whose
settings, targets and pass parameters are equal, so that one action list
replays to one label on all of them) the recipe makes:

- expert clips: :func:`vical.authoring.search.procgen_beam` (beam search with
  Procgen's get_state/set_state, the benchmark's own score as objective) over
  a whole level, on the first unused levels whose expert run passes within a
  length window;
- a clip joined midway: the first part of an expert run on one more level is
  the clip's ``init_actions``, and the search runs again from there;
- a failure clip: a scripted or seeded-random policy played from a level's
  opening until the episode ends in a loss; the last ``fail_len`` decisions are
  the clip and everything before is its ``init_actions``, so it shows the
  lead-up to the loss.

A clip made for one group also goes into every other group's pool on which it
replays to the same label (checked on a render-free twin of the game), so
failures and level-completing runs are shared across target groups.

A game's recipe module states its settings as ``RECIPE``, a :class:`ProcgenRecipe`
(called with the spec, it is :func:`procgen_recipe`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from vical.authoring.plan import ClipPlan, Pool, replayed, variant_task
from vical.authoring.search import procgen_beam
from vical.demos.render import clip_outcome, clip_task
from vical.envs.environment import VicalEnv
from vical.envs.procgen import GameState, ProcgenAdapter, Reader, make_adapter
from vical.spec import DemoClip, EnvSpec, TaskSpec

# Unused levels are looked for from this seed on (task seeds are all below it).
FIRST_SEED = 1000

SEARCH_NOTE = (
    "search expert: beam search over the canonical actions with Procgen get_state/set_state "
    "and the task's own score as objective (vical.envs.procgen.search_expert, width {w}), "
    "on level {seed}, which no task of this game uses"
)

# A failure policy picks the next action from (render-free env, rng, decision index);
# None stops the run there (the clip then ends in a Time Out).
Policy = Callable[[VicalEnv, random.Random, int], str | None]


def held(name: str) -> Policy:
    """One action held for the whole episode."""
    return lambda env, rng, t: name


def random_held(hold: int = 4, among: tuple[str, ...] = ()) -> Policy:
    """Seeded random actions (from ``among``, default all), each held 1 to ``hold`` decisions."""
    state: dict[str, Any] = {"cur": None, "left": 0}

    def pick(env: VicalEnv, rng: random.Random, t: int) -> str:
        if t == 0:
            state["left"] = 0
        if state["left"] <= 0:
            state["cur"] = rng.choice(list(among) or env.action_names)
            state["left"] = rng.randint(1, hold)
        state["left"] -= 1
        cur: str = state["cur"]
        return cur

    return pick


@dataclass(frozen=True)
class ProcgenRecipe:
    """How to make one Procgen game's clips (see the module docstring)."""

    wins: int  # whole-level expert clips per label group
    win_len: tuple[int, int]  # accepted expert run lengths, in decisions
    horizon: int  # search horizon (decisions)
    fail_policy: Policy
    fail_len: int  # decisions of the failure clip
    fail_note: str
    width: int = 16
    midway: bool = True  # one more expert clip joined midway through a level
    midway_len: tuple[int, int] = (10, 40)
    fails: int = 1  # failure clips (made once, shared by every group they replay in)
    fail_limit: int = 200  # decisions a failure run may take to reach its loss
    fail_every: bool = False  # every package gets a failure (dying costs the task)
    fail_tries: int = 40  # policy seeds tried per level for a loss
    # extra acceptance test on a level's opening state (e.g. the boss's health)
    level_ok: Callable[[GameState], bool] | None = None
    # label of a failure clip (heist has no death: its failure runs out of time)
    fail_label: str = "Terminated"
    # plan expert clips per target group (False where targets change the score, not labels)
    target_groups: bool = True

    def __call__(self, spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
        return procgen_recipe(spec, self)


def label_groups(spec: EnvSpec, targets: bool = True) -> list[list[str]]:
    """Task variants whose clips replay alike: equal settings, pass parameters and (with
    ``targets``) targets."""
    groups: dict[str, list[str]] = {}
    for v in spec.tasks:
        t = TaskSpec(env=spec, variant=v)
        key = repr(
            (
                sorted(t.env_kwargs.items()),
                sorted((k, x.value) for k, x in t.targets.items()) if targets else (),
                sorted(t.params.items()),
            )
        )
        groups.setdefault(key, []).append(v.variant)
    return list(groups.values())


def _probe(cid: str, seed: int, init: list[str], actions: list[str]) -> DemoClip:
    return DemoClip(
        id=cid,
        seed=seed,
        init_actions=init,
        actions=actions or ["-"],
        label="Victory",
        source="scripted probe (never stored)",
    )


def _fast_env(base: TaskSpec, seed: int, init: list[str], horizon: int) -> VicalEnv:
    """A render-free env at a clip start (level ``seed`` after ``init``) with ``horizon`` decisions."""
    t = clip_task(base, _probe("probe", seed, init, []))
    t = TaskSpec(env=t.env, variant=t.variant.model_copy(update={"max_steps": horizon}))
    return VicalEnv(t, make_adapter(t, render=False))


def _start_task(base: TaskSpec, seed: int, init: list[str], horizon: int) -> TaskSpec:
    t = clip_task(base, _probe("probe", seed, init, []))
    return TaskSpec(env=t.env, variant=t.variant.model_copy(update={"max_steps": horizon}))


def fast_label(base: TaskSpec, seed: int, init: list[str], actions: list[str]) -> str | None:
    """The label the clip replays to on ``base``'s settings (render-free), or None if it
    cannot start there or ends before its last action."""
    try:
        env = _fast_env(base, seed, init, len(actions))
    except RuntimeError:
        return None
    try:
        env.reset()
        s = None
        for a in actions:
            if env.done:
                return None
            s = env.step(a)
        assert s is not None
        return clip_outcome(s.outcome, s.passed)
    except Exception:
        return None
    finally:
        env.close()


def _opening_state(base: TaskSpec, seed: int) -> GameState:
    env = _fast_env(base, seed, [], 1)
    try:
        env.reset()
        return cast(ProcgenAdapter, env.adapter).state()
    finally:
        env.close()


def expert_run(
    base: TaskSpec, seed: int, init: list[str], horizon: int, width: int
) -> list[str] | None:
    """Search-expert actions from a start that pass the task, or None."""
    r = procgen_beam(_start_task(base, seed, init, horizon), width=width)
    if not r.passed or not r.actions:
        return None
    label = fast_label(base, seed, init, r.actions)
    return r.actions if label == "Victory" else None


def failure_run(
    base: TaskSpec, seed: int, policy: Policy, recipe: ProcgenRecipe
) -> tuple[list[str], list[str]] | None:
    """(init actions, clip actions): the policy's play on a level up to its loss, cut
    so the clip holds the last ``fail_len`` decisions and ends in ``fail_label``."""
    for k in range(recipe.fail_tries):
        rng = random.Random(1000 * seed + k)
        env = _fast_env(base, seed, [], recipe.fail_limit)
        try:
            env.reset()
            acts: list[str] = []
            while not env.done:
                a = policy(env, rng, len(acts))
                if a is None:
                    break
                env.step(a)
                acts.append(a)
        finally:
            env.close()
        if len(acts) < recipe.fail_len:
            continue
        init, clip = acts[: -recipe.fail_len], acts[-recipe.fail_len :]
        if fast_label(base, seed, init, clip) == recipe.fail_label:
            return init, clip
    return None


@dataclass
class _Clip:
    id: str
    seed: int
    init: list[str]
    actions: list[str]
    label: str
    note: str
    on: str


def procgen_recipe(spec: EnvSpec, recipe: ProcgenRecipe) -> tuple[list[ClipPlan], list[Pool]]:
    """Plans (replays of actions found here) and per-label-group pools for one Procgen game."""
    groups = label_groups(spec, recipe.target_groups)
    used = {v.seed for v in spec.tasks}
    env = spec.env
    note = SEARCH_NOTE
    clips: list[_Clip] = []
    own: dict[int, list[str]] = {}
    seed = FIRST_SEED
    for gi, group in enumerate(groups):
        base = variant_task(spec, group[0])
        own[gi] = []
        found, midway_done, tried = 0, not recipe.midway, 0
        while (found < recipe.wins or not midway_done) and tried < 60:
            seed, tried = seed + 1, tried + 1
            if seed in used:
                continue
            if recipe.level_ok is not None and not recipe.level_ok(_opening_state(base, seed)):
                continue
            acts = expert_run(base, seed, [], recipe.horizon, recipe.width)
            if acts is None:
                continue
            lo, hi = recipe.win_len
            if found < recipe.wins and lo <= len(acts) <= hi:
                cid = f"{env}-level{seed}-expert"
                clips.append(
                    _Clip(
                        cid,
                        seed,
                        [],
                        acts,
                        "Victory",
                        note.format(w=recipe.width, seed=seed),
                        group[0],
                    )
                )
                own[gi].append(cid)
                found += 1
            elif not midway_done and len(acts) >= 12:
                k = len(acts) // 3
                rest = expert_run(base, seed, acts[:k], recipe.horizon, recipe.width)
                lo, hi = recipe.midway_len
                if rest is not None and lo <= len(rest) <= hi:
                    cid = f"{env}-level{seed}-from-step{k}"
                    clips.append(
                        _Clip(
                            cid,
                            seed,
                            acts[:k],
                            rest,
                            "Victory",
                            note.format(w=recipe.width, seed=seed)
                            + f"; the clip joins the level after the first {k} decisions of an "
                            "earlier expert run and the search continues from there",
                            group[0],
                        )
                    )
                    own[gi].append(cid)
                    midway_done = True
    # failures: on the first group's settings, shared wherever they replay alike
    base0 = variant_task(spec, groups[0][0])
    made, tried = 0, 0
    while made < recipe.fails and tried < 40:
        seed, tried = seed + 1, tried + 1
        if seed in used:
            continue
        run = failure_run(base0, seed, recipe.fail_policy, recipe)
        if run is None:
            continue
        init, acts = run
        cid = f"{env}-level{seed}-loss"
        clips.append(
            _Clip(
                cid,
                seed,
                init,
                acts,
                recipe.fail_label,
                recipe.fail_note + f" (level {seed}, which no task of this game uses)",
                groups[0][0],
            )
        )
        made += 1
    pools = []
    for gi, group in enumerate(groups):
        base = variant_task(spec, group[0])
        pool = Pool(variants=group, fail_every=recipe.fail_every)
        foreign = [c for c in clips if c.id not in own[gi]]
        for c in [*(c for c in clips if c.id in own[gi]), *foreign]:
            if c.id in own[gi] or fast_label(base, c.seed, c.init, c.actions) == c.label:
                (pool.wins if c.label == "Victory" else pool.fails).append(c.id)
        pools.append(pool)
    plans = [
        ClipPlan(
            c.id,
            replayed(c.actions),
            c.note,
            c.seed,
            init_actions=c.init,
            horizon=len(c.actions),
            on=c.on,
        )
        for c in clips
    ]
    return plans, pools


def bossfight_rounds(st: GameState) -> tuple[int, int]:
    """(rounds, hits per round) of a bossfight level, from the game's own serialised fields."""
    r = Reader(st.extra)
    for _ in range(r.i()):  # the attack mode of every round
        r.i()
    r.skip("4i")  # last fire time, time to swap, invulnerable and vulnerable durations
    rounds = r.i()
    r.i()  # current round
    return rounds, r.i()
