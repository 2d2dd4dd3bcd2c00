"""The task data against the paper's structural statistics.

Each test names the table or section it holds the data to; a change to the task
files that drifts from the paper fails here. Numbers live in ``vical/paper.py``.
Only the paper's 37 environments are held to the paper: an environment added from
a folder on ``$VICAL_TASKS_DIR`` is not one of them (``vical.paper.ENVS`` names them).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import per_env_sweep, spread

from vical import paper
from vical.demos.packages import pack_env
from vical.demos.render import clip_task
from vical.demos.stats import demo_stats
from vical.envs import make_env
from vical.envs.actions import is_combo
from vical.envs.core import frame_sha256
from vical.paper import ENVS, FIGURE5, TABLE25, TABLE28, TOTAL_COMBOS, TOTAL_TASKS, TYPE_TASKS
from vical.spec import (
    ENV_TYPES,
    DemoClip,
    TaskSpec,
    all_tasks,
    check_provenance,
    get_task,
    load_envs,
    numeric_keys,
)

# the paper's environments as loaded; an added environment is left out
LOADED = {k: spec for k, spec in load_envs().items() if k in ENVS}
ALL_TASKS = [t for t in all_tasks() if t.env.env in ENVS]
ENV_KEYS = sorted(LOADED)


# --- Tables 7, 8, 9 and 26: counts, budgets, seeds, skips, vocabularies -------------


@pytest.mark.parametrize("key", ENV_KEYS)
def test_counts_match_table9(key):
    spec, ref = LOADED[key], ENVS[key]
    kinds = Counter(t.kind for t in spec.tasks)
    assert spec.paper_id == ref.paper_id
    assert (kinds["base"], kinds["parameterized"], kinds["human-init"]) == (
        ref.base,
        ref.parameterized,
        ref.human_init,
    )
    for t in spec.tasks:
        has_seq = bool(t.init_actions)
        if t.kind == "parameterized":
            assert not has_seq, f"{key}/{t.variant}: parameterized variants have no sequence"
        if t.kind == "human-init":
            assert has_seq, f"{key}/{t.variant}: human-init variants replay a sequence"


@pytest.mark.parametrize("key", ENV_KEYS)
def test_action_space_matches_table26(key):
    spec, ref = LOADED[key], ENVS[key]
    assert len(spec.actions) == ref.actions
    assert sum(is_combo(name) for name in spec.actions) == ref.combos
    assert len(set(spec.actions)) == len(spec.actions)


@pytest.mark.parametrize("key", ENV_KEYS)
def test_horizons_skips_and_seeds_match_tables7_8(key):
    spec, ref = LOADED[key], ENVS[key]
    assert spec.frame_skip == ref.frame_skip
    assert spec.action_steps == ref.action_steps
    # Table 7 and 8 list every value used across the environment's tasks: the
    # sets are equal, not merely contained.
    horizons = {t.max_steps or spec.max_steps for t in spec.tasks}
    assert horizons == ref.max_steps, (
        f"budgets {sorted(horizons)} != Table 7 {sorted(ref.max_steps)}"
    )
    assert {t.seed for t in spec.tasks} == ref.seeds
    skips = {t.initial_skip for t in spec.tasks} - {0}
    assert skips == ref.initial_skips


def test_every_environment_and_task_of_the_paper_is_present():
    assert sorted(LOADED) == sorted(ENVS), "environments differ from paper Table 9"
    assert len(ALL_TASKS) == TOTAL_TASKS == 342
    assert len({t.id for t in ALL_TASKS}) == len(ALL_TASKS)
    assert sum(is_combo(a) for s in LOADED.values() for a in s.actions) == TOTAL_COMBOS


# --- Tables 16-18: the paper's logged successes replay on our tasks -------------------

# (task, actions, the table's step count). Each table logs a whole successful
# episode; replaying its actions from our start state must succeed on exactly the
# last one, so our seeds, layouts and action names reproduce the paper's tasks.
PAPER_TRACES = {
    "Table 16": (
        "taxi/state4",
        "Up Up Pickup Left Left Down Down Left Left Up Up Dropoff",
        12,
    ),
    "Table 17": (
        "lavacrossing/seed1952",
        "Right Forward Forward Left " + "Forward " * 8 + "Right " + "Forward " * 6,
        19,
    ),
    "Table 18": (
        "unlockpickup/room7-seed3445",
        "Right Forward Pickup Left Forward Forward Right Forward Forward Toggle Right Drop "
        "Left Forward Forward Forward Pickup",
        17,
    ),
}


@pytest.mark.parametrize("table", sorted(PAPER_TRACES))
def test_paper_trace_succeeds_on_its_last_step(table):
    task_id, actions, n = PAPER_TRACES[table]
    trace = actions.split()
    assert len(trace) == n
    env = make_env(get_task(task_id))
    env.reset()
    for i, action in enumerate(trace):
        step = env.step(action)
        assert step.done == (i == n - 1), f"{task_id}: step {i + 1} ({action})"
    assert step.outcome == "Victory" and step.passed and step.score == 100.0


def test_taxi_state4_is_the_table16_start():
    """Table 16's rationale: the taxi two cells below the passenger at G, drop-off at R."""
    env = make_env(get_task("taxi/state4"))
    env.reset()
    raw = env.adapter.env
    row, col, passenger, destination = raw.decode(int(raw.s))
    assert (row, col) == (2, 4)
    assert tuple(raw.locs[passenger]) == (0, 4) and tuple(raw.locs[destination]) == (0, 0)


