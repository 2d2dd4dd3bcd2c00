"""Every record of an episode's log, and every request rebuilt rather than read.

An episode's ``log.jsonl`` is the protocol's transcript. :func:`check_log` walks
it record by record as the episode runner and the agent wrote it (``start``;
per decision ``agent_session`` first, ``request``, ``api_error``, ``response``,
``decision``; then ``step`` or ``agent_failure``; ``end`` last) and refuses a
log that lacks any record, holds one out of place, or holds one more, naming
the episode and the record.

For a backend that speaks the request protocol
(:class:`vical.agent.protocol.ProtocolAgent`) every request is rebuilt from this
vical's task data, the run's declared condition and the logged replies, and every
reply parsed again (:class:`vical.submit.protocolcheck.ProtocolCheck`), so a
relabelled condition fails unless every request of every episode was forged to
match.

Which of these a log holds depends on the run's agent, whose kind must be declared
in :mod:`vical.submit.kinds` (default-deny: an agent no kind declares is refused
before any log is read). The references log decisions only, and each is re-derived
here: the ``random`` agent's from the episode seed, the ``plan`` expert's from the
plan file packaged with vical (:class:`_Derived`); a person's play (``human``) logs a
session and decisions whose actions only the replay checks.

What is taken from the log: the replies (the model's words) and the sha256 of
each live frame's JPEG; the latter is checked against the replayed frame in the
replay stage (:func:`vical.submit.replay.replay_one`).

A coupled run (``vical wm couple``, the run manifest's ``world_model``) logs an
``imagined`` record before each decision's other records: the world model's
reply for every candidate action, its frames stored as PNG in ``media/``. The
record is checked against the declared condition and its PNGs
(:func:`vical.wm.couple.check_imagined`), and the imagined frames a request
showed are rebuilt from those logged replies
(:class:`vical.submit.protocolcheck.ProtocolCheck`), so a request that showed
other imagined frames than the logged replies fails like any other altered
request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vical.bounded import json_depth_ok
from vical.submit.cursor import Cursor
from vical.submit.kinds import agent_kind
from vical.submit.protocolcheck import ProtocolCheck
from vical.submit.verdict import VerifyError

MAX_LOG_LINE = 1 << 20  # a longer log line is not something vical writes
MAX_LOG_DEPTH = 64  # JSON nesting deeper than this is not something vical writes


@dataclass
class LogFacts:
    """What a checked log says: the task, the actions, each agent session's settings,
    and the sha256 of the JPEG sent for each decision's frame (by step)."""

    task: str | None
    actions: list[Any]
    sessions: list[dict[str, Any]] = field(default_factory=list)
    frame_jpegs: dict[int, str] = field(default_factory=dict)
    # a coupled run: each decision's imagined rollouts (vical.wm.couple.CheckedRollout) by step
    imagined: dict[int, list[Any]] = field(default_factory=dict)


def read_log(path: Path, rel: str) -> list[dict[str, Any]]:
    """The records of one ``log.jsonl``, each a JSON object with a string ``type``."""
    records: list[dict[str, Any]] = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            if len(raw) > MAX_LOG_LINE:
                raise VerifyError("log", f"{rel}: line {n} is longer than {MAX_LOG_LINE} bytes")
            if not json_depth_ok(raw, MAX_LOG_DEPTH):
                raise VerifyError("log", f"{rel}: line {n} nests deeper than {MAX_LOG_DEPTH}")
            try:
                rec = json.loads(raw)
            except (ValueError, RecursionError):  # JSONDecodeError and bad UTF-8 included
                raise VerifyError("log", f"{rel}: line {n} is not JSON") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
                raise VerifyError(
                    "log", f"{rel}: line {n} is not a record (a JSON object with a type)"
                )
            rec["_line"] = n
            records.append(rec)
    return records


