"""Every record of an episode's log, and every request rebuilt rather than read.

An episode's ``log.jsonl`` is the protocol's transcript. :func:`check_log` walks
it record by record as the episode runner and the agent wrote it (``start``;
per decision ``agent_session`` first, ``request``, ``api_error``, ``response``,
``decision``; then ``step`` or ``agent_failure``; ``end`` last) and refuses a
log that lacks any record, holds one out of place, or holds one more, naming
the episode and the record.

For a backend that speaks the request protocol
(:class:`vical.agent.protocol.ProtocolAgent`) every user message is rebuilt from
this vical's task data, the run's declared condition (rules text, whether
demonstrations were shown, the backend's demonstration transport) and the
logged replies, with the protocol's own pure builders
(:func:`vical.agent.protocol.first_message` and the others); the logged
``append`` of every request must equal the rebuilt messages exactly, and the
request body rendered from them with the backend's own renderer must have the
logged ``request_sha256``. Each reply is parsed again: the parse, the retries and
the decision must be what the protocol makes of that reply. So a relabelled
condition (demonstrations claimed but never shown, or shown in a ``--no-demos``
run; basic rules declared detailed or the reverse) fails unless every request
of every episode was forged to match.

Which of these a log holds depends on the run's agent, whose kind must be declared
in :mod:`vical.submit.kinds` (default-deny: an agent no kind declares is refused
before any log is read). The references log decisions only, and each is re-derived
here: the ``random`` agent's from the episode seed, the ``plan`` expert's from the
plan file packaged with vical (:class:`_Derived`); a person's play (``human``) logs a
session and decisions whose actions only the replay checks.

What is taken from the log: the replies (the model's words) and the sha256 of
each live frame's JPEG; the latter is checked against the replayed frame in the
replay stage (:func:`vical.submit.verify.replay_one`).

A coupled run (``vical wm couple``, the run manifest's ``world_model``) logs an
``imagined`` record before each decision's other records: the world model's
reply for every candidate action, its frames stored as PNG in ``media/``. The
record is checked against the declared condition and its PNGs
(:func:`vical.wm.couple.check_imagined`), and the imagined frames a request
showed are rebuilt from those logged replies (JPEG-encoded as the protocol
encodes a frame, :func:`vical.agent.protocol.imagination_parts`), so a request
that showed other imagined frames than the logged replies fails like any
other altered request.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vical.bounded import json_depth_ok
from vical.submit.kinds import AgentKind, agent_kind, protocol_backend
from vical.submit.verdict import VerifyError

MAX_LOG_LINE = 1 << 20  # a longer log line is not something vical writes
MAX_LOG_DEPTH = 64  # JSON nesting deeper than this is not something vical writes
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_MIME_EXT = {"image/jpeg": "jpg", "image/png": "png", "video/mp4": "mp4"}


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


class _Cursor:
    """The log's records read in order, each expected by name."""

    def __init__(self, records: list[dict[str, Any]], rel: str):
        self.records = records
        self.i = 0
        self.rel = rel

    def peek(self) -> str | None:
        return self.records[self.i]["type"] if self.i < len(self.records) else None

    def take(self, kind: str, where: str) -> dict[str, Any]:
        if self.i >= len(self.records):
            raise VerifyError("log", f"{self.rel}: missing {kind} record {where} (the log ends)")
        rec = self.records[self.i]
        if rec["type"] != kind:
            raise VerifyError(
                "log",
                f"{self.rel}: missing {kind} record {where}: line {rec['_line']} is a "
                f"{str(rec['type'])[:40]!r} record",
            )
        self.i += 1
        return rec

    def fail(self, rec: dict[str, Any], what: str) -> VerifyError:
        return VerifyError("log", f"{self.rel}: line {rec['_line']} ({rec['type']}): {what}")


def _int(v: Any) -> bool:
    return type(v) is int


def _media_part(part: Any, kinds: tuple[str, ...]) -> bool:
    return (
        isinstance(part, dict)
        and set(part) == {"type", "sha256", "mime"}
        and part["type"] in kinds
        and isinstance(part["sha256"], str)
        and bool(_HEX64.match(part["sha256"]))
        and part["mime"] in _MIME_EXT
    )


