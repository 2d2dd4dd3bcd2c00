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
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vical.jobs import Pool, in_process
from vical.wm.cases import CASES_FILE, Case, Request, load_cases, load_frames
from vical.wm.controls import INTERVENTIONS, TARGETS, control_target, scored_cases
from vical.wm.models import NEEDS_CASES, WorldModel, get_wm
from vical.wm.score import CaseScore, differ, flagged, score_case, score_context, summarize
from vical.wm.sim import Frame, decode_png, encode_png

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


def opaque_id(salt: str, case_id: str) -> str:
    """The id a request carries for a case: opaque, and fresh for every evaluation
    (``salt``), so an endpoint cannot look a published case up by its id."""
    return hashlib.sha256(f"vical-wm:{salt}:{case_id}".encode()).hexdigest()[:16]


def request_for(
    case: Case, folder: Path, intervention: list[str] | None = None, salt: str = ""
) -> Request:
    """The model's request for a case: its own intervention unless ``intervention`` is
    given; the case id made opaque with ``salt`` (:func:`opaque_id`)."""
    return Request(
        case=opaque_id(salt, case.id),
        env=case.env,
        actions=list(case.actions),
        context=load_frames(folder, case.context_frames),
        context_actions=list(case.context_actions),
        intervention=list(case.intervention if intervention is None else intervention),
    )


def prediction_names(case: Case, prefix: str = "pred") -> list[str]:
    """A case's stored prediction files: ``pred`` under the run's intervention, ``own``
    under the case's own intervention in a control run (the comparison's)."""
    return [f"predictions/{case.id}/{prefix}_{i + 1}.png" for i in range(len(case.intervention))]


def select(cases: list[Case], scenarios: Sequence[str] | None) -> list[Case]:
    if not scenarios:
        return cases
    known = {c.scenario for c in cases}
    unknown = [s for s in scenarios if s not in known]
    if unknown:
        raise KeyError(f"scenarios {unknown} are not in this case set; it has {sorted(known)}")
    return [c for c in cases if c.scenario in scenarios]


def score_group(
    folder: Path,
    group: list[Case],
    control: str,
    own: dict[str, list[Frame]],
    truths: dict[str, list[Frame]],
    scored: list[Case] | None = None,
    preds: dict[str, list[Frame]] | None = None,
    targets: dict[str, list[Frame]] | None = None,
) -> list[CaseScore]:
    """Score one context (``group``: its cases in branch order). ``own``: the model's
    predictions under each case's own intervention; ``truths``: each case's true frames.
    Under a control, ``scored`` are the cases the control scores, ``preds`` the model's
    predictions and ``targets`` the control's targets for them; each is compared with
    the model's own predictions (pairs of requests whose targets differ)."""
    last = load_frames(folder, group[0].context_frames[-1:])[0]
    if control == "own":
        return score_context(group, last, [truths[c.id] for c in group], [own[c.id] for c in group])
    assert scored is not None and preds is not None and targets is not None
    out = []
    for case in scored:
        # noop: one request for the whole context, compared with every branch's; shuffled:
        # the case's reordering compared with its own intervention
        peers = group if control == "noop" else [case]
        target, pred = targets[case.id], preds[case.id]
        n = moved = 0
        for peer in peers:
            if differ(target, truths[peer.id]):
                n += 1
                moved += differ(pred, own[peer.id])
        out.append(score_case(case, last, target, pred, None, None, (n, moved)))
    return out


def summary_of(manifest: dict[str, Any], scores: list[CaseScore]) -> dict[str, Any]:
    """A run's summary: the model, its control intervention and target, the unavailable
    cases by scenario, the means and intervals of :func:`summarize`, and whether the
    predictions look action-blind (:func:`vical.wm.score.flagged`)."""
    control = manifest.get("control", "own")
    unavailable: dict[str, dict[str, Any]] = {}
    for cid, why in sorted((manifest.get("unavailable") or {}).items()):
        entry = unavailable.setdefault(cid.rsplit("/", 1)[0], {"cases": 0, "reasons": []})
        entry["cases"] += 1
        if why not in entry["reasons"]:
            entry["reasons"].append(why)
    out = {
        "model": manifest["model"],
        "control": control,
        "target": TARGETS[control][0],
        "tests": TARGETS[control][1],
        "unavailable": unavailable,
        **summarize(scores),
    }
    out["flag"] = flagged(out)
    return out