# --- Table 1 columns: game type, memory and dynamics tags (Tables 1, 24, 25, 28; docs/paper-tags.md) ---
#
# Table-1 tags (game type, memory, dynamics) against the paper's structure.
#
# The derivation is in ``docs/paper-tags.md``. Each test names the table it holds
# the tags to; numbers live in ``vical/paper.py``. A change to any ``tags:`` block
# that drifts from the paper fails here.


# Table 25 and Table 28 count the same 1,368 leading-model episodes. Overall,
# 506 failures end in the environment against 502 early deaths in Table 28, so
# a type's early terminations may exceed its early deaths by at most 4. This is
# checked per type; the strict reading (one placement of the 4 runs for every type
# at once, tested further down) is not met by the chosen tags.
ET_SLACK = 506 - 502


def _members(tag: str) -> set[str]:
    return {k for k, s in LOADED.items() if tag in s.tags.types}


def _task_count(keys) -> int:
    return sum(len(LOADED[k].tasks) for k in keys)


def _early_deaths(key: str) -> int:
    row = TABLE28[key]
    return round(row.n * row.early_death / 100)


def _budget_reached(key: str) -> int:
    row = TABLE28[key]
    return row.n - round(row.n * row.early_death / 100) - round(row.n * row.early_success / 100)


def test_table28_pools_every_task_four_times():
    # The per-environment outcome counts below assume n = 4 x tasks.
    for key, spec in LOADED.items():
        assert TABLE28[key].n == 4 * len(spec.tasks), key
    assert sum(_early_deaths(k) for k in LOADED) == 502
    assert sum(_budget_reached(k) for k in LOADED) == 500


@pytest.mark.parametrize("tag", ENV_TYPES)
def test_type_task_counts_match_table25(tag):
    # Table 25 "all" episodes are 4 x the tasks carrying the type.
    assert _task_count(_members(tag)) == TYPE_TASKS[tag]


def test_control_is_the_three_classic_control_tasks():
    # Table 25: 16 Control failures = 12 in-environment (CartPole's 12 early
    # deaths in Table 28) + 4 timeouts; Table 1 Control pass rates are
    # multiples of 1/15 (three 5-task environments).
    assert _members("Control") == {"acrobot", "cartpole", "mountaincar"}


def test_sport_is_pong_and_tennis():
    # Table 25: 14 Sport failures = 12 in-environment (Tennis's 12 early deaths)
    # + 2 timeouts (Pong, which always reaches its budget); Table 1 Sport pass
    # rates are multiples of 10 (two 5-task environments).
    assert _members("Sport") == {"pong", "tennis"}


def test_collect_is_eight_five_task_environments():
    # Table 1 Collect pass rates are all multiples of 2.5 (k/40 averaged over
    # eight 5-task environments), and the four leading models' Collect pass
    # rates then give 84 passes in 160 episodes = Table 25's 76 failures.
    members = _members("Collect")
    assert len(members) == 8
    assert all(len(LOADED[k].tasks) == 5 for k in members)


def test_memory_split_matches_table1():
    # Regressing Table 1's All on Single/Multiple (equal weight per environment)
    # gives four Single environments; Single pass rates are multiples of 5,
    # so each has 5 tasks.
    single = {k for k, s in LOADED.items() if s.tags.memory == "Single"}
    assert len(single) == 4
    assert all(len(LOADED[k].tasks) == 5 for k in single)
    # Section 4.2 names Taxi as a current-frame task.
    assert "taxi" in single


def test_dynamics_split_matches_table1():
    # The same regression on Static/Dynamic gives ten Static environments;
    # Section 4.2 names Toy Text and MiniGrid as static.
    static = {k for k, s in LOADED.items() if s.tags.dynamics == "Static"}
    assert len(static) == 10
    assert {"taxi", "cliffwalking", "lavacrossing", "multiroom", "unlockpickup"} <= static
    # The issue that introduced provenance notes: nothing in Heist moves by itself.
    assert "heist" in static