def check_log(
    folder: Path,
    rel: str,
    task: Any,
    run: Any,
    result: Any,
    wanted: dict[str, Any],
    result_settings: Any,
) -> LogFacts:
    """Check one episode's log (see the module's docstring); raise :class:`VerifyError`.

    ``task``: this vical's task; ``run``: the run manifest; ``result``: the episode's
    ``EvalResult``; ``wanted``: the run's result-changing agent settings, which
    ``result_settings(settings)`` of every agent session must equal.
    """
    log = f"{rel}/log.jsonl"
    records = read_log(folder / "log.jsonl", log)
    cur = Cursor(records, log)
    start = cur.take("start", "first")
    facts = LogFacts(
        task=start.get("task") if isinstance(start.get("task"), str) else None, actions=[]
    )
    if facts.task != result.task_id:
        raise VerifyError("log", f"{log}: starts task {facts.task!r}, not {result.task_id}")
    if start.get("max_steps") != task.max_steps or start.get("actions") != task.action_names:
        raise cur.fail(start, "budget or action names are not this task data's")
    kind = agent_kind(run.agent)
    proto = ProtocolCheck(cur, task, run, folder, log, kind) if kind.records == "protocol" else None
    derived = _derived_actions(kind, task, run, result, start, cur)
    coupling = _coupling(run, log)
    if coupling is not None:
        from vical.wm.couple import FrameDigests

        seen = FrameDigests()
    step = 0
    while True:
        if cur.peek() == "end":
            break
        if cur.peek() is None:
            cur.take("end", f"after step {step}")
        where = f"for the decision at step {step}"
        rollouts = None
        if coupling is not None:
            rollouts = _imagined(cur, coupling, task, result, step, folder, where, seen)
            facts.imagined[step] = rollouts
        if step == 0 and kind.session:
            session = cur.take("agent_session", where)
            settings = session.get("settings")
            if not isinstance(settings, dict):
                raise cur.fail(session, "agent_session without settings")
            if result_settings(settings) != wanted:
                got = result_settings(settings)
                keys = sorted(str(k) for k in set(got) | set(wanted) if got.get(k) != wanted.get(k))
                raise VerifyError(
                    "consistency",
                    f"{log}: agent settings differ from the run's ({', '.join(keys)[:200]})",
                )
            facts.sessions.append(settings)
            if proto is not None:
                proto.session(session, settings)
            else:
                _human_session(cur, session, run, task)
        if proto is not None:
            action, failure = proto.decision(step, result.frame_hashes, facts.frame_jpegs, rollouts)
        elif kind.records == "human":
            action, failure = _human_decision(cur, cur.take("decision", where), step, task), None
        else:
            assert derived is not None
            rec = cur.take("decision", where)
            action, failure = derived.decision(rec, step)
        if action is None:
            rec = cur.take("agent_failure", f"after the failed decision at step {step}")
            if rec.get("failure") != failure or rec.get("step") != step:
                raise cur.fail(rec, "does not repeat the decision's failure")
            break
        rec = cur.take("step", f"after the decision at step {step}")
        if rec.get("step") != step + 1 or rec.get("action") != action:
            raise cur.fail(rec, f"is not step {step + 1} with the decided action")
        facts.actions.append(action)
        step += 1
        if step > task.max_steps:
            raise cur.fail(rec, f"more steps than the task's budget of {task.max_steps}")
    cur.take("end", "last")
    if cur.i != len(records):
        raise cur.fail(records[cur.i], "a record after the end record")
    if step == 0 and kind.session and not facts.sessions:
        raise VerifyError("log", f"{log}: missing agent_session record (no decision was logged)")
    return facts


def _coupling(run: Any, log: str) -> Any:
    """The coupled condition the run manifest declares (None: a plain run)."""
    if getattr(run, "world_model", None) is None:
        return None
    from vical.wm.couple import Coupling

    try:
        return Coupling.from_manifest(run.world_model)
    except ValueError as e:
        raise VerifyError("schema", f"run/manifest.json: world_model: {e}"[:300]) from None


def _imagined(
    cur: Cursor,
    coupling: Any,
    task: Any,
    result: Any,
    step: int,
    folder: Path,
    where: str,
    seen: Any,
) -> list[Any]:
    """The rollouts of a coupled decision's ``imagined`` record, checked."""
    from vical.wm.couple import RECORD, ImaginedError, check_imagined

    rec = cur.take(RECORD, where)
    hashes = result.frame_hashes
    current = hashes[step] if step < len(hashes) else None
    try:
        return check_imagined(
            rec,
            coupling,
            task.action_names,
            result.seed,
            step,
            current,
            folder / "media",
            _jpeg_sha256,
            seen,
        )
    except ImaginedError as e:
        raise cur.fail(rec, str(e)[:300]) from None


def _jpeg_sha256(frame: Any) -> str:
    """The sha256 of the JPEG the protocol shows for a frame (live or imagined)."""
    from vical.agent.media import encode_jpeg, sha256_hex

    return sha256_hex(encode_jpeg(frame))