# -- pool jobs: one context's cases each ----------------------------------------------
_MODEL: list[WorldModel] = []  # the model this process's jobs predict with (set per run)
_CASES: dict[tuple[str, str], dict[str, Case]] = {}  # the case folder last read here


def _use_model(model: WorldModel | None) -> None:
    """Make ``model`` the one this process's jobs predict with (None: none)."""
    _MODEL.clear()
    if model is not None:
        _MODEL.append(model)


def _cases_by_id(folder: str) -> dict[str, Case]:
    key = (folder, cases_digest(Path(folder)))
    if key not in _CASES:
        _CASES.clear()
        _CASES[key] = {c.id: c for c in load_cases(Path(folder))}
    return _CASES[key]


@dataclass(frozen=True)
class _TargetJob:
    """The control targets of one context's scored cases."""

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
    """One context: predict (with this process's model) or read the stored predictions,
    then score. ``group``: the context's cases; ``scored``: those the run scores (a
    control's, with their ``actions`` and ``targets``)."""

    folder: str
    control: str
    group: tuple[str, ...]
    scored: tuple[str, ...]
    actions: tuple[tuple[str, ...], ...] = ()  # a control's actions for the scored cases
    targets: tuple[tuple[bytes, ...], ...] = ()  # a control's targets (PNG)
    predict: bool = True  # False: read the predictions stored in ``run``
    run: str | None = None
    salt: str = ""


@dataclass(frozen=True)
class _ScoreOut:
    case: str
    files: dict[str, bytes]  # prediction files (PNG) by run-relative name, when predicted
    score: CaseScore


def _predict(case: Case, folder: Path, actions: list[str], salt: str) -> list[bytes]:
    model = _MODEL[0]
    frames = model.predict(request_for(case, folder, actions, salt), case)
    if len(frames) != len(actions):
        raise ValueError(
            f"{case.id}: {model.name} returned {len(frames)} frames for {len(actions)} actions"
        )
    return [encode_png(np.asarray(f, dtype=np.uint8)) for f in frames]


def _score_job(job: _ScoreJob) -> list[_ScoreOut]:
    folder = Path(job.folder)
    by_id = _cases_by_id(job.folder)
    group = [by_id[i] for i in job.group]
    scored = [by_id[i] for i in job.scored]
    control = job.control
    files: dict[str, bytes] = {}
    own_prefix = "pred" if control == "own" else "own"
    for case in group:  # the model's own predictions of every branch
        names = prediction_names(case, own_prefix)
        if job.predict:
            files.update(
                zip(names, _predict(case, folder, case.intervention, job.salt), strict=True)
            )
        else:
            files.update({n: (Path(str(job.run)) / n).read_bytes() for n in names})
    if control != "own":
        for k, case in enumerate(scored):
            names = prediction_names(case)
            if job.predict:
                pngs = _predict(case, folder, list(job.actions[k]), job.salt)
                files.update(zip(names, pngs, strict=True))
            else:
                files.update({n: (Path(str(job.run)) / n).read_bytes() for n in names})

    def frames(case: Case, prefix: str) -> list[Frame]:
        # scored from the stored bytes, so a re-score of the run finds the same numbers;
        # stored predictions must have the truth's size (checked before decoding)
        size = None
        if not job.predict:
            from vical.bounded import image_header

            size = image_header((folder / case.truth_frames[0]).read_bytes(), "PNG")
        out = []
        for n in prediction_names(case, prefix):
            try:
                out.append(decode_png(files[n], size))
            except ValueError as e:
                raise ValueError(f"{case.id}: prediction {n.rsplit('/', 1)[1]}: {e}") from None
        return out

    own = {c.id: frames(c, own_prefix) for c in group}
    truths = {c.id: load_frames(folder, c.truth_frames) for c in group}
    if control == "own":
        scores = score_group(folder, group, control, own, truths)
    else:
        if job.predict:
            targets = {
                c.id: [decode_png(d) for d in t] for c, t in zip(scored, job.targets, strict=True)
            }
        else:
            targets = {c.id: _target(c, control) for c in scored}
        preds = {c.id: frames(c, "pred") for c in scored}
        scores = score_group(folder, group, control, own, truths, scored, preds, targets)
    out = []
    for case, s in zip(group if control == "own" else scored, scores, strict=True):
        mine = {n: d for n, d in files.items() if n.startswith(f"predictions/{case.id}/")}
        out.append(_ScoreOut(case.id, mine if job.predict else {}, s))
    if control != "own" and job.predict:  # the own predictions of branches not scored
        rest = {
            n: d
            for n, d in files.items()
            if not any(n.startswith(f"predictions/{c.id}/") for c in scored)
        }
        if rest:
            out[0] = _ScoreOut(out[0].case, {**out[0].files, **rest}, out[0].score)
    return out


