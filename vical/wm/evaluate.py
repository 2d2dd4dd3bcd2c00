"""Running a world model over the cases, storing its predictions, scoring and re-scoring.

A world-model run folder holds ``manifest.json`` (model, control intervention,
case set digest, the cases predicted and those the control has no target for),
``predictions/<case id>/pred_<i>.png`` (every predicted frame), and
``scores.jsonl`` and ``summary.json`` (written last). A run is made under one
intervention (:mod:`vical.wm.controls`): the case's own (scored against the
stored truth) or a control's (scored against the simulator's frames for it,
re-derived whenever the run is scored). Because the predictions are
stored, a run can be re-scored at any time against truth re-derived from the
simulator (:func:`rescore`), which is what ``vical verify`` does for a bundle.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vical.wm.cases import (
    CASES_FILE,
    Case,
    Pool,
    Request,
    decode_png,
    encode_png,
    in_process,
    load_cases,
    load_frames,
)
from vical.wm.controls import INTERVENTIONS, TARGETS, control_target
from vical.wm.models import WorldModel, get_wm
from vical.wm.score import CaseScore, score_case, summarize
from vical.wm.sim import Frame

MANIFEST = "manifest.json"
SCORES = "scores.jsonl"
SUMMARY = "summary.json"


def cases_digest(folder: Path) -> str:
    """sha256 of a case folder's ``cases.jsonl`` (it names every frame's pixel hash)."""
    return hashlib.sha256((Path(folder) / CASES_FILE).read_bytes()).hexdigest()


def _write(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:  # an interrupt too: no stray temporary file is left
        tmp.unlink(missing_ok=True)
        raise


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def case_sha256(case: Case) -> str:
    """sha256 of a case's JSON (as ``cases.jsonl`` writes it): names its frames' pixels too."""
    line = json.dumps(case.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(line.encode()).hexdigest()


def request_for(case: Case, folder: Path, intervention: list[str] | None = None) -> Request:
    """The model's request for a case: its own intervention unless ``intervention`` is given."""
    return Request(
        case=case.id,
        env=case.env,
        actions=list(case.actions),
        context=load_frames(folder, case.context_frames),
        context_actions=list(case.context_actions),
        intervention=list(case.intervention if intervention is None else intervention),
    )


def prediction_names(case: Case) -> list[str]:
    return [f"predictions/{case.id}/pred_{i + 1}.png" for i in range(len(case.intervention))]


def select(cases: list[Case], scenarios: Sequence[str] | None) -> list[Case]:
    if not scenarios:
        return cases
    known = {c.scenario for c in cases}
    unknown = [s for s in scenarios if s not in known]
    if unknown:
        raise KeyError(f"scenarios {unknown} are not in this case set; it has {sorted(known)}")
    return [c for c in cases if c.scenario in scenarios]


def _truths(folder: Path, cases: list[Case], all_cases: list[Case]) -> dict[str, list[Frame]]:
    """True frames of the chosen cases and of every branch of their contexts."""
    by_id = {c.id: c for c in all_cases}
    need = {b for c in cases for b in c.branches}
    return {i: load_frames(folder, by_id[i].truth_frames) for i in sorted(need)}


def score_predictions(
    folder: Path,
    cases: list[Case],
    all_cases: list[Case],
    predictions: Callable[[Case], list[Frame]],
    truths: dict[str, list[Frame]] | None = None,
    control: str = "own",
    targets: Callable[[Case], list[Frame]] | None = None,
) -> list[CaseScore]:
    """Score each case's predictions against its target: the truth (``own``), else the
    control's target (``targets``, or re-derived from the simulator)."""
    if control != "own":
        out = []
        for case in cases:
            if targets is not None:
                frames: list[Frame] | None = targets(case)
            else:
                frames = control_target(case, control).frames
            if frames is None:
                raise ValueError(f"{case.id}: the {control} control has no target here")
            last = load_frames(folder, case.context_frames[-1:])[0]
            out.append(score_case(case, last, frames, predictions(case), None))
        return out
    truths = truths if truths is not None else _truths(folder, cases, all_cases)
    out = []
    for case in cases:
        last = load_frames(folder, case.context_frames[-1:])[0]
        others = [truths[b] for b in case.branches if b != case.id]
        out.append(score_case(case, last, truths[case.id], predictions(case), others))
    return out


