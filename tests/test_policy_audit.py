"""benchmarks/policy_audit.py finds each game's expert where the game declares it: the game
module's controller, the family's shared expert, the recipe module's AUDIT_* names, or
the search of the recipe's type (the names and variants it always had)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "policy_audit.py"


@pytest.fixture(scope="module")
def audit():
    spec = importlib.util.spec_from_file_location("policy_audit_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


@pytest.mark.parametrize(
    "env, name, variants",
    [
        ("cartpole", "scripted controller", ["controller"]),
        ("taxi", "breadth-first search, shortest passing plan", ["bfs"]),
        ("lavacrossing", "MiniGrid planner, shortest route", ["planner"]),
        ("highway", "scripted gap-keeping driver", ["driver"]),
        (
            "breakout",
            "scripted ball tracker",
            [f"tracker aim {a}" for a in ("+0", "+2", "-2", "+4", "-4")],
        ),
        ("berzerk", "ALE search for the room exit", ["exit search"]),
        ("alien", "ALE search on the benchmark score", [f"search seed {s}" for s in (1, 2, 3)]),
    ],
)
def test_each_game_gets_the_expert_it_declares(audit, env, name, variants):
    assert audit.expert_name(env) == name
    assert [v for v, _ in audit.expert_candidates(env)] == variants