class _Media(dict[str, tuple[bytes, str]]):
    """An episode's media files by sha256, read when a request first names them."""

    def __init__(self, folder: Path, rel: str):
        super().__init__()
        self.folder = folder
        self.rel = rel

    def need(self, part: dict[str, Any]) -> None:
        sha, mime = part["sha256"], part["mime"]
        if sha in self:
            return
        p = self.folder / "media" / f"{sha}.{_MIME_EXT[mime]}"
        if not p.is_file():
            raise VerifyError("log", f"{self.rel}: a request shows media {sha[:12]}, not in media/")
        data = p.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            raise VerifyError("log", f"{self.rel}: media/{p.name} does not match its sha256")
        self[sha] = (data, mime)


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
    cur = _Cursor(records, log)
    start = cur.take("start", "first")
    facts = LogFacts(
        task=start.get("task") if isinstance(start.get("task"), str) else None, actions=[]
    )
    if facts.task != result.task_id:
        raise VerifyError("log", f"{log}: starts task {facts.task!r}, not {result.task_id}")
    if start.get("max_steps") != task.max_steps or start.get("actions") != task.action_names:
        raise cur.fail(start, "budget or action names are not this task data's")
    kind = agent_kind(run.agent)
    proto = _Protocol(cur, task, run, folder, log, kind) if kind.records == "protocol" else None
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
    cur: _Cursor,
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
    from vical.agent.protocol import encode_jpeg, sha256_hex

    return sha256_hex(encode_jpeg(frame))


def imagined_part(jpeg_sha256: str) -> dict[str, Any]:
    """The JPEG part the protocol shows for an imagined frame (as for a live frame)."""
    return {"type": "image", "sha256": jpeg_sha256, "mime": "image/jpeg"}


def _human_session(cur: _Cursor, session: dict[str, Any], run: Any, task: Any) -> None:
    """The session a person's play (``vical play``) opens with."""
    if session.get("backend") != run.agent or session.get("task") != task.id:
        raise cur.fail(session, f"not a session of {run.agent!r} on {task.id}")


def _human_decision(cur: _Cursor, rec: dict[str, Any], step: int, task: Any) -> str:
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

    def __init__(self, cur: _Cursor, actions: Any, fill: str, expert: str | None, plan: bool):
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
    kind: Any, task: Any, run: Any, result: Any, start: dict[str, Any], cur: _Cursor
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