def summary_of(manifest: dict[str, Any], scores: list[CaseScore]) -> dict[str, Any]:
    """A run's summary: the model, its control intervention and target, the unavailable
    cases by scenario, and the means and intervals of :func:`summarize`."""
    control = manifest.get("control", "own")
    unavailable: dict[str, dict[str, Any]] = {}
    for cid, why in sorted((manifest.get("unavailable") or {}).items()):
        entry = unavailable.setdefault(cid.rsplit("/", 1)[0], {"cases": 0, "reasons": []})
        entry["cases"] += 1
        if why not in entry["reasons"]:
            entry["reasons"].append(why)
    return {
        "model": manifest["model"],
        "control": control,
        "target": TARGETS[control][0],
        "tests": TARGETS[control][1],
        "unavailable": unavailable,
        **summarize(scores),
    }


# -- pool jobs: one context's cases each ----------------------------------------------
_MODEL: list[WorldModel] = []  # the model this process's jobs predict with (set per run)
_CASES: dict[tuple[str, str], dict[str, Case]] = {}  # the case folder last read here
_TRUTHS: OrderedDict[str, dict[str, list[Frame]]] = OrderedDict()  # by context (group)
TRUTHS_KEPT = 4


def _use_model(model: WorldModel | None) -> None:
    """Make ``model`` the one this process's jobs predict with (None: none)."""
    _MODEL.clear()
    if model is not None:
        _MODEL.append(model)


def _cases_by_id(folder: str) -> dict[str, Case]:
    key = (folder, cases_digest(Path(folder)))
    if key not in _CASES:
        _CASES.clear()
        _TRUTHS.clear()
        _CASES[key] = {c.id: c for c in load_cases(Path(folder))}
    return _CASES[key]


def _context_truths(folder: str, cases: list[Case]) -> dict[str, list[Frame]]:
    """The true frames of every branch of the cases' contexts, each context's decoded
    once per process while its cases come (the last :data:`TRUTHS_KEPT` are kept)."""
    by_id = _cases_by_id(folder)
    out: dict[str, list[Frame]] = {}
    for group in dict.fromkeys(c.group for c in cases):
        if group not in _TRUTHS:
            branches = next(c.branches for c in cases if c.group == group)
            _TRUTHS[group] = {b: load_frames(Path(folder), by_id[b].truth_frames) for b in branches}
            while len(_TRUTHS) > TRUTHS_KEPT:
                _TRUTHS.popitem(last=False)
        out.update(_TRUTHS[group])
    return out


@dataclass(frozen=True)
class _TargetJob:
    """The control targets of one context's cases."""

    folder: str
    control: str
    cases: tuple[str, ...]


@dataclass(frozen=True)
class _TargetOut:
    case: str
    actions: list[str] | None
    frames: list[bytes] | None  # PNG
    unavailable: str | None


def _target_job(job: _TargetJob) -> list[_TargetOut]:
    by_id = _cases_by_id(job.folder)
    out = []
    for cid in job.cases:
        t = control_target(by_id[cid], job.control)
        frames = None if t.frames is None else [encode_png(f) for f in t.frames]
        out.append(_TargetOut(cid, t.intervention, frames, t.unavailable))
    return out


@dataclass(frozen=True)
class _ScoreJob:
    """Predict (with this process's model) or read the stored predictions of one
    context's cases, then score them."""

    folder: str
    control: str
    cases: tuple[str, ...]
    actions: tuple[tuple[str, ...], ...] | None = None  # given: predict with these
    targets: tuple[tuple[bytes, ...], ...] | None = None  # a control's targets (PNG)
    run: str | None = None  # without actions: the run folder holding the predictions


@dataclass(frozen=True)
class _ScoreOut:
    case: str
    predictions: list[bytes] | None  # PNG, when this job predicted them
    score: CaseScore