@pytest.mark.parametrize("tag", ENV_TYPES)
def test_type_failures_consistent_with_table28(tag):
    failed, _all, et_pct, _to_pct = TABLE25[tag]
    early = round(failed * et_pct / 100)
    timeouts = failed - early
    members = _members(tag)
    deaths = sum(_early_deaths(k) for k in members)
    budget = sum(_budget_reached(k) for k in members)
    # Every early death is an in-environment failure; at most ET_SLACK
    # in-environment failures are not early deaths.
    assert deaths <= early <= deaths + ET_SLACK, (tag, deaths, early)
    # A timeout is a failed episode that reached its budget.
    assert timeouts <= budget, (tag, timeouts, budget)


def test_table1_means_reproduce_overall_columns():
    # Table 1's All column is the mean over 37 equally weighted environments, so
    # the Single/Multiple and Static/Dynamic columns must average back to it
    # with the counts the tags give (Seed-2.1-Pro and the random row, S).
    n_single = sum(s.tags.memory == "Single" for s in LOADED.values())
    n_static = sum(s.tags.dynamics == "Static" for s in LOADED.values())
    n = len(LOADED)
    for single, multiple, static, dynamic, overall in (
        (68.9, 52.7, 74.3, 47.0, 54.4),
        (5.6, 15.0, 8.4, 16.1, 14.0),
    ):
        assert (n_single * single + (n - n_single) * multiple) / n == pytest.approx(
            overall, abs=0.1
        )
        assert (n_static * static + (n - n_static) * dynamic) / n == pytest.approx(overall, abs=0.1)


def test_dodge_environment_count_fits_table1():
    # Table 1, Qwen3-Omni-30B scores: Dodge 15.6, Control 19.5, Sport 16.7,
    # Multiple 12.8. When the Dodge, Control and Sport environments are all
    # Multiple-memory and pairwise disjoint, their score totals cannot exceed
    # the Multiple column's total (scores are >= 0). This caps Dodge at 21
    # environments, which rules out keeping every small Dodge game and
    # dropping only a 25-task one (docs/paper-tags.md).
    dodge, control, sport = _members("Dodge"), _members("Control"), _members("Sport")
    multiple = {k for k, s in LOADED.items() if s.tags.memory == "Multiple"}
    assert dodge | control | sport <= multiple
    assert not (dodge & control or dodge & sport or control & sport)
    lower = (15.6 - 0.05) * len(dodge) + (19.5 - 0.05) * len(control)
    lower += (16.7 - 0.05) * len(sport)
    assert lower <= (12.8 + 0.05) * len(multiple)


@pytest.mark.parametrize("key", ENV_KEYS)
def test_every_tags_block_names_its_evidence(key):
    note = LOADED[key].tags.provenance
    assert note and note.strip().startswith("paper:"), key


def test_tags_match_the_derivation_table():
    # docs/paper-tags.md ends with the assignment it argues for; the task files
    # and the document must not drift apart.
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "paper-tags.md"
    text = doc.read_text(encoding="utf-8")
    table = text[text.index("## Final assignment") :]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in LOADED:
            rows[cells[0]] = (set(cells[1].split(", ")), cells[2], cells[3])
    assert set(rows) == set(LOADED)
    for key, (types, memory, dynamics) in rows.items():
        tags = LOADED[key].tags
        assert (set(tags.types), tags.memory, tags.dynamics) == (types, memory, dynamics), key


# The strict reading of the Table 25 / Table 28 bookkeeping (docs/paper-tags.md, "The
# strict reading of the early-death bookkeeping"). The 4 in-environment failures that
# are not early deaths are runs, each in one environment and counted in every type of
# that environment, so one placement of them must explain every type's surplus at
# once. ``tests/strict_tags.py`` searches for tag assignments that allow one; these
# tests hold its result to the figures the document quotes.


def _surplus_need() -> dict[str, int]:
    need = {}
    for tag in ENV_TYPES:
        failed, _all, et_pct, _to_pct = TABLE25[tag]
        need[tag] = round(failed * et_pct / 100) - sum(_early_deaths(k) for k in _members(tag))
    return need


def test_strict_reading_rejects_the_chosen_tags():
    import strict_tags

    need = _surplus_need()
    assert need == {"Maze": 2, "Shooter": 3, "Control": 0, "Dodge": 3, "Collect": 3, "Sport": 0}
    members = {tag: frozenset(_members(tag)) for tag in ENV_TYPES}
    cap = strict_tags.surplus_capacity(strict_tags.load())
    assert not strict_tags.surplus_fits(members, need, cap)
    # the brute-force enumeration agrees
    assert strict_tags.surplus_placements(members, need, cap) == []


@pytest.fixture(scope="module")
def strict_assignments():
    import strict_tags

    return strict_tags.solve_menu()