class _Protocol:
    """The request protocol of one episode, rebuilt decision by decision."""

    def __init__(self, cur: _Cursor, task: Any, run: Any, folder: Path, log: str, kind: AgentKind):
        self.cur = cur
        self.task = task
        self.run = run
        self.log = log
        self.cls = protocol_backend(kind)
        self.media = _Media(folder, log)
        self.history: list[dict[str, Any]] = []
        self.logged = 0
        self.requests = 0
        self.settings: dict[str, Any] = {}
        self.demos: list[list[dict[str, Any]]] = []
        self.transport = "frames"
        self.jpeg_of: dict[str, str] = {}  # frame sha256 -> JPEG sha256 (one per frame)
        self.cache: Any = None

    # -- the session: the condition the run declares -----------------------------------
    def session(self, rec: dict[str, Any], settings: dict[str, Any]) -> None:
        from vical.agent.bodies import ConversationCache

        cur, run, task = self.cur, self.run, self.task
        if rec.get("backend") != run.agent or settings.get("backend", run.agent) != run.agent:
            raise cur.fail(rec, f"the session's backend is not the run's {run.agent!r}")
        if rec.get("task") != task.id:
            raise cur.fail(rec, "the session names another task")
        if rec.get("rules") != run.rules:
            raise cur.fail(
                rec,
                f"an agent session ran with {str(rec.get('rules'))[:20]} rules, the run declares {run.rules}",
            )
        self.transport = settings.get("demo_transport", self.cls.demo_transport)
        if self.transport not in ("frames", "video"):
            raise cur.fail(rec, "unknown demonstration transport")
        demos = rec.get("demos")
        clips = [c for c in task.variant.demos] if run.demos else []
        if not isinstance(demos, list) or len(demos) != len(clips):
            shown = len(demos) if isinstance(demos, list) else "no"
            raise cur.fail(
                rec,
                f"the session lists {shown} demonstration(s), the run's condition "
                f"(demos {'on' if run.demos else 'off'}) gives this task {len(clips)}",
            )
        for i, (d, clip) in enumerate(zip(demos, clips, strict=True), start=1):
            if not isinstance(d, dict) or d.get("clip_id") != _clip_id(clip):
                raise cur.fail(rec, f"demonstration {i} is not this task's clip {_clip_id(clip)!r}")
            if self.transport == "video":
                sha = d.get("mp4_sha256")
                parts = [{"type": "video", "sha256": sha, "mime": "video/mp4"}]
            else:
                shas = d.get("frames_jpeg_sha256")
                if not isinstance(shas, list) or not shas:
                    raise cur.fail(rec, f"demonstration {i} lists no frames")
                parts = [{"type": "image", "sha256": s, "mime": "image/jpeg"} for s in shas]
            for p in parts:
                if not _media_part(p, ("image", "video")):
                    raise cur.fail(rec, f"demonstration {i} names no media by sha256")
            if [p["sha256"] for p in parts] != canonical_demo_media(task, clip, self.transport):
                raise cur.fail(
                    rec,
                    f"demonstration {i}'s media are not the rendering of clip "
                    f"{_clip_id(clip)!r} (frames edited, added or left out)",
                )
            self.demos.append(parts)
        self.settings = settings
        media = self.media

        def render(m: dict[str, Any]) -> dict[str, Any]:
            return self.cls.render_message(m, media)

        self.cache = ConversationCache(render, self.cls.assemble, self.cls.conversation_field)

    # -- one decision -------------------------------------------------------------------
    def _frame(
        self, step: int, hashes: list[Any], jpegs: dict[int, str], logged: Any
    ) -> dict[str, Any]:
        """The frame part the logged message holds where the rebuilt one has a frame."""
        if not _media_part(logged, ("image",)) or logged["mime"] != "image/jpeg":
            raise VerifyError("log", f"{self.log}: the frame of step {step} is not a JPEG part")
        frame = hashes[step] if step < len(hashes) else None
        if not isinstance(frame, str):
            raise VerifyError(
                "log", f"{self.log}: a request shows step {step}, past the result's frames"
            )
        known = self.jpeg_of.setdefault(frame, logged["sha256"])
        if known != logged["sha256"]:
            raise VerifyError("log", f"{self.log}: one frame sent as two different JPEGs")
        jpegs.setdefault(step, logged["sha256"])
        return dict(logged)

    def _expect(
        self,
        step: int,
        turn: int,
        prev: str | None,
        hashes: list[Any],
        jpegs: dict[int, str],
        got: Any,
        rollouts: list[Any] | None = None,
    ) -> dict[str, Any]:
        """The rebuilt user message of a turn, its frame part taken from ``got`` and, in a
        coupled run, its imagined frames rebuilt from the logged ``rollouts``."""
        from vical.agent.protocol import first_message, imagination_parts, next_message

        imagined = imagination_parts(
            [(r.action, [imagined_part(j) for j in r.jpeg_sha256]) for r in rollouts or []]
        )
        # where the frame sits in the rebuilt message: known from the builder's layout
        try:
            content = got[-1]["content"] if isinstance(got, list) and got else None
        except (KeyError, TypeError):
            content = None
        placeholder = {"type": "image", "sha256": "0" * 64, "mime": "image/jpeg"}
        if turn == 0:
            msg = first_message(
                self.task,
                self.task.action_names,
                self.task.max_steps,
                self.run.rules,
                self.demos,
                self.transport,
                placeholder,
                imagined,
            )
            at = len(msg["content"]) - 2
        else:
            assert prev is not None
            msg = next_message(prev, placeholder, imagined)
            at = 1
        logged = content[at] if isinstance(content, list) and len(content) > at else None
        if _media_part(logged, ("image",)):
            msg["content"][at] = self._frame(step, hashes, jpegs, logged)
        return msg

    def decision(
        self, step: int, hashes: list[Any], jpegs: dict[int, str], rollouts: list[Any] | None = None
    ) -> tuple[str | None, str | None]:
        from vical.agent.parse import parse_reply
        from vical.agent.protocol import reply_message, retry_message

        cur = self.cur
        where = f"for the decision at step {step}"
        turn = 0 if not self.history else 1
        prev = None
        if turn:
            prev = self._prev_action
        max_format, max_transport = self._retry_limits()
        format_retries = transport_total = 0
        conflicts: list[Any] = []
        pending: dict[str, Any] | None = None
        action: str | None = None
        failure: str | None = None
        while True:
            attempt = 0
            while True:
                rec = self._request(step, attempt, where)
                append = rec.get("append")
                if attempt == 0:
                    if pending is None:
                        pending = self._expect(step, turn, prev, hashes, jpegs, append, rollouts)
                    digest = self._first_attempt(rec, append, pending)
                elif append != []:
                    raise cur.fail(rec, "a transport retry appends messages")
                if rec.get("request_sha256") != digest:
                    raise cur.fail(rec, "the logged request_sha256 is not the rebuilt request's")
                if cur.peek() == "api_error":
                    failure = self._api_error(attempt, max_transport, where)
                    if failure is not None:
                        transport_total += attempt
                        break
                    attempt += 1
                    continue
                resp, text = self._response(step, where)
                transport_total += attempt
                break
            if failure is not None:
                break
            parsed = parse_reply(text, self.task.action_names)
            if resp.get("parse") != parsed.as_record():
                raise cur.fail(resp, "the logged parse is not what the protocol makes of the reply")
            assert pending is not None and isinstance(text, str)
            self.history.append(pending)
            self.history.append(reply_message(text))
            if parsed.conflicting:
                conflicts.append(parsed.markers)
            if parsed.action is not None:
                action = parsed.action
                break
            if format_retries >= max_format:
                failure = "invalid_action"
                break
            format_retries += 1
            pending = retry_message(parsed, self.task.action_names)
        self._check_decision(
            step,
            {
                "step": step,
                "action": action,
                "failure": failure,
                "format_retries": format_retries,
                "transport_retries": transport_total,
                "conflicting_actions": conflicts,
            },
        )
        self._prev_action = action
        return action, failure

    def _retry_limits(self) -> tuple[Any, Any]:
        """The run's format and transport retry limits (whole numbers, or VerifyError)."""
        max_format = self.settings.get("format_retries", 3)
        max_transport = self.settings.get("transport_retries", 3)
        if not _int(max_format) or not _int(max_transport):
            raise VerifyError("log", f"{self.log}: retry settings are not whole numbers")
        return max_format, max_transport

    def _request(self, step: int, attempt: int, where: str) -> dict[str, Any]:
        """The next request record, which must be this decision's next attempt."""
        cur = self.cur
        rec = cur.take("request", where)
        self.requests += 1
        if (
            rec.get("step") != step
            or rec.get("request_index") != self.requests
            or rec.get("transport_attempt") != attempt
        ):
            raise cur.fail(
                rec, f"expected request {self.requests}, attempt {attempt}, of step {step}"
            )
        return rec

    def _first_attempt(self, rec: dict[str, Any], append: Any, pending: dict[str, Any]) -> Any:
        """Check a request's first attempt: it appends the messages not yet logged, then
        ``pending``; the sha256 of the request rebuilt from them."""
        cur = self.cur
        expected = [*self.history[self.logged :], pending]
        if append != expected:
            raise cur.fail(rec, _difference(append, expected, self.run))
        messages = [*self.history, pending]
        self.logged = len(messages)
        for msg in messages[len(self.history) :]:
            for part in msg["content"]:
                if "sha256" in part:
                    self.media.need(part)
        try:
            return self.cache.prepare(messages, self.settings, body=False).sha256
        except VerifyError:
            raise
        except Exception as e:  # settings a renderer refuses
            raise cur.fail(rec, f"the request cannot be rendered: {type(e).__name__}") from None

    def _api_error(self, attempt: int, max_transport: Any, where: str) -> str | None:
        """Read the api_error answering the current request: the decision's failure it
        ends in, or None when the protocol sends the request again."""
        from vical.agent.protocol import CONTEXT_LENGTH, RETRYABLE

        err = self.cur.take("api_error", where)
        if err.get("request_index") != self.requests:
            raise self.cur.fail(err, "answers another request")
        ekind = err.get("kind")
        if ekind == CONTEXT_LENGTH:
            return "token_overflow"
        if ekind != RETRYABLE or attempt >= max_transport or "gave_up" in err:
            return "api_error"
        return None

    def _response(self, step: int, where: str) -> tuple[dict[str, Any], str]:
        """The response answering the current request, and its text."""
        resp = self.cur.take("response", where)
        if resp.get("request_index") != self.requests or resp.get("step") != step:
            raise self.cur.fail(resp, "answers another request")
        text = resp.get("text")
        if not isinstance(text, str):
            raise self.cur.fail(resp, "the reply text is not a string")
        return resp, text

    def _check_decision(self, step: int, expected: dict[str, Any]) -> None:
        """The decision record must say what the protocol decided from the replies."""
        dec = self.cur.take("decision", f"after the requests of step {step}")
        got = {k: dec.get(k) for k in expected}
        if got != expected:
            keys = [k for k in expected if got[k] != expected[k]]
            raise self.cur.fail(
                dec, f"is not what the protocol decides from the replies ({', '.join(keys)})"
            )

    _prev_action: str | None = None


