"""vical.envs.games: one module per environment, found by one lookup, and no
per-game code left in the family modules of families with several games.

An environment added from a folder (``$VICAL_TASKS_DIR``) has its game module in a
package of its own named in ``$VICAL_GAME_PACKAGES``; the paper's environments
(``vical.paper.ENVS``) have theirs in ``vical.envs.games``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import vical.envs
from vical.envs import game_module, game_packages
from vical.paper import ENVS as PAPER_ENVS
from vical.spec import load_envs
from vical.spec.families import FAMILIES

ENVS = sorted(load_envs())
GAMES = Path(vical.envs.__file__).parent / "games"


@pytest.mark.parametrize("env", ENVS)
def test_every_environment_has_its_game_module_with_an_adapter(env):
    spec = load_envs()[env]
    mod = game_module(spec)
    if env in PAPER_ENVS:
        assert mod is not None, f"vical/envs/games/{env}.py is missing"
        assert mod.__name__ == f"vical.envs.games.{env}"
    else:  # an added environment: its own package, named in $VICAL_GAME_PACKAGES
        assert mod is not None, f"{env}: no game module {env}.py in {game_packages()}"
        assert mod.__name__ in {f"{p}.{env}" for p in game_packages()[:-1]}
    assert isinstance(getattr(mod, "Adapter", None), type), f"{env}: no Adapter class"


def test_the_games_package_holds_exactly_the_environments():
    modules = {p.stem for p in GAMES.glob("*.py") if p.stem != "__init__"}
    assert modules == set(PAPER_ENVS) == {e for e in ENVS if e in PAPER_ENVS}


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _shared_families() -> dict[str, list[str]]:
    by_family: dict[str, list[str]] = {}
    for env, spec in load_envs().items():
        by_family.setdefault(spec.family, []).append(env)
    return {f: envs for f, envs in by_family.items() if len(envs) > 1}


@pytest.mark.parametrize("family", sorted(_shared_families()))
def test_a_shared_family_module_defines_nothing_named_after_one_of_its_games(family):
    path = Path(importlib.import_module(f"vical.envs.{FAMILIES[family].module}").__file__ or "")
    games = _shared_families()[family]
    named = sorted(
        n for n in _top_level_names(path) for g in games if g in n.lower().replace("_", "")
    )
    assert not named, f"{path.name} still holds per-game code: {named}"


def test_the_check_sees_per_game_code(tmp_path):
    """The check above finds a per-game name when there is one."""
    src = tmp_path / "fam.py"
    src.write_text("class TaxiAdapter: ...\nHEIST_KEY = 2\nshared = 1\n")
    names = _top_level_names(src)
    assert {n for n in names for g in ("taxi", "heist") if g in n.lower()} == {
        "TaxiAdapter",
        "HEIST_KEY",
    }


def _renamed(task_id: str, env: str):
    from vical.spec import TaskSpec, get_task

    task = get_task(task_id)
    return TaskSpec(env=task.env.model_copy(update={"env": env}), variant=task.variant)


@pytest.mark.parametrize("family", sorted(set(FAMILIES) - {"ale"}))
def test_a_game_without_its_module_is_one_line_naming_the_file(family):
    from vical.envs import make_adapter
    from vical.spec import TaskSpecError, all_tasks

    task = next(t for t in all_tasks() if t.env.family == family)
    with pytest.raises(TaskSpecError) as e:
        make_adapter(_renamed(task.id, "nosuchgame"))
    msg = str(e.value)
    assert "\n" not in msg and "add vical/envs/games/nosuchgame.py with an Adapter class" in msg


def test_an_ale_game_without_its_module_gets_the_generic_adapter():
    from vical.envs import make_adapter
    from vical.envs.ale import ALEAdapter

    adapter = make_adapter(_renamed("pong/serve", "nosuchgame"))
    try:
        assert type(adapter) is ALEAdapter
    finally:
        adapter.close()