def test_strict_reading_admits_the_documented_assignments(strict_assignments):
    import strict_tags

    d = strict_tags.load()
    sols = strict_assignments
    assert len(sols) == 13108
    by_flips = Counter(s.flips for s in sols)
    assert (by_flips[2], by_flips[4], by_flips[6], by_flips[8]) == (1, 17, 129, 628)
    assert sols[0].changes(d) == ["+Collect turmoil", "-Collect roadrunner"]
    doc = Path(__file__).resolve().parents[1] / "docs" / "paper-tags.md"
    assert "**13,108**" in doc.read_text(encoding="utf-8")
    # The fast check agrees with the brute-force placement of the 4 runs, and every
    # placement it lists gives each type exactly its surplus.
    cap = strict_tags.surplus_capacity(d)
    for s in sols[:18]:
        placements = strict_tags.surplus_placements(s.members, s.need, cap)
        assert placements
        for p in placements:
            assert all(sum(e in s.members[t] for e in p) == n for t, n in s.need.items())


def test_every_strict_assignment_carries_a_stated_conflict(strict_assignments):
    # docs/paper-tags.md: each assignment puts Turmoil in Collect, and either takes
    # Collect from a game whose score is collecting (RoadRunner, MsPacman, Asterix,
    # BigFish) or moves Tetris into Maze.
    collectors = {"roadrunner", "mspacman", "asterix", "bigfish"}
    for s in strict_assignments:
        assert "turmoil" in s.members["Collect"]
        assert collectors - s.members["Collect"] or "tetris" in s.members["Maze"]


# --- Table 28: early successes and early deaths are possible where the paper saw them ----
#
# Ending rules that agree with Table 28 (post-preload episode lengths by environment).
#
# Table 28 reports, per environment, the share of early successes (ES: the pass
# condition holds and the episode ended strictly before its decision budget) and
# early deaths (ED: an in-environment failure ended it before the budget without
# a pass), and the longest episode seen (``hi``). A non-zero column must be
# possible under vical's rules, and no environment's largest budget (Table 7)
# may be shorter than Table 28's longest episode.
#
# Everything is shown by running episodes through a task's own environment (its
# rules, its budget): demo clips' actions are replayed from the clip's start
# state with the budget of a task that lists the clip, and where no clip shows
# the ending a short scripted episode does. Nothing is cached between tests.


def test_every_environment_is_covered():
    assert len(ENV_KEYS) == 37 and set(ENV_KEYS) == set(TABLE28)


def _env_tasks(env: str) -> list[TaskSpec]:
    spec = LOADED[env]
    return [TaskSpec(env=spec, variant=v) for v in spec.tasks]


def _run(task: TaskSpec, actions: list[str]) -> tuple[int, str | None, bool, bool]:
    """Play ``actions`` until the episode ends: (steps, outcome, terminated, passed)."""
    env = make_env(task)
    try:
        env.reset()
        step = None
        for a in actions:
            if env.done:
                break
            step = env.step(a)
        assert step is not None
        return step.index, step.outcome, step.terminated, step.passed
    finally:
        env.close()


def _clip_under_budget(task: TaskSpec, clip: DemoClip) -> tuple[int, str | None, bool, bool]:
    """A clip's actions from its own start state, under the task's rules and budget."""
    ct = clip_task(task, clip)
    ct = TaskSpec(env=ct.env, variant=ct.variant.model_copy(update={"max_steps": task.max_steps}))
    return _run(ct, list(clip.actions))


def _clips(env: str, label: str):
    """(task, clip) for every distinct clip of the environment with the given label."""
    seen: set[str] = set()
    for t in _env_tasks(env):
        for c in t.variant.demos:
            if c.label == label and c.id not in seen:
                seen.add(c.id)
                yield t, c


# -- scripted episodes for endings no demo clip shows ----------------------------
def _flappy_pilot(env) -> str:
    from test_flappy import pilot  # the Flappy Bird tests' scripted pilot

    return pilot(env)


def _flappy_three_pipes():
    task = get_task("flappybird/seed47")
    env = make_env(task)
    try:
        env.reset()
        step = None
        while not env.done:
            step = env.step(_flappy_pilot(env))
        return task, (step.index, step.outcome, step.terminated, step.passed)
    finally:
        env.close()


# Berzerk: out through the top gap of the outer wall (a short life-safe beam search).
BERZERK_EXIT = ["Up", "Up+Right", "Up+Right", "Up+Left", "Up+Right", "Up+Left", "Up+Right"]
BERZERK_EXIT += ["Up+Right", "Up+Right", "Right+Shoot", "Up+Right", "Right", "Right", "Up+Right"]


def _berzerk_exit():
    task = get_task("berzerk/mode1")
    return task, _run(task, BERZERK_EXIT)


SCRIPTED_SUCCESS = {"flappybird": _flappy_three_pipes, "berzerk": _berzerk_exit}