_CANONICAL: dict[tuple[str, str, str], list[str]] = {}


def canonical_demo_media(task: Any, clip: Any, transport: str) -> list[str]:
    """The sha256 of each media part a backend shows for ``clip`` under ``transport``:
    the clip rendered from the task data here (through the demo cache), so the media a
    bundle carries are held to the canonical rendering, not only to their own hashes."""
    from vical.agent.protocol import sha256_hex
    from vical.demos import load_demo_clip

    key = (task.id, str(_clip_id(clip)), transport)
    if key not in _CANONICAL:
        video = load_demo_clip(task, clip)
        if transport == "video":
            _CANONICAL[key] = [sha256_hex(video.mp4)]
        else:
            _CANONICAL[key] = [sha256_hex(f) for f in video.frames_jpeg]
    return _CANONICAL[key]


def _clip_id(clip: Any) -> Any:
    return getattr(clip, "clip_id", getattr(clip, "id", clip))


def _difference(got: Any, expected: list[dict[str, Any]], run: Any) -> str:
    """One line on how a logged ``append`` differs from the rebuilt one."""
    if not isinstance(got, list):
        return "the request's messages are not a list"
    if len(got) != len(expected):
        return f"the request appends {len(got)} message(s), the protocol {len(expected)}"
    for g, e in zip(got, expected, strict=True):
        if g == e:
            continue
        gc = g.get("content") if isinstance(g, dict) else None
        ec = e["content"]
        if isinstance(gc, list):
            shown = sum(
                1 for p in gc if isinstance(p, dict) and p.get("type") in ("video", "image")
            )
            want = sum(1 for p in ec if p.get("type") in ("video", "image"))
            if shown != want:
                return (
                    f"the request shows {shown} media item(s) where the declared condition "
                    f"(demos {'on' if run.demos else 'off'}, {run.rules} rules) gives {want}"
                )
            gt = " ".join(str(p.get("text", "")) for p in gc if isinstance(p, dict))
            et = " ".join(str(p.get("text", "")) for p in ec)
            if gt != et:
                return (
                    "the request's text is not the protocol's under the declared condition "
                    f"({run.rules} rules, demos {'on' if run.demos else 'off'})"
                )
        return "the request's messages are not the protocol's rebuilt ones"
    return "the request's messages are not the protocol's rebuilt ones"