def _score_job(job: _ScoreJob) -> list[_ScoreOut]:
    folder = Path(job.folder)
    by_id = _cases_by_id(job.folder)
    cases = [by_id[i] for i in job.cases]
    pngs: dict[str, list[bytes]] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for k, case in enumerate(cases):
        if job.actions is None:  # stored predictions: each must have the truth's size
            from vical.bounded import image_header

            run = Path(str(job.run))
            pngs[case.id] = [(run / n).read_bytes() for n in prediction_names(case)]
            sizes[case.id] = image_header((folder / case.truth_frames[0]).read_bytes(), "PNG")
            continue
        model = _MODEL[0]
        frames = model.predict(request_for(case, folder, list(job.actions[k])), case)
        if len(frames) != len(case.intervention):
            raise ValueError(
                f"{case.id}: {model.name} returned {len(frames)} frames for "
                f"{len(case.intervention)} actions"
            )
        pngs[case.id] = [encode_png(np.asarray(f, dtype=np.uint8)) for f in frames]
    # scored from the stored bytes, so a re-score of the run finds the same numbers
    preds: dict[str, list[Frame]] = {}
    for cid, data in pngs.items():
        preds[cid] = []
        for i, d in enumerate(data, start=1):
            try:
                preds[cid].append(decode_png(d, sizes.get(cid)))
            except ValueError as e:
                raise ValueError(f"{cid}: prediction pred_{i}.png: {e}") from None
    if job.targets is not None:
        targets = {
            cid: [decode_png(d) for d in t] for cid, t in zip(job.cases, job.targets, strict=True)
        }
        scores = score_predictions(
            folder,
            cases,
            list(by_id.values()),
            lambda c: preds[c.id],
            control=job.control,
            targets=lambda c: targets[c.id],
        )
    else:
        truths = _context_truths(job.folder, cases) if job.control == "own" else None
        scores = score_predictions(
            folder, cases, list(by_id.values()), lambda c: preds[c.id], truths, job.control
        )
    return [
        _ScoreOut(c.id, None if job.actions is None else pngs[c.id], s)
        for c, s in zip(cases, scores, strict=True)
    ]


def _groups(cases: list[Case]) -> list[list[Case]]:
    """The cases by context, in case order."""
    out: dict[str, list[Case]] = {}
    for c in cases:
        out.setdefault(c.group, []).append(c)
    return list(out.values())


def _run_jobs(
    pool: Pool | None,
    fn: Callable[[Any], list[Any]],
    jobs: list[Any],
    workers: int,
    each: Callable[[Any], None],
    model: WorldModel | None = None,
) -> None:
    """Run ``jobs`` on ``pool``; ``each`` takes every item of every job's answer. A job's
    error stops the run and is raised as it is."""

    def on_result(job: Any, value: Any, error: BaseException | None) -> bool:
        if error is not None:
            raise error
        for item in value:
            each(item)
        return True

    _use_model(model)
    try:
        n = max(1, min(workers, len(jobs)))
        (pool or in_process)(
            fn, jobs, n, on_result, initializer=functools.partial(_use_model, model)
        )
    finally:
        _use_model(None)