# -- the tests ----------------------------------------------------------------------
@pytest.mark.parametrize("env", [e for e in ENV_KEYS if TABLE28[e].early_success > 0])
def test_early_success_is_possible_where_table28_reports_one(env):
    tried = []
    if env in SCRIPTED_SUCCESS:
        task, (steps, outcome, terminated, passed) = SCRIPTED_SUCCESS[env]()
        tried.append((task.id, "scripted", steps, outcome, passed))
        if terminated and passed and steps < task.max_steps:
            return
    for task, clip in _clips(env, "Victory"):
        steps, outcome, terminated, passed = _clip_under_budget(task, clip)
        tried.append((task.id, clip.id, steps, outcome, passed))
        if terminated and passed and steps < task.max_steps:
            return
    pytest.fail(f"{env}: no episode ended early with a pass; tried {tried}")


@pytest.mark.parametrize("env", [e for e in ENV_KEYS if TABLE28[e].early_death > 0])
def test_early_death_is_possible_where_table28_reports_one(env):
    tried = []
    for task, clip in _clips(env, "Terminated"):
        steps, outcome, terminated, passed = _clip_under_budget(task, clip)
        tried.append((task.id, clip.id, steps, outcome, passed))
        if terminated and outcome == "Terminated" and not passed and steps < task.max_steps:
            return
    pytest.fail(f"{env}: no episode ended early in an in-environment failure; tried {tried}")


@pytest.mark.parametrize("env", ENV_KEYS)
def test_largest_budget_covers_the_longest_episode(env):
    """The environment built for the task with the largest budget runs at least Table 28's
    longest episode before its cap."""
    task = max(_env_tasks(env), key=lambda t: t.max_steps)
    env_ = make_env(task)
    try:
        assert env_.max_steps == task.max_steps >= TABLE28[env].hi
    finally:
        env_.close()


# --- Table 28 in reverse: no early success where the paper saw none ------------------------
#
# Where Table 28 reports 0% early success, the leading models never ended an episode
# before its budget with a pass. A rule under which a trivial policy does so is then
# not the paper's rule, unless Table 7's wording for the game itself provides an early
# completion (a level finished) that the leading models simply never reached. Every
# constant action and the random reference (three seeded runs, seeded as ``vical
# baseline random`` seeds them) are played on each such environment: on its first
# task and its first human-init task in the default suite, on every task under the
# ``slow`` marker. ``benchmarks/policy_audit.py`` reports the same play with scores
# (docs/policy-audit.md).

# Environments with 0% early success whose Table 7 rule ends a completed level early:
# (the words of Table 7's row that provide it).
EARLY_SUCCESS_ALLOWED = {
    # a Procgen level ends when the frog reaches the far side: the cumulative reward
    # reaches one, the completion the rule normalises to
    "leaper": "Normalize cumulative reward to one",
    "dodgeball": "reward at least 10 marks completion",
}
NO_EARLY_SUCCESS = [
    e for e in ENV_KEYS if TABLE28[e].early_success == 0 and e not in EARLY_SUCCESS_ALLOWED
]
RANDOM_RUNS = 3


def _no_early_success_tasks():
    return per_env_sweep([t for t in ALL_TASKS if t.env.env in NO_EARLY_SUCCESS])


def test_the_reverse_check_covers_every_environment_without_early_success():
    zero = {e for e in ENV_KEYS if TABLE28[e].early_success == 0}
    assert zero == set(NO_EARLY_SUCCESS) | set(EARLY_SUCCESS_ALLOWED)
    # the issue that introduced the check named these; each must be under it
    assert {"battlezone", "asterix", "riverraid", "seaquest", "trondead", "turmoil"} <= set(
        NO_EARLY_SUCCESS
    )


def test_allowed_early_successes_quote_table7():
    text = _paper_text()
    if text is None:
        pytest.skip("paper text not available (set VICAL_PAPER_TEXT)")
    table7 = text[
        text.index("Table 7: Per-environment") : text.index("Human-driven initialization")
    ]
    for env, quote in EARLY_SUCCESS_ALLOWED.items():
        row = next(ln for ln in table7.splitlines() if ln.startswith(ENVS[env].paper_id + "\t"))
        assert quote in row, f"{env}: {quote!r} is not in Table 7's row {row!r}"


def _policy_episode(task: TaskSpec, pick) -> tuple[int, str | None, bool]:
    """(steps, outcome, passed) of ``pick(i)`` played from the task's start to its end."""
    env = make_env(task)
    try:
        env.reset()
        step = None
        while not env.done:
            step = env.step(pick(env.steps))
        assert step is not None
        return step.index, step.outcome, step.passed
    finally:
        env.close()


@pytest.mark.parametrize("task", spread(_no_early_success_tasks(), 8))
def test_no_trivial_policy_ends_early_in_success_where_table28_saw_none(task):
    import random

    from vical.run.runner import episode_seed

    names = list(task.env.actions)
    policies = {f"const:{a}": (lambda i, a=a: a) for a in names}
    for run in range(RANDOM_RUNS):
        rng = random.Random(episode_seed(0, task.id, run))
        policies[f"random#{run}"] = lambda i, rng=rng: rng.choice(names)
    early = []
    for label, pick in policies.items():
        steps, outcome, passed = _policy_episode(task, pick)
        if passed and steps < task.max_steps:
            early.append(f"{label}: {outcome} at decision {steps} of {task.max_steps}")
    assert not early, f"{task.id}: Table 28 reports no early success, yet " + "; ".join(early)


