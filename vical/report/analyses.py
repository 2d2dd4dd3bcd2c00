"""The paper's analyses (Appendices 4–6), as pure functions over episode results.

Every function takes :class:`~vical.run.results.EvalResult` lists (one list per
run when the analysis compares runs, keyed by the run's display name) and
returns plain JSON-ready data. Only the conflicting-action count reads beyond
``eval_result.json``: it reads the response records of each episode's
``log.jsonl``. Figures for these live in :mod:`vical.report.plots`.

Definitions follow the paper, with the places where it leaves a choice open
stated in each docstring.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

import numpy as np

from vical.outcomes import ENVIRONMENT_FAILURES, FAILURE_MODES, FailureMode, episode_name
from vical.run.results import EvalResult

if TYPE_CHECKING:
    from vical.spec import TaskSpec

Runs = Mapping[str, list[EvalResult]]

GAME_TYPES = ("Maze", "Shooter", "Control", "Dodge", "Collect", "Sport")
BIAS_MIN_ACTIONS = 20
BIAS_EXCESS = 0.20
BIAS_TV = 0.20
FIXATION_MIN_STEPS = 10
FIXATION_SHARE = 0.90
EASY_ABOVE = 70.0  # Eq. 2 thresholds: Easy Δ > 70, Medium 30 ≤ Δ ≤ 70, Hard Δ < 30
HARD_BELOW = 30.0


# ---------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------
def env_means(results: Iterable[EvalResult]) -> dict[str, float]:
    """Per-environment mean score as in Table 1: mean over runs per task, then over tasks."""
    by_task: dict[str, list[EvalResult]] = defaultdict(list)
    for r in results:
        by_task[r.task_id].append(r)
    per_env: dict[str, list[float]] = defaultdict(list)
    for rs in by_task.values():
        per_env[rs[0].env].append(fmean(r.score for r in rs))
    return {e: fmean(v) for e, v in sorted(per_env.items())}


def env_tags(results: Iterable[EvalResult]) -> dict[str, dict[str, Any]]:
    return {r.env: r.tags for r in results}


def _share(n: int, d: int) -> float | None:
    return n / d if d else None


def phi(x: list[bool], y: list[bool]) -> float | None:
    """φ coefficient of two binary variables (Pearson r on 0/1); None when a margin is empty."""
    n11 = sum(a and b for a, b in zip(x, y, strict=True))
    n10 = sum(a and not b for a, b in zip(x, y, strict=True))
    n01 = sum(b and not a for a, b in zip(x, y, strict=True))
    n00 = len(x) - n11 - n10 - n01
    den = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    if den == 0:
        return None
    return (n11 * n00 - n10 * n01) / math.sqrt(den)


# ---------------------------------------------------------------------------
# failure modes (Appendix 5.1, Table 25)
# ---------------------------------------------------------------------------
def failure_modes(runs: Runs) -> list[dict[str, Any]]:
    """Per run: episodes, passes, failures and the count and share of each failure mode.

    A failure is an episode without a pass. Shares are conditional on failure.
    Failure modes are the runner's: timeout, early_termination (in-environment
    failure or death), invalid_action, token_overflow, api_error
    (:data:`vical.outcomes.FAILURE_MODES`), plus ``unknown`` for a failed
    episode without a mode.
    """
    modes = [*(m.value for m in FAILURE_MODES), "unknown"]
    rows = []
    for name, results in runs.items():
        failed = [r for r in results if not r.passed]
        counts = Counter(r.failure_mode or "unknown" for r in failed)
        rows.append(
            {
                "run": name,
                "episodes": len(results),
                "passed": len(results) - len(failed),
                "failed": len(failed),
                "counts": {m: counts.get(m, 0) for m in modes},
                "shares": {m: _share(counts.get(m, 0), len(failed)) for m in modes},
            }
        )
    return rows


def failure_by_type(results: list[EvalResult]) -> list[dict[str, Any]]:
    """Table 25 over a pooled result set: per game type, failure rate and how failures end.

    ``early_termination`` and ``timeout`` are shares of the type's failures.
    ``phi_timeout`` is the φ correlation, over failed episodes that ended by
    timeout or early termination, between membership in the type (multi-label
    tags) and ending by timeout. Failures of other modes (invalid action,
    token overflow, API error) are counted in ``other`` and left out of φ.
    """
    failed = [r for r in results if not r.passed]
    in_env = [r for r in failed if r.failure_mode in ENVIRONMENT_FAILURES]
    is_timeout = [r.failure_mode == FailureMode.TIMEOUT for r in in_env]
    rows = []
    for t in GAME_TYPES:
        members = [r for r in results if t in r.tags.get("types", [])]
        if not members:
            continue
        f = [r for r in members if not r.passed]
        et = sum(r.failure_mode == FailureMode.EARLY_TERMINATION for r in f)
        to = sum(r.failure_mode == FailureMode.TIMEOUT for r in f)
        rows.append(
            {
                "type": t,
                "failed": len(f),
                "episodes": len(members),
                "failure_rate": _share(len(f), len(members)),
                "early_termination": _share(et, len(f)),
                "timeout": _share(to, len(f)),
                "other": _share(len(f) - et - to, len(f)),
                "phi_timeout": phi([t in r.tags.get("types", []) for r in in_env], is_timeout),
            }
        )
    return rows


# ---------------------------------------------------------------------------
# episode length (Appendix 6.3, Tables 27–28)
# ---------------------------------------------------------------------------
LENGTH_CATEGORIES = ("early_success", "early_death", "budget_reached", "early_other")


def length_category(r: EvalResult) -> str:
    """Table 27 outcome of one episode with length L = steps and budget B = max_steps.

    early_success: passed and L < B; early_death: an in-environment failure
    (early termination) without a pass and L < B; budget_reached: L ≥ B. The
    paper has no fourth case because none of its leading-model episodes ended
    for another reason; here an episode that stops before its budget through
    the agent (invalid action, token overflow, API error) is ``early_other``.
    """
    if r.steps >= r.max_steps:
        return "budget_reached"
    if r.passed:
        return "early_success"
    if r.failure_mode == FailureMode.EARLY_TERMINATION:
        return "early_death"
    return "early_other"


def length_stats(results: list[EvalResult]) -> dict[str, Any]:
    """Mean ± SD (sample SD), median [IQR] (linear-interpolated quartiles), range, categories."""
    lengths = np.array([r.steps for r in results], dtype=float)
    n = len(lengths)
    if n == 0:
        raise ValueError("no episodes")
    cats = Counter(length_category(r) for r in results)
    q1, med, q3 = np.percentile(lengths, [25, 50, 75])
    return {
        "n": n,
        "mean": float(lengths.mean()),
        "sd": float(lengths.std(ddof=1)) if n > 1 else 0.0,
        "median": float(med),
        "q1": float(q1),
        "q3": float(q3),
        "min": int(lengths.min()),
        "max": int(lengths.max()),
        **{c: cats.get(c, 0) / n for c in LENGTH_CATEGORIES},
    }


def episode_lengths(runs: Runs) -> dict[str, Any]:
    """Table 27 (one row per run) and Table 28 (per environment, pooled, sorted by mean)."""
    by_model = [{"run": name, **length_stats(rs)} for name, rs in runs.items() if rs]
    pooled: dict[str, list[EvalResult]] = defaultdict(list)
    for rs in runs.values():
        for r in rs:
            pooled[r.env].append(r)
    by_env = sorted(
        ({"env": e, **length_stats(rs)} for e, rs in pooled.items()),
        key=lambda row: (row["mean"], row["env"]),
    )
    return {"by_model": by_model, "by_env": by_env}


# ---------------------------------------------------------------------------
# action distributions and the bias audit (Appendix 4.2.1, Figure 8, Table 19)
# ---------------------------------------------------------------------------
def action_counts(
    runs: Runs, envs: Iterable[str] | None = None
) -> dict[str, dict[str, Counter[str]]]:
    """Executed-action counts per run and environment: {env: {run: Counter}}."""
    keep = set(envs) if envs is not None else None
    out: dict[str, dict[str, Counter[str]]] = defaultdict(dict)
    for name, rs in runs.items():
        for r in rs:
            if keep is not None and r.env not in keep:
                continue
            out[r.env].setdefault(name, Counter()).update(r.actions)
    return {e: v for e, v in sorted(out.items()) if any(sum(c.values()) for c in v.values())}


def _normalize(c: Counter[str]) -> dict[str, float]:
    total = sum(c.values())
    return {a: n / total for a, n in c.items()} if total else {}


def action_distributions(runs: Runs, envs: Iterable[str] | None = None) -> dict[str, Any]:
    """Figure 8 data: per environment, each run's action frequencies (rows sum to one).

    Columns are ordered by the pooled frequency in that environment, most
    frequent first; an action never executed by a run has frequency 0.
    """
    out = {}
    for env, per_run in action_counts(runs, envs).items():
        pool = sum(per_run.values(), Counter())
        actions = [a for a, _ in sorted(pool.items(), key=lambda kv: (-kv[1], kv[0]))]
        out[env] = {
            "actions": actions,
            "rows": {
                name: {
                    "n": sum(c.values()),
                    "freq": [_normalize(c).get(a, 0.0) for a in actions],
                }
                for name, c in per_run.items()
            },
            "pool": [pool[a] / sum(pool.values()) for a in actions],
        }
    return out


def total_variation(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """TV distance: half the L1 distance between two distributions over action names.

    Summed in sorted key order, so the float is the same in every process (a set's
    order follows the string hash seed, and float addition is not associative).
    """
    keys = sorted(set(p) | set(q))
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)


def bias_audit(
    runs: Runs,
    envs: Iterable[str] | None = None,
    min_actions: int = BIAS_MIN_ACTIONS,
    excess_threshold: float = BIAS_EXCESS,
    tv_threshold: float = BIAS_TV,
) -> dict[str, Any]:
    """Table 19: each run's largest positive action-frequency excess over the pooled distribution.

    The pooled distribution of a game counts every executed action of every
    given run in that game (runs with more actions weigh more). Only run–game
    groups with at least ``min_actions`` actions are audited. For each run the
    group and action with the largest ``freq_run - freq_pool`` is reported
    with that group's TV distance; the bias flag needs excess ≥ 0.20 and
    TV ≥ 0.20. ``groups`` lists every audited group.
    """
    groups: list[dict[str, Any]] = []
    for env, per_run in action_counts(runs, envs).items():
        pool = _normalize(sum(per_run.values(), Counter()))
        for name, c in per_run.items():
            n = sum(c.values())
            if n < min_actions:
                continue
            p = _normalize(c)
            action, excess = max(
                ((a, p.get(a, 0.0) - pool[a]) for a in pool), key=lambda kv: (kv[1], kv[0])
            )
            groups.append(
                {
                    "run": name,
                    "env": env,
                    "n_actions": n,
                    "action": action,
                    "run_freq": p.get(action, 0.0),
                    "pool_freq": pool[action],
                    "excess": excess,
                    "tv": total_variation(p, pool),
                }
            )
    rows = []
    for name in runs:
        mine = [g for g in groups if g["run"] == name]
        if not mine:
            continue
        best = max(mine, key=lambda g: (g["excess"], g["tv"]))
        rows.append(
            {
                **best,
                "bias": best["excess"] >= excess_threshold - 1e-12
                and best["tv"] >= tv_threshold - 1e-12,
            }
        )
    return {"rows": rows, "groups": groups}


# ---------------------------------------------------------------------------
# fixation and conflicting actions (Appendix 5.2, Table 22)
# ---------------------------------------------------------------------------
def is_fixated(
    r: EvalResult, min_steps: int = FIXATION_MIN_STEPS, share: float = FIXATION_SHARE
) -> bool:
    """Action-fixation proxy: a failed run of ≥ 10 steps with one action ≥ 90% of its steps."""
    if r.passed or r.steps < min_steps or not r.actions:
        return False
    top = Counter(r.actions).most_common(1)[0][1]
    return top >= share * len(r.actions) - 1e-9


def action_fixation(runs: Runs) -> list[dict[str, Any]]:
    """Per run: how many failed episodes meet the fixation proxy, and which."""
    rows = []
    for name, rs in runs.items():
        fixed = [r for r in rs if is_fixated(r)]
        rows.append(
            {
                "run": name,
                "episodes": len(rs),
                "failed": sum(not r.passed for r in rs),
                "fixated": len(fixed),
                "examples": [
                    {
                        "task_id": r.task_id,
                        "run_index": r.run_index,
                        "action": Counter(r.actions).most_common(1)[0][0],
                        "steps": r.steps,
                    }
                    for r in fixed[:10]
                ],
            }
        )
    return rows


def bracketed_actions(text: str) -> list[str]:
    """Every ``[Action:<name>]`` marker in a text, in order (the parser's marker syntax)."""
    from vical.agent.parse import find_markers

    return find_markers(text or "")


def is_conflicting(text: str) -> bool:
    """Two different bracketed action names in one response."""
    return len(set(bracketed_actions(text))) > 1


def log_audit(run_dir: Path) -> dict[str, Any]:
    """Read every episode's ``log.jsonl``: responses, conflicting responses, format retries.

    The response's answer text (any leading ``<think>`` block removed, as the
    agent parsed it) is searched for markers. ``format_retry_episodes`` counts
    episodes where at least one decision needed a format retry.
    """
    responses = conflicting = retry_eps = 0
    examples: list[dict[str, Any]] = []
    for log in sorted(Path(run_dir).glob("episodes/*/log.jsonl")):
        retried = False
        with open(log, encoding="utf-8") as f:
            for line in f:
                if '"response"' not in line and '"decision"' not in line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if rec.get("type") == "response":
                    responses += 1
                    text = rec.get("answer")
                    text = rec.get("text", "") if text is None else text
                    if is_conflicting(text):
                        conflicting += 1
                        if len(examples) < 10:
                            examples.append(
                                {
                                    "episode": log.parent.name,
                                    "step": rec.get("step"),
                                    "markers": bracketed_actions(text),
                                }
                            )
                elif rec.get("type") == "decision" and rec.get("format_retries"):
                    retried = True
        retry_eps += retried
    return {
        "responses": responses,
        "conflicting": conflicting,
        "format_retry_episodes": retry_eps,
        "examples": examples,
    }


def limitations(
    runs: Runs,
    columns: Mapping[str, Mapping[str, float | None]],
    audits: Mapping[str, dict[str, Any]],
) -> list[dict[str, Any]]:
    """Table 22 per run: category gaps, overflow, fixation, conflicting responses.

    ``columns`` maps run name to its Table-1 column scores. The dynamics gap is
    Dynamic − Static and the memory gap Multiple − Single (negative = worse).
    """
    fix = {row["run"]: row["fixated"] for row in action_fixation(runs)}
    rows = []
    for name, rs in runs.items():
        c = columns.get(name, {})

        def gap(a: str, b: str, c: Mapping[str, float | None] = c) -> float | None:
            lo, hi = c.get(a), c.get(b)
            return None if lo is None or hi is None else hi - lo

        audit = audits.get(name, {})
        rows.append(
            {
                "run": name,
                "episodes": len(rs),
                "static": c.get("Static"),
                "dynamic": c.get("Dynamic"),
                "dynamic_gap": gap("Static", "Dynamic"),
                "single": c.get("Single"),
                "multiple": c.get("Multiple"),
                "memory_gap": gap("Single", "Multiple"),
                "token_overflow": sum(r.failure_mode == FailureMode.TOKEN_OVERFLOW for r in rs),
                "fixated": fix.get(name, 0),
                "conflicting": audit.get("conflicting"),
                "responses": audit.get("responses"),
                "format_retry_episodes": audit.get("format_retry_episodes"),
            }
        )
    return rows


# ---------------------------------------------------------------------------
# difficulty strata (Appendix 6.1, Eq. 2, Table 23)
# ---------------------------------------------------------------------------
def tier(delta: float) -> str:
    """Eq. 2 thresholds: Easy when Δ > 70, Medium when 30 ≤ Δ ≤ 70, Hard when Δ < 30."""
    d = round(delta, 9)  # so that 80.0 - 10.0 style differences land on the boundary exactly
    if d > EASY_ABOVE:
        return "Easy"
    if d >= HARD_BELOW:
        return "Medium"
    return "Hard"


def difficulty_strata(runs: Runs, random: list[EvalResult]) -> list[dict[str, Any]]:
    """Δ_g = max over the given runs of the run's mean score in g − the random mean in g.

    Means are per environment as in Table 1 (over runs per task, then over
    tasks). Environments that the random reference or every run lacks are
    left out. Rows are sorted by tier (Easy first), then Δ descending.
    """
    rand = env_means(random)
    means = {name: env_means(rs) for name, rs in runs.items()}
    rows = []
    for env in sorted(rand):
        have = {name: m[env] for name, m in means.items() if env in m}
        if not have:
            continue
        best = max(have, key=lambda k: (have[k], k))
        delta = have[best] - rand[env]
        rows.append(
            {
                "env": env,
                "best_run": best,
                "best_score": have[best],
                "random_score": rand[env],
                "delta": delta,
                "tier": tier(delta),
            }
        )
    order = {"Easy": 0, "Medium": 1, "Hard": 2}
    return sorted(rows, key=lambda r: (order[r["tier"]], -r["delta"], r["env"]))


# ---------------------------------------------------------------------------
# attribute associations (Appendix 6.1, Table 24)
# ---------------------------------------------------------------------------
def episode_tokens(r: EvalResult) -> int:
    """Tokens of one episode: input + output.

    The paper sums input, output and reasoning tokens; every vical backend
    already counts reasoning tokens inside ``output_tokens`` (OpenAI's
    completion tokens include them, the Gemini backend adds thoughts), and
    ``reasoning_tokens`` is kept only as a breakdown, so adding it would count
    it twice.
    """
    return int(r.usage.get("input_tokens", 0)) + int(r.usage.get("output_tokens", 0))


def _pointbiserial(binary: list[int], values: list[float]) -> tuple[float | None, float | None]:
    from scipy import stats

    if len(set(binary)) < 2 or len(values) < 3 or len(set(values)) < 2:
        return None, None
    res = stats.pointbiserialr(binary, values)
    return float(res.statistic), float(res.pvalue)


def attribute_associations(runs: Runs) -> dict[str, Any]:
    """Table 24: memory vs score and dynamics vs log tokens, on model–environment cells.

    Memory: each cell is a run's per-environment mean score (as in Table 1);
    the binary attribute is Multiple (1) vs Single (0). Dynamics: each cell's
    tokens are the mean of :func:`episode_tokens` over its episodes; the
    natural log is standardized within run (z-score, population SD) and
    correlated with Dynamic (1) vs Static (0). Cells without tokens and runs
    whose standardized values are undefined (fewer than two cells or no
    spread) are left out of the token test. Group means are of the raw cells.
    """
    mem_x: list[int] = []
    mem_y: list[float] = []
    dyn_x: list[int] = []
    dyn_z: list[float] = []
    tok_groups: dict[str, list[float]] = {"Static": [], "Dynamic": []}
    z_groups: dict[str, list[float]] = {"Static": [], "Dynamic": []}
    score_groups: dict[str, list[float]] = {"Single": [], "Multiple": []}
    for rs in runs.values():
        tags = env_tags(rs)
        for env, s in env_means(rs).items():
            mem = tags[env].get("memory")
            if mem in score_groups:
                score_groups[mem].append(s)
                mem_x.append(int(mem == "Multiple"))
                mem_y.append(s)
        cells: dict[str, list[int]] = defaultdict(list)
        for r in rs:
            cells[r.env].append(episode_tokens(r))
        run_cells = [(env, fmean(v)) for env, v in sorted(cells.items()) if fmean(v) > 0]
        run_cells = [(e, t) for e, t in run_cells if tags[e].get("dynamics") in tok_groups]
        if len(run_cells) < 2:
            continue
        logs = np.log([t for _, t in run_cells])
        if logs.std() == 0:
            continue
        z = (logs - logs.mean()) / logs.std()
        for (env, t), zi in zip(run_cells, z, strict=True):
            dyn = tags[env]["dynamics"]
            tok_groups[dyn].append(t)
            z_groups[dyn].append(float(zi))
            dyn_x.append(int(dyn == "Dynamic"))
            dyn_z.append(float(zi))
    r_mem, p_mem = _pointbiserial(mem_x, mem_y)
    r_dyn, p_dyn = _pointbiserial(dyn_x, dyn_z)

    def means(groups: dict[str, list[float]]) -> dict[str, float | None]:
        return {k: (fmean(v) if v else None) for k, v in groups.items()}

    return {
        "memory_score": {
            "cells": len(mem_y),
            "group_means": means(score_groups),
            "values": score_groups,
            "r_pb": r_mem,
            "p": p_mem,
        },
        "dynamics_tokens": {
            "cells": len(dyn_z),
            "group_means": means(tok_groups),
            "values": z_groups,
            "r_pb": r_dyn,
            "p": p_dyn,
        },
    }


# ---------------------------------------------------------------------------
# demonstration context (Appendix 1.2, Figure 6) and same-start trajectories (Figure 9)
# ---------------------------------------------------------------------------
def demo_context(tasks: list[TaskSpec] | None = None) -> dict[str, Any]:
    """Figure 6 data: sampled demo frames per task (start + one per action + terminal, per clip).

    Read from the task specs (the demo clips are data). Tasks without demo
    clips are listed, not counted as zero.
    """
    from vical.demos.stats import task_frames
    from vical.spec import all_tasks

    tasks = all_tasks() if tasks is None else tasks
    frames = {t.id: task_frames(t) for t in tasks if t.variant.demos}
    values = list(frames.values())
    return {
        "tasks": len(tasks),
        "frames": frames,
        "without_demos": [t.id for t in tasks if not t.variant.demos],
        "clips_per_task": dict(sorted(Counter(len(t.variant.demos) for t in tasks).items())),
        "min": min(values) if values else None,
        "max": max(values) if values else None,
        "mean": fmean(values) if values else None,
        "median": float(np.median(values)) if values else None,
    }


def provenance(task_ids: Iterable[str]) -> dict[str, Any]:
    """Who made the start sequences and demo clips of the evaluated tasks.

    Read from the installed task data (its digest is named): ``starts`` counts the
    tasks' start sequences by origin (paper, generated, human), ``clips`` their
    distinct demo clips (search, scripted, human; :func:`vical.spec.origin_counts`).
    Task ids the task data does not hold are listed in ``unknown``, not counted.
    """
    from vical.spec import all_tasks, origin_counts, tasks_digest

    known = {t.id: t for t in all_tasks()}
    ids = sorted(set(task_ids))
    tasks = [known[i] for i in ids if i in known]
    return {
        "tasks": len(tasks),
        "unknown": [i for i in ids if i not in known],
        "digest": tasks_digest(),
        **origin_counts(tasks),
    }


def pick_strip_task(runs: Runs) -> str | None:
    """A task every run played, preferring one whose episodes differ in outcome, then length."""
    sets = [{r.task_id for r in rs} for rs in runs.values() if rs]
    if not sets:
        return None
    common = sorted(set.intersection(*sets))
    if not common:
        return None

    def spread(task: str) -> tuple[int, int, int]:
        eps = [r for rs in runs.values() for r in rs if r.task_id == task]
        return (len({r.passed for r in eps}), len({tuple(r.actions) for r in eps}), -len(task))

    return max(common, key=lambda t: (spread(t), t))


def trajectory_rows(runs: Runs, task_id: str, max_per_run: int = 3) -> list[dict[str, Any]]:
    """Figure 9 rows: each run's episodes of one task, with actions, outcome and start frame.

    ``same_start`` tells whether the episode's first frame hash equals the
    first row's (the same fixed initial state).
    """
    rows = []
    first: str | None = None
    for name, rs in runs.items():
        eps = sorted((r for r in rs if r.task_id == task_id), key=lambda r: r.run_index)
        for r in eps[:max_per_run]:
            start = r.frame_hashes[0] if r.frame_hashes else None
            first = start if first is None else first
            rows.append(
                {
                    "run": name,
                    "run_index": r.run_index,
                    "actions": list(r.actions),
                    "max_steps": r.max_steps,
                    "passed": r.passed,
                    "score": r.score,
                    "outcome": r.outcome or (str(r.failure_mode) if r.failure_mode else None),
                    "same_start": start == first,
                    "episode": episode_name(r.task_id, r.run_index),
                }
            )
    return rows
