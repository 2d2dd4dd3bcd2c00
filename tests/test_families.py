"""The environment families, defined once (vical/spec/families.py), and what reads them."""

from __future__ import annotations

import pytest

from vical.spec import load_envs
from vical.spec.families import FAMILIES, family


def _names(prop: str) -> set[str]:
    return {f.name for f in FAMILIES.values() if getattr(f, prop)}


def test_every_task_file_names_a_family_defined_there():
    assert {s.family for s in load_envs().values()} <= set(FAMILIES)
    assert len(FAMILIES) == 9


def test_the_family_properties_are_those_the_package_has_always_used():
    """The tiers of the simulator checks, the doctor's float families, the world-model's
    exactly rendered families and the baseline server's searched ones, as they stood
    when each was its own list."""
    assert _names("ids_at_load") == {"toytext", "classic", "ale", "breakout"}
    assert _names("actions_at_load") == {"toytext", "classic", "ale", "breakout", "procgen"}
    assert _names("float_physics") == {"classic", "highway", "flappy", "breakout"}
    assert _names("exact_renderer") == {"toytext", "minigrid", "tetris", "breakout"}
    assert _names("searchable") == {"toytext", "minigrid"}


def test_the_readers_take_the_records():
    from vical.run.doctor import FLOAT_FAMILIES
    from vical.wm.state import EXACT_FAMILIES

    assert _names("float_physics") == FLOAT_FAMILIES
    assert _names("exact_renderer") == EXACT_FAMILIES


def test_an_unknown_family_is_one_line_naming_the_families(tmp_path):
    from vical.spec import TASKS_DIR, TaskSpecError, load_env_file

    text = (TASKS_DIR / "taxi.yaml").read_text("utf-8")
    assert "\nfamily: toytext\n" in text
    (tmp_path / "taxi.yaml").write_text(text.replace("\nfamily: toytext\n", "\nfamily: toytex\n"))
    with pytest.raises(TaskSpecError) as e:
        load_env_file(tmp_path / "taxi.yaml")
    assert "unknown family 'toytex'; families: toytext, classic, ale" in str(e.value)
    with pytest.raises(KeyError, match="unknown family 'nope'"):
        family("nope")