@pytest.mark.parametrize("env", NO_EARLY_SUCCESS)
def test_expert_clips_do_not_end_early_in_success_where_table28_saw_none(env):
    """The experts' recorded play (every Victory clip, from its own start under the
    budget of a task that lists it) passes without ending the episode early."""
    early = []
    for task, clip in _clips(env, "Victory"):
        steps, outcome, terminated, passed = _clip_under_budget(task, clip)
        if terminated and passed and steps < task.max_steps:
            early.append(f"{task.id} {clip.id}: {outcome} at decision {steps}")
    assert not early, "; ".join(early)


# --- Figure 5 start sequences, Table 7 Freeway budgets, the paper's action names ---------
#
# Start states, budgets and vocabularies the paper spells out (issue 12, items 3-6).
#
# To be merged into ``tests/test_paper_fidelity.py``. Numbers and sequences come
# from ``vical/paper.py``; the Taxi destination-marker check is in
# ``tests/test_toytext.py``.


# Section 2 "Human-driven initialization" / Figure 5: which task replays each
# sequence (Asterix has one human-init task; Frostbite's and Seaquest's are
# chosen in the YAML comments above the tasks).
FIGURE5_TASKS = {"asterix": "lanes", "frostbite": "floes-c", "seaquest": "dive-230"}


@pytest.mark.parametrize("key", sorted(FIGURE5))
def test_figure5_sequences_are_replayed_exactly(key):
    skip, sequence = FIGURE5[key]
    spec = LOADED[key]
    paper = [t for t in spec.tasks if (t.init_source or "").startswith("paper: Figure 5")]
    assert [t.variant for t in paper] == [FIGURE5_TASKS[key]]
    (task,) = paper
    assert task.kind == "human-init"
    assert task.init_actions == list(sequence)
    if skip is not None:  # the paper states the warm-up (Seaquest: 230 frames)
        assert task.initial_skip == skip
    assert task.initial_skip in ENVS[key].initial_skips


@pytest.mark.parametrize("key", sorted(FIGURE5))
def test_figure5_starts_are_alive_and_new(key):
    """The replay keeps the game running, and the start frame is no other task's."""
    spec = LOADED[key]
    frames = {}
    for t in spec.tasks:
        env = make_env(get_task(f"{key}/{t.variant}"))
        try:
            frames[t.variant] = frame_sha256(env.reset())
            if t.variant == FIGURE5_TASKS[key]:
                assert not env.done
                assert not env.step("NOOP").done
        finally:
            env.close()
    mine = frames.pop(FIGURE5_TASKS[key])
    assert mine not in frames.values()


def test_freeway_uses_every_table7_budget():
    spec = LOADED["freeway"]
    budgets = {t.max_steps or spec.max_steps for t in spec.tasks}
    assert budgets == {22, 28, 33, 61, 69, 70, 72, 76, 81} == set(ENVS["freeway"].max_steps)


def test_taxi_vocabulary_is_the_papers():
    """Table 16's trace and Table 19 name Taxi moves Up/Down/Left/Right."""
    spec = LOADED["taxi"]
    assert set(spec.actions) == {"Up", "Down", "Left", "Right", "Pickup", "Dropoff"}
    # native Taxi-v3 indices: 0 south, 1 north, 2 east, 3 west, 4 pickup, 5 drop-off
    assert spec.actions == {"Down": 0, "Up": 1, "Right": 2, "Left": 3, "Pickup": 4, "Dropoff": 5}


# --- Provenance: every target, threshold and weight says where it comes from -------------
#
# Every target, threshold and score weight says where it comes from (issue 12, item 8).
#
# A number is either stated by the paper (``paper: <table/section>``) or ours
# (``calibrated: <how it was obtained>``). The checks here keep the ``paper:``
# label honest: each such number must be one the paper really states, with the
# same value, in the row of the same environment. The quotes below are Table 7's
# "Manual modifications" column word for word; when the paper text is at hand
# (a plain-text copy of the paper named by ``VICAL_PAPER_TEXT``) they are checked against it.


