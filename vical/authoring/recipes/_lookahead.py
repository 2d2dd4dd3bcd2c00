"""Look-ahead demo recipe shared by six ALE games (River Raid, Road Runner,
Seaquest, Tennis, TRON Deadly Discs, Turmoil).

These games have no seeded ``policy`` for :func:`vical.authoring.recipes._ale.ale_recipe`, but
their modules' tests use one search expert that passes every game:
:func:`vical.authoring.search.lookahead_play`, a one-step look-ahead over
seeded random rollouts on the task's own :class:`~vical.envs.environment.VicalEnv` (so the
adapter's scoring state, e.g. Tennis's point count, is saved and restored with the
emulator). A :class:`GameDemos` says how to use it for one game (a game's recipe
module holds it as ``RECIPE``); :func:`lookahead_recipe` (the same as calling the
``GameDemos`` with the spec) turns that into ``(plans, pools)`` for
:func:`vical.authoring.make.make_demos`:

* tasks are grouped by everything that changes how a clip replays or is labelled:
  simulator kwargs, ``params`` (River Raid's RAM section and fuel, Trondead's RAM
  level) and targets (Trondead's per-level pass thresholds);
* each group gets expert clips from its own settings, started from shifted
  openings (extra skipped frames) and from warmed-up states (a few deathless expert
  decisions stored as the clip's ``init_actions``), plus a failure clip that holds
  one careless action until a life is lost (which ends the episode in every one of
  these games);
* a group whose tasks differ from an earlier group only where a clip does not
  notice (``GameDemos.share``, e.g. River Raid tasks of one section with different
  fuel) reuses that group's clips when each of them replays, on every task of the
  new group, to the label it was made with and from a frame that is not the task's
  opening; otherwise the group makes its own.

Everything is seeded: the same task files give the same clips.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from vical.authoring.experts import replay_actions
from vical.authoring.plan import ClipPlan, Pool, first_passing, variant_task
from vical.authoring.search import lookahead_play, progress_value
from vical.demos.experts import ExpertResult
from vical.demos.render import ClipReplayError, clip_task, replay_clip, task_start_sha256
from vical.envs import make_env
from vical.spec import DemoClip, EnvSpec, TaskSpec, TaskVariant

# long enough for any warm-up or failure run; the clip itself gets its own horizon
_LONG = 400


@dataclass(frozen=True)
class GameDemos:
    """How one game's clips are made.

    ``moves``/``depth``/``tails``/``value``: the look-ahead expert (as in the game's
    tests). ``wins``: per expert clip, (extra skipped frames, warm-up decisions, clip
    decisions); groups after the first of a sharing key take only the first
    ``later_wins`` of them. ``fail_action`` is held from ``fail_start`` (extra skip,
    warm-up decisions) until a life is lost; the clip keeps the last ``fail_len``
    decisions. ``fail_every``: every package shows the failure.
    """

    moves: tuple[str, ...]
    depth: int
    tails: int
    wins: tuple[tuple[int, int, int], ...]
    fail_action: str
    fail_start: tuple[int, int]
    fail_len: int
    fail_note: str
    value: Callable[[Any], float] = progress_value
    share: Callable[[TaskVariant], Hashable] | None = None
    later_wins: int = 1
    fail_every: bool = False
    seeds: tuple[int, ...] = (0, 1, 2, 3)

    def __call__(self, spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
        return lookahead_recipe(self, spec)

    def actions(self, task: TaskSpec, n: int, seed: int) -> list[str]:
        """The look-ahead player's decisions on ``task`` (at most ``n``; seeded)."""
        return _play(self, task, n, seed)[0]

    def note(self) -> str:
        # stored in the task files as the clips' ``source``: keeps the module path the
        # clips were made under (changing it would change the data)
        return (
            "search expert: one-step look-ahead over seeded random rollouts of "
            f"{self.depth} decisions ({self.tails} per move, moves {'/'.join(self.moves)}) "
            "with the emulator's cloneState/restoreState, losing a life penalised "
            "(vical.authoring.search.lookahead_play)"
        )


def settings_key(task: TaskSpec) -> str:
    """Everything that changes how a clip replays or which label it earns on a task."""
    targets = sorted((k, t.value) for k, t in task.targets.items())
    return repr((sorted(task.env_kwargs.items()), sorted(task.params.items()), targets))


