"""Audit a run folder: every scored episode, both criteria, one file per episode.

For each episode of ``<run>/episodes`` that is a result (infrastructure
failures are not) the auditor is asked each criterion in its own conversation
(:func:`vical.audit.prompt.audit_message`). The request goes through the
auditor backend's own request path (:meth:`vical.agent.protocol.ProtocolAgent.ask`),
so it gets exactly the evaluation's transport retries, backoff, Retry-After cap,
redaction and failure classification.

A reply that is not an acceptable verdict (:func:`vical.audit.verdict.check_verdict`)
is kept, and the auditor is told what was wrong and asked again, at most
``verdict_retries`` times; after that the criterion is recorded as
``invalid`` with every reply it gave. Nothing is inferred from a bad reply.

Per criterion, ``status`` is one of:

``valid``           a verdict was accepted (``verdict`` holds it);
``invalid``         every reply was refused (``attempts`` says why);
``context_length``  the evidence does not fit the auditor's context;
``api_error``       the endpoint or network failed after the transport retries: an
                    infrastructure failure, not a result; the next ``vical audit`` of
                    the run asks again.

Results go to ``<run>/audit/<episode>.json``, written atomically after each
criterion, so an interrupted audit loses at most one request. A later audit
skips every criterion whose status is final (all but ``api_error``) unless the
episode's ``eval_result.json`` changed since (a re-run episode is audited
afresh). After ``max_consecutive_errors`` infrastructure failures in a row the
audit stops, as an evaluation does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vical.audit.evidence import Evidence, Message, Part, load_evidence
from vical.audit.prompt import audit_message, prompt_sha256, retry_message
from vical.audit.verdict import CRITERIA, VerdictError, check_verdict
from vical.errors import AgentConfigError, RunFolderError
from vical.outcomes import FailureMode
from vical.run.results import atomic_write_json, file_sha256, load_results

if TYPE_CHECKING:
    from vical.agent.media import Media
    from vical.agent.protocol import ProtocolAgent

SCHEMA_VERSION = 1
VALID = "valid"
INVALID = "invalid"
CONTEXT_LENGTH = "context_length"
API_ERROR = "api_error"
FINAL_STATUSES = (VALID, INVALID, CONTEXT_LENGTH)
STATUSES = (*FINAL_STATUSES, API_ERROR)
DEFAULT_VERDICT_RETRIES = 2


@dataclass
class AuditSummary:
    """What one ``vical audit`` did."""

    run_dir: Path
    episodes: int = 0  # scored episodes in the run
    audited: int = 0  # episodes asked at least once this time
    skipped: int = 0  # episodes already complete
    statuses: Counter[str] = field(default_factory=Counter)  # per criterion, this time
    verdict_retries: int = 0  # follow-ups sent after refused replies
    refused: Counter[str] = field(default_factory=Counter)  # refused replies by error kind
    stopped_by_breaker: bool = False


def audit_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "audit"


def audit_path(run_dir: Path, episode: str) -> Path:
    return audit_dir(run_dir) / f"{episode}.json"


def load_audit(run_dir: Path, episode: str) -> dict[str, Any] | None:
    """An episode's audit record, or None when there is none."""
    path = audit_path(run_dir, episode)
    if not path.is_file():
        return None
    try:
        obj = json.loads(path.read_text())
    except ValueError as e:
        raise RunFolderError(f"{path}: not readable JSON ({e}); delete it to audit again") from e
    return obj if isinstance(obj, dict) else None


