"""Tokens and cost per run and per environment, summed from the episodes' own records.

Every ``eval_result.json`` carries the episode's token ``usage`` (as the
backend reported it) and ``cost_usd``, priced when the episode was played from
the price table entry named after the run's ``--model``; an episode whose model
had no entry records ``cost_usd: null``. This module only adds those numbers up;
it never prices anything again, so a report shows what the run recorded even if
the price table has changed since.

Cost rules, per episode: the recorded ``cost_usd`` when there is one; 0 when the
episode used no tokens at all (nothing to pay, e.g. the random agent, which has
no model and so no price); otherwise unknown. A sum over episodes is ``None``
(``null`` in ``report.json``) as soon as one of its episodes is unknown, and
``unpriced_episodes`` says how many were.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vical.errors import RunFolderError
from vical.run.results import EvalResult

# report field -> key of EvalResult.usage (as the agent backends write it)
TOKEN_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",  # reasoning tokens included
    "cached_tokens": "cached_input_tokens",  # part of input_tokens, billed at the cached rate
    "reasoning_tokens": "reasoning_tokens",  # part of output_tokens, a breakdown only
}


def recorded_cost(r: EvalResult) -> float | None:
    """USD of one episode: as recorded, 0 without tokens, else None (no price for its model)."""
    if r.cost_usd is not None:
        return r.cost_usd
    if int(r.usage.get("input_tokens", 0)) + int(r.usage.get("output_tokens", 0)) == 0:
        return 0.0
    return None


def usage_totals(results: Iterable[EvalResult]) -> dict[str, Any]:
    """Episodes, token counts, cost and unpriced episodes summed over ``results``."""
    rs = list(results)
    out: dict[str, Any] = {"episodes": len(rs)}
    for field, key in TOKEN_FIELDS.items():
        out[field] = sum(int(r.usage.get(key, 0)) for r in rs)
    costs = [recorded_cost(r) for r in rs]
    known = [c for c in costs if c is not None]
    out["cost_usd"] = round(math.fsum(known), 6) if len(known) == len(costs) else None
    out["unpriced_episodes"] = len(costs) - len(known)
    return out


def manifest_model(run_dir: Path) -> str | None:
    """The ``--model`` a run was made with (``agent_settings.model`` of its manifest.json).

    None when the folder has no manifest or the agent has no model (the random agent).
    """
    path = Path(run_dir) / "manifest.json"
    if not path.exists():
        return None
    try:
        settings = json.loads(path.read_text())["agent_settings"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunFolderError(
            f"{path} is not a vical run manifest ({type(e).__name__}); the report reads the "
            "run's model name from it: restore the file or remove it"
        ) from None
    model = settings.get("model") if isinstance(settings, dict) else None
    return None if model is None else str(model)


def run_usage(
    name: str,
    results: list[EvalResult],
    infrastructure_failures: list[EvalResult],
    model: str | None,
    reference: bool = False,
) -> dict[str, Any]:
    """One run's usage: totals over its scored episodes, per environment, and not-scored ones.

    ``price_entry`` is the price table entry the episodes were priced with (the
    run's model name), or None when no episode carries a recorded cost.
    """
    by_env: dict[str, list[EvalResult]] = {}
    for r in results:
        by_env.setdefault(r.env, []).append(r)
    priced = any(r.cost_usd is not None for r in [*results, *infrastructure_failures])
    return {
        "run": name,
        "agent": ",".join(sorted({r.agent for r in results})),
        "model": model,
        "reference": reference,
        "price_entry": model if priced else None,
        **usage_totals(results),
        "envs": [{"env": e, **usage_totals(rs)} for e, rs in sorted(by_env.items())],
        "infrastructure_failures": (
            usage_totals(infrastructure_failures) if infrastructure_failures else None
        ),
    }


def _add(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"episodes": sum(b["episodes"] for b in blocks)}
    for field in TOKEN_FIELDS:
        out[field] = sum(b[field] for b in blocks)
    costs = [b["cost_usd"] for b in blocks]
    out["cost_usd"] = None if None in costs else round(math.fsum(costs), 6)
    out["unpriced_episodes"] = sum(b["unpriced_episodes"] for b in blocks)
    return out


def report_usage(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``report.json``'s ``usage``: every run's :func:`run_usage` and their sum."""
    infra = [r["infrastructure_failures"] for r in runs if r["infrastructure_failures"]]
    return {
        "runs": runs,
        "total": {**_add(runs), "infrastructure_failures": _add(infra) if infra else None},
    }
