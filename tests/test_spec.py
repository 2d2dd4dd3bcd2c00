"""Task data against the paper's tables, and error messages for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vical.spec import TaskSpecError, load_env_file, load_envs, select_tasks

LOADED = load_envs()
ENV_KEYS = sorted(LOADED)


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
    assert str(p) in msg and "taxi/state3" in msg and "'seed'" in msg


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


def test_numeric_parameter_without_provenance_is_rejected(tmp_path):
    def bad(d):
        d["scoring"].pop("provenance", None)  # weights lose their provenance
        d["tasks"][3]["params"] = {"detour": 3, "strict": True}  # a bool is a switch, not a number

    p = _write(tmp_path, bad)
    with pytest.raises(TaskSpecError) as e:
        load_env_file(p)
    msg = str(e.value)
    assert str(p) in msg
    assert "scoring.params.weights has no provenance" in msg
    assert "taxi/state4: params.detour has no provenance" in msg
    assert "strict" not in msg
    assert '"paper: <table or section>"' in msg and '"calibrated: <how' in msg


def test_numeric_parameter_with_provenance_loads(tmp_path):
    def ok(d):
        d["tasks"][3]["params"] = {"detour": 3}
        d["tasks"][3]["provenance"] = {"detour": "calibrated: a test value"}

    spec = load_env_file(_write(tmp_path, ok))
    assert spec.tasks[3].missing_provenance() == []
    assert spec.scoring.missing_provenance() == [] and spec.pass_rule.missing_provenance() == []


def test_unknown_init_action_is_rejected(tmp_path):
    def bad(d):
        d["tasks"][1]["init_actions"] = ["Fly"]
        d["tasks"][1]["init_source"] = "generated: scripted test"

    with pytest.raises(TaskSpecError, match="Fly"):
        load_env_file(_write(tmp_path, bad))


def test_select_tasks_patterns():
    assert [t.id for t in select_tasks("taxi/state1")] == ["taxi/state1"]
    assert len(select_tasks("taxi")) == 5
    with pytest.raises(TaskSpecError, match="matches no task"):
        select_tasks("nope/*")