def load_audits(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every audit record of a run, by episode name."""
    folder = audit_dir(run_dir)
    if not folder.is_dir():
        return {}
    out = {}
    for p in sorted(folder.glob("*.json")):
        rec = load_audit(run_dir, p.stem)
        if rec is not None:
            out[p.stem] = rec
    return out


def _frames_for_videos(evidence: Evidence, task: Any) -> None:
    """Replace demonstration videos by their captioned frames (for an image-only auditor)."""
    if not any(p.get("type") == "video" for t in evidence.turns for p in t.parts):
        return
    from vical.demos import load_demo_package

    by_sha = {hashlib.sha256(d.mp4).hexdigest(): d for d in load_demo_package(task) if d.mp4}
    for turn in evidence.turns:
        parts: list[Part] = []
        for p in turn.parts:
            if p.get("type") != "video":
                parts.append(p)
                continue
            demo = by_sha.get(p["sha256"])
            if demo is None:
                raise RunFolderError(
                    f"{evidence.episode}: a demonstration video matches no clip of {task.id}"
                )
            parts.append({"type": "text", "text": "(the video's frames, in order:)"})
            for jpeg in demo.frames_jpeg:
                sha = hashlib.sha256(jpeg).hexdigest()
                evidence.media[sha] = (jpeg, "image/jpeg")
                parts.append({"type": "image", "sha256": sha, "mime": "image/jpeg"})
        turn.parts[:] = parts


def _errors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = ("kind", "reason", "status", "message", "retry_after", "wait_s", "gave_up")
    return [{k: r.get(k) for k in keep} for r in records if r.get("type") == "api_error"]


def audit_criterion(
    agent: ProtocolAgent,
    evidence: Evidence,
    criterion: str,
    task: Any,
    *,
    verdict_retries: int = DEFAULT_VERDICT_RETRIES,
) -> dict[str, Any]:
    """Ask one criterion about one episode; the criterion's record (see the module doc)."""
    from vical.agent.base import EpisodeContext
    from vical.agent.parse import split_think

    # each criterion is a conversation of its own
    agent.start(EpisodeContext(task=task, run_index=0, seed=0, action_names=[], max_steps=0))
    rules = (task.env.rules.basic, task.env.rules.detailed)
    message: Message = audit_message(evidence, criterion, rules)
    media: Media | None = evidence.media  # sent with the first message
    attempts: list[dict[str, Any]] = []
    api_errors: list[dict[str, Any]] = []
    usage: dict[str, int] = {}
    status, verdict = INVALID, None
    while True:
        exchange = agent.ask(message, media)
        media = None
        api_errors += _errors(exchange.records)
        for k, v in exchange.usage.items():
            usage[k] = usage.get(k, 0) + v
        reply = exchange.reply
        if reply is None:
            overflow = exchange.failure == FailureMode.TOKEN_OVERFLOW
            status = CONTEXT_LENGTH if overflow else API_ERROR
            break
        answer, think = split_think(reply.text)
        attempt: dict[str, Any] = {"text": reply.text}
        reasoning = "\n\n".join(r for r in (reply.reasoning, think) if r) or None
        if reasoning:
            attempt["reasoning"] = reasoning
        attempts.append(attempt)
        try:
            verdict = check_verdict(answer, criterion, evidence.facts)
        except VerdictError as e:
            attempt["refused"] = {"kind": e.kind, "reason": e.message}
            if len(attempts) > verdict_retries:
                break
            message = retry_message(e.message, criterion)
            continue
        status = VALID
        break
    return {
        "status": status,
        "verdict": verdict,
        "attempts": attempts,
        "api_errors": api_errors,
        "usage": usage,
    }


def _is_done(record: dict[str, Any] | None, result_sha: str) -> bool:
    if not record or record.get("eval_result_sha256") != result_sha:
        return False
    crit = record.get("criteria") or {}
    return all((crit.get(c) or {}).get("status") in FINAL_STATUSES for c in CRITERIA)


def audit_episode(
    agent: Any,
    run_dir: Path,
    result: Any,
    *,
    verdict_retries: int = DEFAULT_VERDICT_RETRIES,
) -> dict[str, Any] | None:
    """Audit one episode's criteria not final yet; its record, or None when none was due.

    The record is written (atomically) after each criterion.
    """
    from vical.outcomes import episode_name
    from vical.spec import get_task

    name = episode_name(result.task_id, result.run_index)
    folder = run_dir / "episodes" / name
    result_sha = file_sha256(folder / "eval_result.json")
    old = load_audit(run_dir, name)
    if _is_done(old, result_sha):
        return None
    if old is not None and old.get("eval_result_sha256") != result_sha:
        old = None  # the episode was played again since: audit it afresh
    task = get_task(result.task_id)
    evidence = load_evidence(folder)
    if agent.demo_transport != "video":
        _frames_for_videos(evidence, task)
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "episode": name,
        "task_id": result.task_id,
        "env": result.env,
        "run_index": result.run_index,
        "eval_result_sha256": result_sha,
        "evidence_sha256": evidence.digest(),
        "prompt_sha256": prompt_sha256(),
        "auditor": agent.settings(),
        "criteria": dict((old or {}).get("criteria") or {}),
    }
    for criterion in CRITERIA:
        done = record["criteria"].get(criterion) or {}
        if done.get("status") in FINAL_STATUSES:
            continue
        rec = audit_criterion(agent, evidence, criterion, task, verdict_retries=verdict_retries)
        record["criteria"][criterion] = {**rec, "new": True}
        record["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        atomic_write_json(audit_path(run_dir, name), _stored(record))
    return record


def _stored(record: dict[str, Any]) -> dict[str, Any]:
    """The record as written: without the in-memory ``new`` marks."""
    criteria = {
        c: {k: v for k, v in rec.items() if k != "new"} for c, rec in record["criteria"].items()
    }
    return {**record, "criteria": criteria}


def _count(summary: AuditSummary, record: dict[str, Any]) -> bool:
    """Add an episode's new criteria to the summary; whether one failed on the endpoint."""
    infra = False
    for rec in record["criteria"].values():
        if not rec.get("new"):
            continue
        summary.statuses[rec["status"]] += 1
        summary.refused.update(a["refused"]["kind"] for a in rec["attempts"] if "refused" in a)
        summary.verdict_retries += max(0, len(rec["attempts"]) - 1)
        infra = infra or rec["status"] == API_ERROR
    return infra


@dataclass(frozen=True)
class _AuditJob:
    """One episode to audit, as a worker process receives it."""

    run_dir: str
    backend: str
    agent_kwargs: dict[str, Any]
    verdict_retries: int
    result: Any


# the auditor client of this process, per (backend, options): one per worker process
_AUDITORS: dict[str, Any] = {}


def _auditor_key(backend: str, agent_kwargs: dict[str, Any]) -> str:
    return json.dumps([backend, agent_kwargs], sort_keys=True, default=repr)


def _forget_auditors() -> None:
    """In a new worker: the parent's clients (their connections) are not this process's."""
    _AUDITORS.clear()


def _audit_job(job: _AuditJob) -> dict[str, Any] | None:
    from vical.agent.base import get_agent

    key = _auditor_key(job.backend, job.agent_kwargs)
    agent = _AUDITORS.get(key)
    if agent is None:
        agent = _AUDITORS[key] = get_agent(job.backend, **job.agent_kwargs)
    return audit_episode(agent, Path(job.run_dir), job.result, verdict_retries=job.verdict_retries)


def _remove_temporaries(run_dir: Path) -> None:
    """The temporary files of audit records a stopped worker was writing."""
    for tmp in audit_dir(run_dir).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


def audit_run(
    run_dir: Path,
    backend: str,
    agent_kwargs: dict[str, Any],
    *,
    verdict_retries: int = DEFAULT_VERDICT_RETRIES,
    max_consecutive_errors: int = 5,
    preflight: bool = True,
    workers: int = 1,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
) -> AuditSummary:
    """Audit every scored episode of ``run_dir`` not audited yet; the summary.

    ``backend`` and ``agent_kwargs`` build the auditor exactly as ``vical eval``
    builds an agent (``endpoint``, ``model``, ``temperature``, ...). ``workers``
    episodes are audited at once, on worker processes with an auditor client
    each (:func:`vical.run.pool.run_pool`, as ``vical eval`` plays episodes):
    SIGINT or SIGTERM stops them at once, so no request is sent after it,
    and raises :class:`vical.run.pool.Interrupted`; every record already written
    is kept (each is written whole after each criterion) and the next audit asks
    only what is missing. ``progress`` is called with each audited episode's name
    and record.
    """
    from vical.agent.base import get_agent
    from vical.agent.protocol import ProtocolAgent
    from vical.run.pool import run_pool
    from vical.run.runner import lock_run_folder

    if verdict_retries < 0:
        raise ValueError(f"verdict_retries must be 0 or more, not {verdict_retries}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    run_dir = Path(run_dir)
    results = load_results(run_dir)
    summary = AuditSummary(run_dir=run_dir, episodes=len(results))
    streak = 0

    def on_result(
        job: _AuditJob, record: dict[str, Any] | None, error: BaseException | None
    ) -> bool:
        nonlocal streak
        if error is not None:
            raise error
        if record is None:
            summary.skipped += 1
            return True
        summary.audited += 1
        infra = _count(summary, record)
        streak = streak + 1 if infra else 0
        if progress is not None:
            progress(record["episode"], _stored(record))
        if streak >= max_consecutive_errors:
            summary.stopped_by_breaker = True
            return False
        return True

    key = _auditor_key(backend, agent_kwargs)
    try:
        first = _AUDITORS[key] = get_agent(backend, **agent_kwargs)
        if not isinstance(first, ProtocolAgent):
            raise AgentConfigError(
                f"backend {backend!r} talks to no model; an auditor needs a model backend "
                "(openai-chat, openai-responses, gemini, openrouter)"
            )
        if preflight:
            first.preflight()
        with lock_run_folder(run_dir):
            jobs = [
                _AuditJob(str(run_dir), backend, dict(agent_kwargs), verdict_retries, r)
                for r in results
            ]
            clean = lambda: _remove_temporaries(run_dir)  # noqa: E731
            run_pool(
                _audit_job,
                jobs,
                min(workers, max(1, len(jobs))),
                on_result,
                initializer=_forget_auditors,
                on_abort=clean,
                on_interrupt=clean,
            )
    finally:
        for agent in _AUDITORS.values():
            agent.close()
        _AUDITORS.clear()
    return summary
