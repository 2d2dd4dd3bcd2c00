"""No per-game table or branch outside the places that hold one game each.

What is specific to one environment lives in its game module (``vical/envs/games/``),
its task file (``vical/tasks/``), its recipe module (``vical/authoring/recipes/``) or,
for what the paper states, ``vical/paper.py``. Everywhere else in the package, shared
code reads those places (the game registry, :data:`vical.spec.families.FAMILIES`):
an environment key written as a string that is compared with, used as a dictionary key,
listed in a set, list or tuple, or matched in a ``case``, is a per-game table or branch,
and this test names its file and line.

The same scan, run on ``benchmarks/policy_audit.py``, holds the policy audit to it too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vical"
ALLOWED = ("envs/games/", "tasks/", "authoring/recipes/", "paper.py")
ENV_KEYS = frozenset(p.stem for p in (PACKAGE / "tasks").glob("*.yaml"))


def _literals(node: ast.AST) -> list[ast.Constant]:
    """String constants directly in a node, or in a set, list or tuple literal there."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        return [c for e in node.elts for c in _literals(e)]
    return []


def _table_literals(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a tree that sit where a table or branch keeps a key."""
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += _literals(side)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    found += _literals(key)
        elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            found += _literals(node)
        elif isinstance(node, ast.MatchValue):
            found += _literals(node.value)
    return found


def game_tables(source: str, name: str, keys: frozenset[str] = ENV_KEYS) -> list[str]:
    """``name:line: 'key'`` for every environment key in a table or branch of ``source``."""
    hits = {(c.lineno, c.value) for c in _table_literals(ast.parse(source)) if c.value in keys}
    return [f"{name}:{line}: {key!r}" for line, key in sorted(hits)]


def _scanned() -> list[Path]:
    return [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if not p.relative_to(PACKAGE).as_posix().startswith(ALLOWED)
    ]


def test_the_task_files_give_the_keys_scanned_for():
    assert len(ENV_KEYS) == 37 and {"taxi", "breakout", "highway"} <= ENV_KEYS


def test_no_per_game_table_or_branch_outside_the_game_places():
    files = _scanned()
    assert len(files) > 150  # the scan reaches the package
    hits = [h for p in files for h in game_tables(p.read_text("utf-8"), str(p.relative_to(ROOT)))]
    assert not hits, "per-game tables or branches (move them to the game module):\n" + "\n".join(
        hits
    )


def test_the_policy_audit_has_no_per_game_branch():
    path = ROOT / "benchmarks" / "policy_audit.py"
    assert game_tables(path.read_text("utf-8"), "benchmarks/policy_audit.py") == []


@pytest.mark.parametrize(
    "source",
    [
        'if env_key == "highway":\n    pass\n',
        'if spec.env in ("taxi", "cliffwalking"):\n    pass\n',
        'CONTROLLERS = {"cartpole": print}\n',
        'GAMES = {"pong", "tennis"}\n',
        'ORDER = ["seaquest"]\n',
        'match env:\n    case "berzerk":\n        pass\n',
    ],
)
def test_the_scan_flags_a_table_or_branch(source):
    """An injected per-game branch or table is found, with its line."""
    source = "x = 1\n" + source
    hits = game_tables(source, "vical/injected.py")
    assert hits
    for hit in hits:
        line, key = hit.split(":")[1], hit.split("'")[1]
        assert f'"{key}"' in source.splitlines()[int(line) - 1]


def test_the_scan_leaves_other_uses_of_the_words_alone():
    """Family names passed to a function, messages and documentation are not tables."""
    source = (
        '"""Breakout and highway, in prose."""\n'
        'Family("breakout", "vical")\n'
        'print(f"{env}: taxi is not here")\n'
        'x = get("tetris")\n'
    )
    assert game_tables(source, "vical/fine.py") == []
