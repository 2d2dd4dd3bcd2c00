"""World-model cases as rows of the Hugging Face dataset's second configuration, ``wm``.

One row per case: its ids and environment, the context and true frames as
``datasets.Image`` lists (PNG bytes), the actions, the specification's fields
flat (``initial_condition``, ``permitted_intervention``, ``evidence_rule``) and
as JSON (``required_change_json``, ``protected_state_json``), and the whole case
as ``case_json`` (:func:`row_to_case` rebuilds it and checks the flat fields).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vical.wm.cases import Case

WM_CONFIG = "wm"
WM_DATA_FILE = "wm/test-00000-of-00001.parquet"


def wm_features() -> Any:
    from datasets import Features, Image, List, Value

    s = Value("string")
    return Features(
        {
            "id": s,
            "scenario": s,
            "env": s,
            "family": s,
            "task": s,
            "group": s,
            "branch": Value("int32"),
            "branches": List(s),
            "actions": List(s),
            "context_frames": List(Image()),
            "context_actions": List(s),
            "intervention": List(s),
            "truth_frames": List(Image()),
            "context_sha256": List(s),
            "truth_sha256": List(s),
            "initial_condition": s,
            "permitted_intervention": s,
            "required_change_json": s,
            "protected_state_json": s,
            "evidence_rule": s,
            "exact_readback": Value("bool"),
            "case_json": s,
        }
    )


def case_row(case: Case, folder: Path) -> dict[str, Any]:
    """A case as a dataset row, its frames read from the case folder."""
    folder = Path(folder)

    def images(names: list[str]) -> list[dict[str, Any]]:
        return [{"bytes": (folder / n).read_bytes(), "path": None} for n in names]

    spec = case.spec
    return {
        "id": case.id,
        "scenario": case.scenario,
        "env": case.env,
        "family": case.family,
        "task": case.task,
        "group": case.group,
        "branch": case.branch,
        "branches": list(case.branches),
        "actions": list(case.actions),
        "context_frames": images(case.context_frames),
        "context_actions": list(case.context_actions),
        "intervention": list(case.intervention),
        "truth_frames": images(case.truth_frames),
        "context_sha256": list(case.context_sha256),
        "truth_sha256": list(case.truth_sha256),
        "initial_condition": spec.initial_condition,
        "permitted_intervention": spec.permitted_intervention,
        "required_change_json": json.dumps(
            [f.model_dump(mode="json") for f in spec.required_change], sort_keys=True
        ),
        "protected_state_json": json.dumps(
            [f.model_dump(mode="json") for f in spec.protected_state], sort_keys=True
        ),
        "evidence_rule": spec.evidence_rule,
        "exact_readback": spec.exact,
        "case_json": json.dumps(case.model_dump(mode="json"), sort_keys=True),
    }


def row_to_case(row: dict[str, Any]) -> Case:
    """Rebuild the case of a row, checking the flat fields agree with ``case_json``."""
    case = Case.model_validate_json(row["case_json"])
    checks = {
        "id": case.id,
        "scenario": case.scenario,
        "env": case.env,
        "task": case.task,
        "intervention": list(case.intervention),
        "truth_sha256": list(case.truth_sha256),
        "initial_condition": case.spec.initial_condition,
    }
    for k, v in checks.items():
        if row[k] != v:
            raise ValueError(f"row {row['id']}: field {k} = {row[k]!r} disagrees with case_json")
    return case