def _target(case: Case, control: str) -> list[Frame]:
    frames = control_target(case, control).frames
    if frames is None:
        raise ValueError(f"{case.id}: the {control} control has no target here")
    return frames


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


def _whole_contexts(chosen: list[Case], all_cases: list[Case]) -> None:
    """Refuse a selection that cuts a context (its branches are scored together)."""
    sizes: dict[str, int] = {}
    for c in chosen:
        sizes[c.group] = sizes.get(c.group, 0) + 1
    for c in all_cases:
        if c.group in sizes and sizes[c.group] != len(c.branches):
            raise ValueError(f"context {c.group}: only {sizes[c.group]} of its branches chosen")


def evaluate(
    model: WorldModel | str,
    cases_dir: Path,
    out: Path,
    scenarios: Sequence[str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    control: str = "own",
    workers: int = 1,
    pool: Pool | None = None,
    salt: str | None = None,
) -> dict[str, Any]:
    """Run ``model`` on the cases, store its predictions, score them; return the summary.

    ``control``: the intervention the model is given (:mod:`vical.wm.controls`); a
    control run also asks the model for every case's own intervention, which its
    control predictions are compared with (``response``). Requests name their case by
    an opaque id made with ``salt`` (default: fresh random bytes, so a run's requests
    name no case a second run could recognise; it changes no stored byte). The work
    runs as jobs of ``pool`` on ``workers`` processes (``vical wm eval -j`` passes
    :func:`vical.run.pool.run_pool`; default: one at a time here): a control's
    targets first, one job per context (the manifest names them before any
    prediction), then one job per context that predicts and scores its cases.
    Files are written by this process only, each whole or not at all, and the scores
    and summary last, in case order: the same bytes whatever the pool, for a model
    that answers the same each time.
    """
    if control not in INTERVENTIONS:
        raise ValueError(f"control {control!r} is not one of {', '.join(INTERVENTIONS)}")
    cases_dir, out = Path(cases_dir), Path(out)
    all_cases = load_cases(cases_dir)
    chosen = select(all_cases, scenarios)
    _whole_contexts(chosen, all_cases)
    salt = secrets.token_hex(16) if salt is None else salt
    if isinstance(model, str):
        model = make_wm(model, all_cases, cases_dir)
    folder = str(cases_dir)
    try:
        # every control's actions and target are fixed before the model sees a case
        targets: dict[str, _TargetOut] = {}
        candidates = scored_cases(chosen, control)
        if control == "own":
            for c in candidates:
                targets[c.id] = _TargetOut(c.id, list(c.intervention), None, None)
        else:
            target_jobs = [
                _TargetJob(folder, control, tuple(c.id for c in g)) for g in _groups(candidates)
            ]
            _run_jobs(
                pool, _target_job, target_jobs, workers, lambda t: targets.__setitem__(t.case, t)
            )
        cases = [c for c in candidates if targets[c.id].actions is not None]
        if control != "own":
            cases = [c for c in cases if targets[c.id].frames is not None]
        out.mkdir(parents=True, exist_ok=True)
        manifest: dict[str, Any] = {
            "model": model.name,
            "cases_sha256": cases_digest(cases_dir),
            "cases": [c.id for c in cases],
            "case_sha256": {c.id: case_sha256(c) for c in cases},
            "format": 2,
        }
        if control != "own":
            manifest["control"] = control
            manifest["compared"] = [c.id for c in chosen if any(c.group == k.group for k in cases)]
            manifest["interventions"] = {c.id: targets[c.id].actions for c in cases}
            manifest["unavailable"] = {
                c.id: targets[c.id].unavailable
                for c in candidates
                if targets[c.id].actions is None or targets[c.id].frames is None
            }
        # an earlier run's scores must not pass for this one's if it is interrupted
        for stale in (SUMMARY, SCORES):
            (out / stale).unlink(missing_ok=True)
        _write(out / MANIFEST, _json(manifest))
        scores: dict[str, CaseScore] = {}

        def store(item: _ScoreOut) -> None:
            for name, data in sorted(item.files.items()):
                _write(out / name, data)
            scores[item.case] = item.score
            if progress is not None:
                progress(len(scores), len(cases), item.case)

        scored_ids = {c.id for c in cases}
        jobs = []
        for g in _groups(chosen):
            mine = [c for c in g if c.id in scored_ids]
            if not mine:
                continue
            jobs.append(
                _ScoreJob(
                    folder,
                    control,
                    tuple(c.id for c in g),
                    tuple(c.id for c in mine),
                    tuple(tuple(targets[c.id].actions or ()) for c in mine),
                    tuple(tuple(targets[c.id].frames or ()) for c in mine),
                    salt=salt,
                )
            )
        _run_jobs(pool, _score_job, jobs, workers, store, model)
    finally:
        model.close()
    return _write_scores(out, manifest, [scores[c.id] for c in cases])


def make_wm(name: str, all_cases: list[Case], cases_dir: Path) -> WorldModel:
    """A registered world model by name, given what the reference models need (every
    case's intervention, the case folder)."""
    kwargs: dict[str, Any] = {}
    if name in NEEDS_CASES:
        kwargs["cases"] = all_cases
        kwargs["folder"] = cases_dir
    return get_wm(name, **kwargs)


def _write_scores(run: Path, manifest: dict[str, Any], scores: list[CaseScore]) -> dict[str, Any]:
    lines = "".join(json.dumps(s.model_dump(), sort_keys=True) + "\n" for s in scores)
    _write(run / SCORES, lines.encode())
    summary = summary_of(manifest, scores)
    _write(run / SUMMARY, _json(summary))
    return summary


def load_predictions(run: Path, case: Case) -> list[Frame]:
    return [decode_png((Path(run) / n).read_bytes()) for n in prediction_names(case)]


def _stored_jobs(
    run: Path, cases_dir: Path, manifest: dict[str, Any]
) -> tuple[list[Case], list[_ScoreJob]]:
    """The scored cases of a run and the jobs that re-score them from its stored files."""
    all_cases = load_cases(cases_dir)
    by_id = {c.id: c for c in all_cases}
    cases = [by_id[i] for i in manifest["cases"]]
    control = manifest.get("control", "own")
    scored = {c.id for c in cases}
    group_ids = {c.group for c in cases}
    chosen = [c for c in all_cases if c.group in group_ids]
    jobs = [
        _ScoreJob(
            str(cases_dir),
            control,
            tuple(c.id for c in g),
            tuple(c.id for c in g if c.id in scored),
            predict=False,
            run=str(run),
        )
        for g in _groups(chosen)
    ]
    return cases, jobs


def score_run(
    run: Path, cases_dir: Path, workers: int = 1, pool: Pool | None = None
) -> dict[str, Any]:
    """Score a run's stored predictions against the case folder's truth (a control's
    target re-derived from the simulator); write the results. One job of ``pool`` per
    context, as in :func:`evaluate`."""
    run = Path(run)
    manifest = json.loads((run / MANIFEST).read_text())
    cases, jobs = _stored_jobs(run, cases_dir, manifest)
    scores: dict[str, CaseScore] = {}
    _run_jobs(pool, _score_job, jobs, workers, lambda s: scores.__setitem__(s.case, s.score))
    return _write_scores(run, manifest, [scores[c.id] for c in cases])


@dataclass(frozen=True)
class _ReplayJob:
    """Replay one case's intervention in the simulator; compare with its stored truth."""

    folder: str
    case: str


def _replay_job(job: _ReplayJob) -> list[tuple[str, str | None]]:
    from vical.wm.sim import ContextSim, pixels_sha256

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
    # scored against the stored truth of every branch: it must be the simulator's
    need = sorted({b for c in cases for b in c.branches})
    replayed: dict[str, str | None] = {}
    replays = [_ReplayJob(str(cases_dir), cid) for cid in need]
    _run_jobs(pool, _replay_job, replays, workers, lambda r: replayed.__setitem__(*r))
    problems += [f"{cid}: {replayed[cid]}" for cid in need if replayed[cid] is not None]
    scores: dict[str, CaseScore] = {}
    _, jobs = _stored_jobs(run, cases_dir, manifest)
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