# (env, parameter or target name) -> (value, words of Table 7 that state it).
# Trondead's level is a per-task parameter: any of the listed values.
PAPER_STATED: dict[tuple[str, str], tuple[object, str]] = {
    ("acrobot", "pass_height"): (0.0, "pass once the endpoint rises above the pivot"),
    ("alien", "pass_reward"): (75, "use 75/150-point pass/end thresholds"),
    ("alien", "end_reward"): (150, "use 75/150-point pass/end thresholds"),
    ("alien", "bonus_chunk"): (500, "Suppress one-shot 500-point bonuses"),
    ("assault", "reward"): (63, "Normalize to a 63-point target"),
    ("bigfish", "reward_target"): (2, "normalize cumulative reward to a two-point target"),
    ("demonattack", "reward"): (90, "90-point target"),
    ("dodgeball", "completion_reward"): (10, "reward at least 10 marks completion"),
    ("flappybird", "pipes_target"): (3, "end successfully after three pipes"),
    ("flappybird", "pass_pipes"): (1, "pass after one pipe"),
    ("freeway", "pass_fraction"): (0.5, "halfway pass criterion"),
    ("heist", "pass_reward"): (2, "collecting reward at least 2 establishes a pass"),
    ("mountaincar", "pass_fraction"): (
        0.5,
        "pass after traversing half the remaining distance to the goal",
    ),
    ("ninja", "pass_progress"): (0.5, "Pass at 0.5 normalized progress"),
    ("roadrunner", "reward"): (1100, "use an 1100-point target"),
    ("tetris", "rows_target"): (2, "complete after two"),
    ("tetris", "pass_rows"): (1, "pass after one cleared row"),
    ("trondead", "level"): ({0, 1, 2, 4, 7}, "RAM-selected variants (values 0,1,2,4,7)"),
}


def _labelled_numbers():
    """(env, name, value, provenance) for every target and numeric parameter of every task."""
    seen = set()
    for t in ALL_TASKS:
        env, v = t.env, t.variant
        rows = [(n, tg.value, tg.provenance) for n, tg in t.targets.items()]
        for rule in (env.scoring, env.pass_rule):
            rows += [(k, rule.params[k], rule.provenance.get(k)) for k in numeric_keys(rule.params)]
        rows += [(k, v.params[k], v.provenance.get(k)) for k in numeric_keys(v.params)]
        for name, value, prov in rows:
            key = (env.env, name, repr(value), prov)
            if key not in seen:
                seen.add(key)
                yield t.id, env.env, name, value, prov


def test_every_number_of_every_task_has_provenance_of_the_right_form():
    bad = []
    for task_id, _env, name, _value, prov in _labelled_numbers():
        if prov is None:
            bad.append(f"{task_id}: {name} has no provenance")
            continue
        try:
            check_provenance(prov)
        except ValueError as e:
            bad.append(f"{task_id}: {name}: {e}")
        if prov.strip() in ("paper: Table 7", "paper: Table 8", "paper"):
            bad.append(f"{task_id}: {name}: {prov!r} does not say which row or words")
    assert not bad, "\n".join(bad)


def test_paper_labelled_numbers_are_stated_by_the_paper():
    bad = []
    for task_id, env, name, value, prov in _labelled_numbers():
        if not prov.startswith("paper:"):
            continue
        stated = PAPER_STATED.get((env, name))
        if stated is None:
            bad.append(f"{task_id}: {name} = {value} is labelled paper but no table row states it")
            continue
        want, quote = stated
        ok = value in want if isinstance(want, set) else float(value) == float(want)
        if not ok:
            bad.append(f"{task_id}: {name} = {value}, but the paper states {want}")
        if ENVS[env].paper_id not in prov:
            bad.append(f"{task_id}: {name}: provenance does not name the row {ENVS[env].paper_id}")
        if not re.search(r"Table \d+|Appendix|Section", prov):
            bad.append(f"{task_id}: {name}: provenance names no table or section")
        if quote not in " ".join(prov.split()):
            bad.append(f"{task_id}: {name}: provenance does not quote {quote!r}")
    assert not bad, "\n".join(bad)


def test_every_paper_stated_number_is_used_with_the_paper_label():
    envs = LOADED
    for (env, name), (want, _quote) in PAPER_STATED.items():
        spec = envs[env]
        found = []
        for v in spec.tasks:
            t = get_task(f"{env}/{v.variant}")
            if name in t.targets:
                found.append((t.targets[name].value, t.targets[name].provenance))
            for rule in (spec.scoring, spec.pass_rule):
                if name in rule.params:
                    found.append((rule.params[name], rule.provenance.get(name, "")))
            if name in v.params:
                found.append((v.params[name], v.provenance.get(name, "")))
        assert found, f"{env}: {name} is not in the task file"
        for value, prov in found:
            assert prov.startswith("paper:"), f"{env}: {name} = {value} is labelled {prov!r}"
            if isinstance(want, set):
                assert value in want
            else:
                assert float(value) == float(want)


def _paper_text() -> str | None:
    p = os.environ.get("VICAL_PAPER_TEXT")
    return Path(p).read_text() if p and Path(p).is_file() else None