def exact_groups(spec: EnvSpec) -> list[list[str]]:
    """Task variants grouped by :func:`settings_key`, in file order."""
    groups: dict[str, list[str]] = {}
    for v in spec.tasks:
        groups.setdefault(settings_key(TaskSpec(env=spec, variant=v)), []).append(v.variant)
    return list(groups.values())


def _start_task(
    spec: EnvSpec, on: str, skip: int, init: list[str], horizon: int = _LONG
) -> TaskSpec:
    base = variant_task(spec, on)
    probe = DemoClip(
        id="probe",
        seed=base.variant.seed,
        initial_skip=skip,
        init_actions=init,
        actions=["NOOP"],
        label="Victory",
        source="scripted probe (never stored)",
    )
    t = clip_task(base, probe)
    return TaskSpec(env=spec, variant=t.variant.model_copy(update={"max_steps": horizon}))


def _start_hash(spec: EnvSpec, on: str, skip: int, init: list[str]) -> str | None:
    try:
        return task_start_sha256(_start_task(spec, on, skip, init))
    except RuntimeError:  # the game ends before this start
        return None


def _play(game: GameDemos, task: TaskSpec, n: int, seed: int) -> tuple[list[str], bool]:
    """The look-ahead expert's (at most) ``n`` decisions from the task's start, and whether
    the episode is over after them."""
    env = make_env(task)
    try:
        env.reset()
        acts = lookahead_play(
            env,
            n,
            list(game.moves),
            depth=game.depth,
            seed=seed,
            tails=game.tails,
            value=game.value,
        )
        return acts, env.done
    finally:
        env.close()


def _warm(
    game: GameDemos, spec: EnvSpec, on: str, skip: int, n: int, seed: int
) -> list[str] | None:
    """``n`` expert decisions from (skip) that neither end the episode nor lose a life."""
    if n == 0:
        return []
    try:
        acts, over = _play(game, _start_task(spec, on, skip, []), n, seed)
    except RuntimeError:
        return None
    return None if over or len(acts) < n else acts


def _expert_clip(
    game: GameDemos, spec: EnvSpec, on: str, skip: int, init: list[str], n: int
) -> ExpertResult | None:
    """The look-ahead expert's ``n`` decisions from a start; among a few seeds, the
    first whose clip passes, else the one scoring most without losing."""
    t = _start_task(spec, on, skip, init, horizon=n)
    return first_passing(replay_actions(t, _play(game, t, n, s)[0]) for s in game.seeds)


def _failure(
    game: GameDemos, spec: EnvSpec, on: str, skip: int, init: list[str]
) -> tuple[list[str], list[str]] | None:
    """(warm-up + lead-in, clip decisions): ``fail_action`` held until a life is lost."""
    env = make_env(_start_task(spec, on, skip, init))
    try:
        env.reset()
        acts = []
        while not env.done:
            s = env.step(game.fail_action)
            acts.append(game.fail_action)
        if s.outcome != "Terminated" or s.passed:  # a failure clip shows a failure
            return None
    except RuntimeError:
        return None
    finally:
        env.close()
    cut = max(0, len(acts) - game.fail_len)
    return init + acts[:cut], acts[cut:]


def _fixed(actions: list[str]) -> Callable[[TaskSpec], ExpertResult]:
    acts = list(actions)
    return lambda t: replay_actions(t, acts)


def _label(spec: EnvSpec, on: str, clip: DemoClip) -> str | None:
    try:
        return replay_clip(variant_task(spec, on), clip, check_label=False).outcome
    except ClipReplayError:
        return None


def _fits(spec: EnvSpec, variants: list[str], clip: DemoClip, openings: dict[str, str]) -> bool:
    """The clip replays on every one of ``variants`` to its label, not from the opening."""
    for v in variants:
        try:
            r = replay_clip(variant_task(spec, v), clip)
        except (ClipReplayError, RuntimeError):
            return False
        if r.start_sha256 == openings[v]:
            return False
    return True