def _human_session(cur: Cursor, session: dict[str, Any], run: Any, task: Any) -> None:
    """The session a person's play (``vical play``) opens with."""
    if session.get("backend") != run.agent or session.get("task") != task.id:
        raise cur.fail(session, f"not a session of {run.agent!r} on {task.id}")


def _human_decision(cur: Cursor, rec: dict[str, Any], step: int, task: Any) -> str:
    """A person's decision: the action taken (checked by the replay), how and when."""
    action = rec.get("action")
    if rec.get("step") != step:
        raise cur.fail(rec, f"decision for step {rec.get('step')!r}, expected {step}")
    if action not in task.action_names or rec.get("failure") is not None:
        raise cur.fail(rec, f"not one of the task's actions: {str(action)[:40]!r}")
    if set(rec) - {"type", "step", "action", "failure", "input", "wall_seconds", "_line"}:
        raise cur.fail(rec, "a field a person's decision does not have")
    return str(action)


class _Derived:
    """The decisions of an agent whose actions are re-derived here (the ``random``
    reference from the episode seed, the ``plan`` expert from the packaged plans)."""

    def __init__(self, cur: Cursor, actions: Any, fill: str, expert: str | None, plan: bool):
        self.cur = cur
        self.actions = actions  # the planned actions (plan), or a seeded random.Random
        self.fill = fill
        self.expert = expert
        self.plan = plan

    def decision(self, rec: dict[str, Any], step: int) -> tuple[Any, Any]:
        cur = self.cur
        if rec.get("step") != step:
            raise cur.fail(rec, f"decision for step {rec.get('step')!r}, expected {step}")
        if rec.get("failure") is not None:
            raise cur.fail(rec, "a reference agent never fails a decision")
        if self.plan:
            if self.expert is None:
                want, source = self.fill, "no plan"
            elif step < len(self.actions):
                want, source = self.actions[step], "plan"
            else:
                want, source = self.fill, "fill"
            extra = {"source": source, **({"expert": self.expert} if step == 0 else {})}
        else:
            want, extra = self.actions.choice(self.fill), {}
        expected = {"type": "decision", "step": step, "action": want, **extra}
        got = {k: v for k, v in rec.items() if k != "_line"}
        if got != expected:
            what = "the seed's" if not self.plan else "the packaged plan's"
            raise cur.fail(
                rec,
                f"is not {what} decision for step {step} (action {str(rec.get('action'))[:40]!r}, "
                f"re-derived {want!r})",
            )
        return want, None


_PLANS: dict[tuple[str, int], Any] = {}


def packaged_plans() -> Any:
    """The plan file packaged with vical (:data:`vical.agent.plans.DEFAULT_PLANS`), read
    once (None when it is absent); :class:`VerifyError` when it cannot be used here."""
    from vical.agent import plans
    from vical.errors import VicalError

    path = plans.DEFAULT_PLANS
    if not path.is_file():
        return None
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _PLANS:
        try:
            _PLANS[key] = plans.load_plans(path)
        except VicalError as e:
            raise VerifyError(
                "agent", f"the packaged expert plans cannot be used: {e}"[:300]
            ) from None
    return _PLANS[key]


def _derived_actions(
    kind: Any, task: Any, run: Any, result: Any, start: dict[str, Any], cur: Cursor
) -> _Derived | None:
    """How a reference agent's decisions are re-derived (None: another kind)."""
    import random

    from vical.run.episode import episode_seed

    if kind.records not in ("seeded", "plan"):
        return None
    seed = episode_seed(run.run_seed, result.task_id, result.run_index)
    if start.get("seed") != seed or result.seed != seed:
        raise cur.fail(start, f"the episode seed is not the run's ({seed})")
    if kind.records == "seeded":
        # as vical.agent.backends.random.RandomAgent draws: one generator per episode
        return _Derived(cur, random.Random(seed), task.action_names, None, plan=False)
    from vical.agent.plans import fill_action

    plans = packaged_plans()
    declared = run.agent_settings.get("plans_sha256")
    if plans is None or declared != plans.sha256:
        raise VerifyError(
            "agent",
            f"run/manifest.json: a plan run made with plans {str(declared)[:16]!r}, not the "
            "plan file packaged with this vical; only the packaged plans can be re-derived",
        )
    plan = plans.tasks.get(task.id)
    return _Derived(
        cur,
        plan.actions if plan else (),
        fill_action(task),
        plan.expert if plan else None,
        plan=True,
    )
