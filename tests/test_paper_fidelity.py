"""The task data against the paper's structural statistics.

Each test names the table or section it holds the data to; a change to the task
files that drifts from the paper fails here. Numbers live in ``vical/paper.py``.
"""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import ALL_TASKS

from vical.envs.actions import is_combo
from vical.paper import ENVS, TOTAL_COMBOS, TOTAL_TASKS
from vical.spec import load_envs

LOADED = load_envs()
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
