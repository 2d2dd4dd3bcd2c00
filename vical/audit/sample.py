"""The stratified blind sample of audited episodes for human verification (paper Appendix 3.5).

Strata are environments. Within each environment, ``per_env`` task
configurations are drawn at random among those every sampled run can offer (an
episode whose two criteria both have a valid verdict), and the *same* tasks
are taken for every run, so models are compared on the same configurations.
Every such episode of every run becomes one case. The draw depends only on the
seed and the task ids, so the same runs and seed give the same sample.

Blindness: a case is known by an opaque id (a hash of the seed, the run's
position and the episode) and the cases are shuffled, so neither the order nor
the id tells which run (model) a case comes from. The sample file records where
each case lives, for the tools; the labelling page never shows it, nor the
auditor's verdicts.

Sample file (JSON): ``schema_version``, ``seed``, ``per_env``, ``runs`` (run
folder paths), ``cases``: ``[{"case", "run" (index into runs), "episode",
"env", "task_id"}]``.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from vical.audit.runner import VALID, load_audits
from vical.audit.verdict import CRITERIA
from vical.errors import RunFolderError

SAMPLE_SCHEMA = 1


def _valid_episodes(run_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """task id -> [(episode, env)] of the run's episodes with both verdicts valid."""
    from vical.outcomes import episode_name
    from vical.run.results import load_results

    audits = load_audits(run_dir)
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in load_results(run_dir):
        name = episode_name(r.task_id, r.run_index)
        crit = (audits.get(name) or {}).get("criteria") or {}
        if all((crit.get(c) or {}).get("status") == VALID for c in CRITERIA):
            out[r.task_id].append((name, r.env))
    return out


def stratified_sample(runs: list[Path], *, per_env: int = 3, seed: int = 0) -> dict[str, Any]:
    """The sample (see the module doc) over ``runs``."""
    if per_env < 1:
        raise ValueError(f"per_env must be at least 1, not {per_env}")
    if not runs:
        raise ValueError("name at least one audited run folder")
    runs = [Path(r).resolve() for r in runs]
    offered = [_valid_episodes(r) for r in runs]
    common = set(offered[0]).intersection(*offered[1:])
    if not common:
        raise RunFolderError(
            "no task has an episode with valid verdicts in every run; audit the runs first "
            "(vical audit RUN --backend …)"
        )
    by_env: dict[str, list[str]] = defaultdict(list)
    for task in sorted(common):
        by_env[offered[0][task][0][1]].append(task)
    cases: list[dict[str, Any]] = []
    for env, tasks in sorted(by_env.items()):
        rng = random.Random(f"{seed}|{env}")
        for task in sorted(rng.sample(tasks, min(per_env, len(tasks)))):
            for i, episodes in enumerate(offered):
                for name, _ in episodes[task]:
                    key = f"{seed}|{i}|{name}".encode()
                    cases.append(
                        {
                            "case": hashlib.sha256(key).hexdigest()[:12],
                            "run": i,
                            "episode": name,
                            "env": env,
                            "task_id": task,
                        }
                    )
    random.Random(f"{seed}|order").shuffle(cases)
    return {
        "schema_version": SAMPLE_SCHEMA,
        "seed": seed,
        "per_env": per_env,
        "runs": [str(r) for r in runs],
        "cases": cases,
    }


def load_sample(path: Path) -> dict[str, Any]:
    """A sample file, checked for the fields the tools need."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RunFolderError(f"{path}: not a readable sample file ({e})") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("cases"), list) or "runs" not in obj:
        raise RunFolderError(
            f"{path}: not a sample file (make one with `vical audit sample RUN… --out FILE`)"
        )
    return obj


def case_folder(sample: dict[str, Any], case: dict[str, Any]) -> Path:
    """The episode folder of one case."""
    episode: str = case["episode"]
    return Path(sample["runs"][case["run"]]) / "episodes" / episode


def case_run(sample: dict[str, Any], case: dict[str, Any]) -> Path:
    return Path(sample["runs"][case["run"]])