def test_quoted_table7_words_are_the_papers():
    text = _paper_text()
    if text is None:
        pytest.skip("paper text not available (set VICAL_PAPER_TEXT)")
    table7 = text[
        text.index("Table 7: Per-environment") : text.index("Human-driven initialization")
    ]
    for (env, name), (_want, quote) in PAPER_STATED.items():
        row = next(ln for ln in table7.splitlines() if ln.startswith(ENVS[env].paper_id + "\t"))
        assert quote in row, f"{env}: {name}: {quote!r} is not in Table 7's row {row!r}"


def test_assault_score_target_is_the_paper_and_its_pass_threshold_is_ours():
    t = get_task("assault/base")
    score, pass_ = t.targets["reward"], t.targets["pass_reward"]
    assert score.value == 63 and score.provenance.startswith("paper: Table 7")
    assert "Normalize to a 63-point target" in score.provenance
    # Table 7 names no pass threshold for Assault: the threshold is labelled as ours.
    assert pass_.provenance.startswith("calibrated:")
    assert pass_.value == score.value  # passing is reaching the score target itself


def test_paper_end_thresholds_are_not_passed_off_as_score_targets():
    # Alien: 75/150 are the paper's pass/end thresholds; normalising the score by
    # the end threshold is our choice and is labelled so.
    t = get_task("alien/base")
    assert t.targets["pass_reward"].provenance.startswith("paper: Table 7")
    assert t.targets["end_reward"].provenance.startswith("paper: Table 7")
    assert t.targets["reward"].provenance.startswith("calibrated:")
    # Pass thresholds the paper does not state are ours.
    for env in ("demonattack", "roadrunner"):
        t = get_task(f"{env}/{LOADED[env].tasks[0].variant}")
        assert t.targets["reward"].provenance.startswith("paper: Table 7")
        assert t.targets["pass_reward"].provenance.startswith("calibrated:")


# --- Appendix 1.2: demonstration packages ------------------------------------------------
#
# Demo packages against the paper's Appendix 1.2.
#
# Held exactly: 342 tasks with demos, 155/145/37/5 tasks with 1/2/3/4 clips, 576 clip
# assignments, 148 distinct clips, and every package within 10-80 frames. Held within a
# tolerance: the mean frames per package, within 10% of 45.73 (the clips are made by
# programs, whose clips are shorter than the paper's recordings: ours average 42.6). Not held, only reported: the median (paper 45) and
# the resolutions (paper: 12, most common 160x250 for 207 packages).
#
# The packing (vical.demos.packages, ``vical demos pack``) is idempotent on the stored
# data: packing the stored packages again changes nothing.


FRAMES_MEAN_TOLERANCE = 0.10  # relative


@pytest.fixture(scope="module")
def stats():
    return demo_stats(ALL_TASKS)


def test_every_task_has_a_package(stats):
    assert stats["tasks"] == stats["tasks_with_demos"] == 342


def test_clips_per_task_equal_the_paper(stats):
    assert stats["clips_per_task"] == paper.DEMO_CLIPS_PER_TASK


def test_assignments_and_distinct_clips_equal_the_paper(stats):
    assert stats["assignments"] == paper.DEMO_ASSIGNMENTS == 576
    assert stats["distinct_clips"] == paper.DEMO_CLIPS == 148


def test_frames_per_package(stats):
    lo, hi, mean, _median = paper.DEMO_FRAMES
    assert lo <= stats["frames_min"] and stats["frames_max"] <= hi
    assert abs(stats["frames_mean"] - mean) <= FRAMES_MEAN_TOLERANCE * mean


def test_demo_quotas_sum_to_the_paper():
    quotas = {env: spec.demo_quota for env, spec in LOADED.items()}
    assert None not in quotas.values(), [env for env, q in quotas.items() if q is None]
    assert sum(q.pool for q in quotas.values()) == paper.DEMO_CLIPS
    digits = "".join(q.clips for q in quotas.values())
    assert {k: digits.count(str(k)) for k in (1, 2, 3, 4)} == paper.DEMO_CLIPS_PER_TASK
    for env, q in quotas.items():
        assert len(q.clips) == len(LOADED[env].tasks), env


def test_stored_packages_follow_the_demo_quotas():
    for env, spec in LOADED.items():
        q = spec.demo_quota
        assert q is not None, env
        assert [len(v.demos) for v in spec.tasks] == [int(d) for d in q.clips], env
        assert len({c.id for v in spec.tasks for c in v.demos}) == q.pool, env


@pytest.mark.parametrize("env", spread(sorted(LOADED), 6))
def test_packing_is_idempotent_on_the_stored_data(env):
    """Packing the stored packages again changes nothing (``vical demos pack --check``)."""
    spec = LOADED[env]
    stored = {v.variant: list(v.demos) for v in spec.tasks}
    assert pack_env(spec, stored) == stored


def test_pack_command_check_reports_no_change():
    from typer.testing import CliRunner

    from vical.cli import app

    res = CliRunner().invoke(app, ["demos", "pack", "--check", "--env", "cartpole"])
    assert res.exit_code == 0, res.output
    assert "cartpole: unchanged" in res.output
