"""Task data against the paper's tables, and error messages for bad files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import ALL_TASKS

from vical.envs.actions import is_combo
from vical.paper import ENVS, TOTAL_COMBOS, TOTAL_TASKS
from vical.spec import TaskSpecError, load_env_file, load_envs, select_tasks

LOADED = load_envs()
ENV_KEYS = sorted(LOADED)


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
    horizons = {t.max_steps or spec.max_steps for t in spec.tasks}
    assert horizons <= ref.max_steps, f"horizons {horizons} not in Table 7 {set(ref.max_steps)}"
    assert {t.seed for t in spec.tasks} <= ref.seeds
    skips = {t.initial_skip for t in spec.tasks} - {0}
    assert skips <= ref.initial_skips


def test_every_environment_and_task_of_the_paper_is_present():
    assert sorted(LOADED) == sorted(ENVS), "environments differ from paper Table 9"
    assert len(ALL_TASKS) == TOTAL_TASKS == 342
    assert len({t.id for t in ALL_TASKS}) == len(ALL_TASKS)
    assert sum(is_combo(a) for s in LOADED.values() for a in s.actions) == TOTAL_COMBOS


def test_every_env_has_rules_and_tags():
    for spec in LOADED.values():
        assert spec.rules.basic and spec.rules.detailed
        assert spec.tags.types


def _write(tmp_path: Path, mutate) -> Path:
    src = Path(__file__).parents[1] / "vical" / "tasks" / "taxi.yaml"
    data = yaml.safe_load(src.read_text())
    mutate(data)
    p = tmp_path / "taxi.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_bad_task_field_names_file_task_and_field(tmp_path):
    def bad(d):
        d["tasks"][2]["seed"] = "not-a-number"

    p = _write(tmp_path, bad)
    with pytest.raises(TaskSpecError) as e:
        load_env_file(p)
    msg = str(e.value)
    assert str(p) in msg and "taxi/state2" in msg and "'seed'" in msg


def test_bad_env_field_names_file_and_field(tmp_path):
    p = _write(tmp_path, lambda d: d.__setitem__("frame_skip", 0))
    with pytest.raises(TaskSpecError) as e:
        load_env_file(p)
    assert str(p) in str(e.value) and "frame_skip" in str(e.value)


def test_bad_provenance_is_rejected(tmp_path):
    def bad(d):
        d["scoring"]["targets"] = {"x": {"value": 1, "provenance": "guess"}}

    with pytest.raises(TaskSpecError, match="provenance"):
        load_env_file(_write(tmp_path, bad))


def test_unknown_init_action_is_rejected(tmp_path):
    def bad(d):
        d["tasks"][1]["init_actions"] = ["Fly"]
        d["tasks"][1]["init_source"] = "generated: scripted test"

    with pytest.raises(TaskSpecError, match="Fly"):
        load_env_file(_write(tmp_path, bad))


def test_select_tasks_patterns():
    assert [t.id for t in select_tasks("taxi/state0")] == ["taxi/state0"]
    assert len(select_tasks("taxi")) == 5
    with pytest.raises(TaskSpecError, match="matches no task"):
        select_tasks("nope/*")