def evaluate(
    model: WorldModel | str,
    cases_dir: Path,
    out: Path,
    scenarios: Sequence[str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    control: str = "own",
    workers: int = 1,
    pool: Pool | None = None,
) -> dict[str, Any]:
    """Run ``model`` on the cases, store its predictions, score them; return the summary.

    ``control``: the intervention the model is given (:mod:`vical.wm.controls`);
    cases for which the control has no target are listed, not predicted. The work
    runs as jobs of ``pool`` on ``workers`` processes (``vical wm eval -j`` passes
    :func:`vical.run.pool.run_pool`; default: one at a time here): a control's
    targets first, one job per context (the manifest names them before any
    prediction), then one job per case that predicts and scores it (a worker
    decodes a context's true frames once for its cases). Files are written by this process only,
    each whole or not at all, and the scores and summary last, in case order: the
    same bytes whatever the pool, for a model that answers the same each time.
    """
    if control not in INTERVENTIONS:
        raise ValueError(f"control {control!r} is not one of {', '.join(INTERVENTIONS)}")
    cases_dir, out = Path(cases_dir), Path(out)
    all_cases = load_cases(cases_dir)
    chosen = select(all_cases, scenarios)
    if isinstance(model, str):
        kwargs: dict[str, Any] = {}
        if model == "branch-swap":
            kwargs["interventions"] = {c.id: list(c.intervention) for c in all_cases}
        model = get_wm(model, **kwargs)
    folder = str(cases_dir)
    try:
        # every control's actions and target are fixed before the model sees a case
        targets: dict[str, _TargetOut] = {}
        if control == "own":
            for c in chosen:
                targets[c.id] = _TargetOut(c.id, list(c.intervention), None, None)
        else:
            target_jobs = [
                _TargetJob(folder, control, tuple(c.id for c in g)) for g in _groups(chosen)
            ]
            _run_jobs(
                pool, _target_job, target_jobs, workers, lambda t: targets.__setitem__(t.case, t)
            )
        cases = [c for c in chosen if targets[c.id].actions is not None]
        if control != "own":
            cases = [c for c in cases if targets[c.id].frames is not None]
        out.mkdir(parents=True, exist_ok=True)
        manifest: dict[str, Any] = {
            "model": model.name,
            "cases_sha256": cases_digest(cases_dir),
            "cases": [c.id for c in cases],
            "case_sha256": {c.id: case_sha256(c) for c in cases},
            "format": 1,
        }
        if control != "own":
            manifest["control"] = control
            manifest["interventions"] = {c.id: targets[c.id].actions for c in cases}
            manifest["unavailable"] = {
                c.id: targets[c.id].unavailable
                for c in chosen
                if targets[c.id].actions is None or targets[c.id].frames is None
            }
        # an earlier run's scores must not pass for this one's if it is interrupted
        for stale in (SUMMARY, SCORES):
            (out / stale).unlink(missing_ok=True)
        _write(out / MANIFEST, _json(manifest))
        scores: dict[str, CaseScore] = {}

        def store(item: _ScoreOut) -> None:
            case = by_id[item.case]
            for name, data in zip(prediction_names(case), item.predictions or [], strict=True):
                _write(out / name, data)
            scores[item.case] = item.score
            if progress is not None:
                progress(len(scores), len(cases), item.case)

        by_id = {c.id: c for c in cases}
        jobs = []
        for c in cases:  # one job a case: predictions are stored as they come
            frames = None if control == "own" else (tuple(targets[c.id].frames or ()),)
            actions = (tuple(targets[c.id].actions or ()),)
            jobs.append(_ScoreJob(folder, control, (c.id,), actions, frames))
        _run_jobs(pool, _score_job, jobs, workers, store, model)
    finally:
        model.close()
    return _write_scores(out, manifest, [scores[c.id] for c in cases])


def _write_scores(run: Path, manifest: dict[str, Any], scores: list[CaseScore]) -> dict[str, Any]:
    lines = "".join(json.dumps(s.model_dump(), sort_keys=True) + "\n" for s in scores)
    _write(run / SCORES, lines.encode())
    summary = summary_of(manifest, scores)
    _write(run / SUMMARY, _json(summary))
    return summary


def load_predictions(run: Path, case: Case) -> list[Frame]:
    return [decode_png((Path(run) / n).read_bytes()) for n in prediction_names(case)]


def score_run(
    run: Path, cases_dir: Path, workers: int = 1, pool: Pool | None = None
) -> dict[str, Any]:
    """Score a run's stored predictions against the case folder's truth (a control's
    target re-derived from the simulator); write the results. One job of ``pool`` per
    case, as in :func:`evaluate`."""
    run = Path(run)
    manifest = json.loads((run / MANIFEST).read_text())
    all_cases = load_cases(cases_dir)
    by_id = {c.id: c for c in all_cases}
    cases = [by_id[i] for i in manifest["cases"]]
    control = manifest.get("control", "own")
    jobs = [_ScoreJob(str(cases_dir), control, (c.id,), run=str(run)) for c in cases]
    scores: dict[str, CaseScore] = {}
    _run_jobs(pool, _score_job, jobs, workers, lambda s: scores.__setitem__(s.case, s.score))
    return _write_scores(run, manifest, [scores[c.id] for c in cases])


@dataclass(frozen=True)
class _ReplayJob:
    """Replay one case's intervention in the simulator; compare with its stored truth."""

    folder: str
    case: str


def _replay_job(job: _ReplayJob) -> list[tuple[str, str | None]]:
    from vical.wm.cases import pixels_sha256
    from vical.wm.sim import ContextSim

    case = _cases_by_id(job.folder)[job.case]
    with ContextSim(case.origin, snapshot=False) as sim:
        frames, _ = sim.play(case.intervention)
    if [pixels_sha256(f) for f in frames] != case.truth_sha256:
        return [(case.id, "the simulator's replay differs from the stored truth")]
    stored = load_frames(Path(job.folder), case.truth_frames)
    if [pixels_sha256(f) for f in stored] != case.truth_sha256:  # what scoring reads
        return [(case.id, "the case folder's truth frames differ from the case's hashes")]
    return [(case.id, None)]


def rescore(run: Path, cases_dir: Path, workers: int = 1, pool: Pool | None = None) -> list[str]:
    """Re-derive each case's truth from the simulator and re-score the stored predictions.

    Returns the problems found (empty: the run verifies): a case missing from
    ``cases_dir`` or different from the one the run was made on (its JSON's
    sha256), a case whose replayed truth differs from the stored frames, or a
    stored score that differs from the re-computed one. The replays and the scoring
    run as jobs of ``pool`` on ``workers`` processes (``vical wm verify -j`` passes
    :func:`vical.run.pool.run_pool`; default: one at a time here), with the same
    result whatever the pool.
    """
    run = Path(run)
    manifest = json.loads((run / MANIFEST).read_text())
    all_cases = load_cases(cases_dir)
    by_id = {c.id: c for c in all_cases}
    problems: list[str] = []
    claimed = manifest.get("case_sha256") or {}
    for i in manifest["cases"]:
        if i not in by_id:
            problems.append(f"{i}: no such case in {cases_dir}")
        elif claimed.get(i) != case_sha256(by_id[i]):
            problems.append(f"{i}: the run was made on a different version of this case")
    if problems:
        return problems
    cases = [by_id[i] for i in manifest["cases"]]
    control = manifest.get("control", "own")
    if control != "own":
        problems = _control_problems(manifest, cases, by_id, control)
        if problems:
            return problems
    else:  # scored against the stored truth: it must be the simulator's
        need = sorted({b for c in cases for b in c.branches})
        replayed: dict[str, str | None] = {}
        replays = [_ReplayJob(str(cases_dir), cid) for cid in need]
        _run_jobs(pool, _replay_job, replays, workers, lambda r: replayed.__setitem__(*r))
        problems += [f"{cid}: {replayed[cid]}" for cid in need if replayed[cid] is not None]
    scores: dict[str, CaseScore] = {}
    jobs = [_ScoreJob(str(cases_dir), control, (c.id,), run=str(run)) for c in cases]
    _run_jobs(pool, _score_job, jobs, workers, lambda s: scores.__setitem__(s.case, s.score))
    fresh = {c.id: scores[c.id].model_dump() for c in cases}
    return problems + _check_stored(run, manifest, fresh)


def _check_stored(run: Path, manifest: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """Problems of the stored scores and summary against the re-computed scores."""
    from vical.bounded import MemberError, parse_json

    problems = []
    stored = []
    for n, line in enumerate((run / SCORES).read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            s = parse_json(line)
        except MemberError as e:
            return [
                f"{SCORES}: line {n} is {e}" if str(e) == "not JSON" else f"{SCORES}: line {n} {e}"
            ]
        if not isinstance(s, dict) or not isinstance(s.get("case"), str):
            return [f"{SCORES}: line {n} is not a score record (an object naming its case)"]
        stored.append(s)
    for s in stored:
        if fresh.get(s["case"]) != s:
            problems.append(
                f"{s['case']}: stored score {str(s.get('score'))[:20]} does not re-derive"
            )
    if len(stored) != len(fresh):
        problems.append(f"{len(stored)} stored scores for {len(fresh)} cases")
    try:
        summary = parse_json((run / SUMMARY).read_bytes())
    except MemberError as e:
        return [*problems, f"{SUMMARY}: {e}"]
    again = summary_of(manifest, [CaseScore.model_validate(v) for v in fresh.values()])
    if summary != again:
        problems.append(f"{SUMMARY}: its means and intervals do not re-derive from the scores")
    return problems


def _control_problems(
    manifest: dict[str, Any], cases: list[Case], by_id: dict[str, Case], control: str
) -> list[str]:
    """A run made under a control: each case's control actions and its unavailable
    cases must re-derive (its scores are then checked against the replayed targets)."""
    from vical.wm.controls import control_actions

    problems = []
    claimed = manifest.get("interventions") or {}
    for case in cases:
        actions, _ = control_actions(case, control)
        if actions is None or claimed.get(case.id) != actions:
            problems.append(f"{case.id}: the {control} actions do not re-derive")
    for cid, why in (manifest.get("unavailable") or {}).items():
        if cid not in by_id or control_target(by_id[cid], control).unavailable != why:
            problems.append(f"{cid}: the {control} control is not unavailable for it as stated")
    return problems