def lookahead_recipe(game: GameDemos, spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
    """Clip plans and pools for one game (see the module docstring)."""
    openings = {v.variant: task_start_sha256(TaskSpec(env=spec, variant=v)) for v in spec.tasks}
    # may hold None (an unreachable clip start, see below)
    taken: set[str | None] = set(openings.values())
    plans: list[ClipPlan] = []
    pools: list[Pool] = []
    # per sharing key: clips made so far, as (clip, is_win)
    made: dict[Hashable, list[tuple[DemoClip, bool]]] = {}
    for gi, group in enumerate(exact_groups(spec)):
        on = group[0]
        base = variant_task(spec, on)
        skip0 = base.variant.initial_skip
        key = game.share(base.variant) if game.share else gi
        earlier = made.setdefault(key, [])
        pool = Pool(variants=list(group), fail_every=game.fail_every)
        for clip, win in earlier:
            if _fits(spec, group, clip, openings):
                (pool.wins if win else pool.fails).append(clip.id)
        tag = "-".join(f"{k}{x}" for k, x in base.variant.params.items())
        prefix = f"{spec.env}-{tag}" if tag else spec.env
        new: list[tuple[DemoClip, bool, ClipPlan] | None] = []
        if not pool.wins:
            wins = game.wins if not earlier else game.wins[: game.later_wins]
            for j, (shift, warm_n, n) in enumerate(wins):
                start = _clip_start(game, spec, on, skip0 + shift, warm_n, 100 * gi + j, taken)
                if start is None:
                    continue
                skip, init = start
                res = _expert_clip(game, spec, on, skip, init, n)
                if res is None or not res.actions:
                    continue
                cid = f"{prefix}-k{skip}-w{len(init)}-expert"
                new.append(_made(spec, on, cid, skip, init, res.actions, game.note(), True))
        if not pool.fails:
            shift, warm_n = game.fail_start
            start = _clip_start(game, spec, on, skip0 + shift, warm_n, 100 * gi + 50, taken)
            fail = None
            if start is not None:
                skip, init = start
                fail = _failure(game, spec, on, skip, init)
            if fail is not None:
                lead, acts = fail
                if _start_hash(spec, on, skip, lead) not in taken:
                    cid = f"{prefix}-k{skip}-w{len(lead)}-loss"
                    new.append(_made(spec, on, cid, skip, lead, acts, game.fail_note, False))
        for clip, win, plan in filter(None, new):
            taken.add(_start_hash(spec, on, clip.initial_skip, clip.init_actions))
            plans.append(plan)
            # an expert run that lost a life shows a loss, not a win
            win = win and clip.label != "Terminated"
            earlier.append((clip, win))
            (pool.wins if win else pool.fails).append(clip.id)
        # groups that ended up with the same clips share one pool, so that the
        # assignment varies (budgets, failure second) across all of their tasks
        same = next((p for p in pools if (p.wins, p.fails) == (pool.wins, pool.fails)), None)
        if same is not None:
            same.variants.extend(pool.variants)
        else:
            pools.append(pool)
    return plans, pools


def _made(
    spec: EnvSpec,
    on: str,
    cid: str,
    skip: int,
    init: list[str],
    actions: list[str],
    note: str,
    win: bool,
) -> tuple[DemoClip, bool, ClipPlan] | None:
    """The clip labelled by its own replay on ``on``, with the plan that remakes it."""
    seed = variant_task(spec, on).variant.seed
    clip = DemoClip(
        id=cid,
        seed=seed,
        initial_skip=skip,
        init_actions=list(init),
        actions=list(actions),
        label="Victory",
        source=note,
    )
    label = _label(spec, on, clip)
    if label is None:
        return None
    plan = ClipPlan(
        cid, _fixed(actions), note, seed, skip, init_actions=list(init), horizon=len(actions), on=on
    )
    return clip.model_copy(update={"label": label}), win, plan


def _clip_start(
    game: GameDemos,
    spec: EnvSpec,
    on: str,
    skip: int,
    warm_n: int,
    warm_seed: int,
    taken: set[str | None],
) -> tuple[int, list[str]] | None:
    """(skip, warm-up) of a start no task opens on and no clip starts from; on a clash or
    a failed warm-up the skip grows a frame at a time."""
    for extra in range(6):
        init = _warm(game, spec, on, skip + extra, warm_n, warm_seed + extra)
        if init is None:
            continue
        h = _start_hash(spec, on, skip + extra, init)
        if h is not None and h not in taken:
            return skip + extra, init
    return None
