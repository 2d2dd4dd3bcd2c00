"""``vical import-inspect``: an Inspect log of the V-ICAL tasks as a vical run folder.

Each sample's store (:data:`vical.interop.inspect_tasks.STORE_KEY`) holds what its
episode produced: every decision's log records and usage, and the simulator's
result. The importer writes the folder with the runner's own code
(:func:`vical.run.runner.prepare_run`, :func:`vical.run.runner.run_episode`): the
episode is played again in the simulator with an agent that hands back the logged
decisions one by one, so ``manifest.json``, ``log.jsonl`` (start, agent and step
records, end), ``media/``, ``trajectory.png`` and ``eval_result.json`` are exactly
what ``vical eval`` writes. The media are rebuilt, not read from the log: the
demonstration frames (or MP4s) from the task's demonstration package, each live
frame by encoding the replayed frame as the protocol does; every sha256 the logged
requests name must come out again, and the replayed actions, frame hashes, score,
pass flag and failure mode must equal those the sample recorded, or the import
stops.

Not imported as results: samples that errored (an infrastructure failure in vical's
terms: fix the cause and ``inspect eval-retry`` the log) and samples without a
finished episode (cut by a limit). They are listed in the summary; the run is then
incomplete and ``vical submit`` says so. Timings and the playing machine come from
the samples; the self-check (``vical doctor``), which ``vical eval`` runs before an
API run, is recorded as skipped.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vical.agent.base import Agent, Decision, EpisodeContext, Observation
from vical.agent.media import encode_jpeg, sha256_hex
from vical.errors import VicalError
from vical.interop.inspect_agent import BACKEND, inspect_ai_module

_M = TypeVar("_M", bound=BaseModel)


class InspectImportError(VicalError, ValueError):
    """The Inspect log cannot be turned into a run folder; the message says why."""


# -- what is taken from the log: a strict schema --------------------------------------------
# Every field the importer reads from the log is declared here, with its type and bounds;
# a log that holds anything else, or a value out of bounds, is refused in one line. Only
# the decisions (replayed, each request checked) and the timing fields below reach the
# run folder; every result field comes from the replay.
_STRICT = ConfigDict(extra="forbid", strict=True)
_Count = Annotated[int, Field(ge=0, le=10**12)]


class _Info(BaseModel):
    """The eval's metadata (:func:`vical.interop.inspect_tasks.vical`)."""

    model_config = _STRICT
    tasks: list[Annotated[str, Field(max_length=200)]] = Field(min_length=1, max_length=10_000)
    task_pattern: str | None = None
    family: str | None = None
    runs: int = Field(ge=1, le=100)
    run_seed: int = Field(ge=0, le=2**63)
    demos: bool
    rules: Literal["basic", "detailed"]
    demo_transport: Literal["frames", "video"] = "frames"
    format_retries: int = Field(default=3, ge=0, le=100)
    tasks_digest: str
    vical_version: str | None = None


class _Decision(BaseModel):
    model_config = _STRICT
    step: int = Field(ge=0, le=10**6)
    action: str | None
    failure: str | None
    records: list[dict[str, Any]] = Field(max_length=10_000)
    usage: dict[str, _Count] = Field(default_factory=dict, max_length=64)


class _Timing(BaseModel):
    """The only fields of the sample the episode's result takes from the log."""

    model_config = _STRICT
    started_at: str = Field(max_length=40, pattern=r"^\d{4}-\d\d-\d\dT[0-9:.+Z-]+$")
    finished_at: str = Field(max_length=40, pattern=r"^\d{4}-\d\d-\d\dT[0-9:.+Z-]+$")
    wall_seconds: float = Field(ge=0, le=10**7)
    agent_seconds: float = Field(ge=0, le=10**7)


class _Store(BaseModel):
    """One sample's store entry (``vical_player``)."""

    model_config = _STRICT
    format: Literal[1]
    task_id: str = Field(max_length=200)
    run_index: int = Field(ge=0, lt=100)
    seed: int = Field(ge=0, lt=2**32)
    demos: bool
    rules: Literal["basic", "detailed"]
    decisions: list[_Decision] = Field(max_length=100_000)
    result: dict[str, Any]  # compared with the replay's, never copied
    timing: _Timing
    machine: dict[str, Any] | None = None
    cut_short: str | None = None  # the Inspect limit that stopped it (never imported)


def _checked(model: type[_M], data: Any, where: str) -> _M:
    """``data`` validated by ``model``; InspectImportError naming the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(the whole entry)"
        got = str(err.get("input"))[:40] if err["type"] != "missing" else "missing"
        raise InspectImportError(f"{where}: field {loc!r}: {err['msg']} (got {got})") from None


@dataclass
class ImportSummary:
    run_dir: Path
    imported: list[str] = field(default_factory=list)
    errored: list[tuple[str, str]] = field(default_factory=list)  # infrastructure failures
    unfinished: list[str] = field(default_factory=list)


class LoggedAgent(Agent):
    """Hands back the decisions an Inspect sample logged, with the media they name."""

    name = BACKEND

    def __init__(self, episode: str, decisions: list[dict[str, Any]], uses_demos: bool):
        self.episode = episode
        self.decisions = decisions
        self.uses_demos = uses_demos
        self._k = 0
        self._pool: dict[str, tuple[bytes, str]] = {}
        self._emitted: set[str] = set()

    def start(self, ctx: EpisodeContext) -> None:
        self._k = 0
        self._emitted = set()
        self._pool = {}
        for demo in ctx.demos:
            for jpeg in demo.frames_jpeg:
                self._pool[sha256_hex(jpeg)] = (jpeg, "image/jpeg")
            if demo.mp4:
                self._pool[sha256_hex(demo.mp4)] = (demo.mp4, "video/mp4")

    def act(self, obs: Observation) -> Decision:
        if self._k >= len(self.decisions):
            raise InspectImportError(
                f"{self.episode}: the replayed episode goes on after the {self._k} logged "
                "decision(s)"
            )
        d = self.decisions[self._k]
        self._k += 1
        if d.get("step") != obs.step:
            raise InspectImportError(
                f"{self.episode}: decision {self._k} was logged at step {d.get('step')}, "
                f"the replay is at step {obs.step}"
            )
        jpeg = encode_jpeg(obs.frame)
        self._pool.setdefault(sha256_hex(jpeg), (jpeg, "image/jpeg"))
        media: dict[str, tuple[bytes, str]] = {}
        for rec in d["records"]:
            for msg in rec.get("append") or []:
                for part in msg.get("content") or []:
                    sha = part.get("sha256")
                    if not sha or sha in self._emitted:
                        continue
                    if sha not in self._pool:
                        raise InspectImportError(
                            f"{self.episode}: step {obs.step}: the logged request shows media "
                            f"{sha[:12]}, which neither the replayed frame nor the "
                            "demonstrations reproduce"
                        )
                    self._emitted.add(sha)
                    media[sha] = self._pool[sha]
        return Decision(
            action=d["action"],
            failure=d["failure"],
            records=d["records"],
            usage={k: int(v) for k, v in (d.get("usage") or {}).items()},
            media=media,
        )


def _session(decisions: list[dict[str, Any]]) -> dict[str, Any]:
    for d in decisions:
        for rec in d["records"]:
            if rec.get("type") == "agent_session":
                return dict(rec)
    raise InspectImportError("a sample's decisions hold no agent_session record")


def _claims_problems(r: Any, claimed: dict[str, Any]) -> list[str]:
    out = []
    for key in ("actions", "frame_hashes", "score", "passed", "outcome", "failure_mode", "steps"):
        mine = getattr(r, key)
        if mine != claimed.get(key):
            out.append(
                f"{key}: the sample says {str(claimed.get(key))[:60]}, replay {str(mine)[:60]}"
            )
    return out


def import_inspect_log(log: Path, out: Path) -> ImportSummary:
    """Write the run folder ``out`` from the Inspect log ``log`` (see the module docstring)."""
    inspect_ai_module("vical import-inspect")
    from inspect_ai.log import read_eval_log

    from vical.interop.inspect_tasks import STORE_FORMAT, STORE_KEY
    from vical.outcomes import episode_name
    from vical.spec import get_task, tasks_digest

    try:
        ev = read_eval_log(str(log))
    except Exception as e:
        raise InspectImportError(
            f"{log}: not a readable Inspect log ({type(e).__name__}: {e})"
        ) from None
    raw_info = (ev.eval.metadata or {}).get(STORE_KEY)
    if not isinstance(raw_info, dict):
        raise InspectImportError(
            f"{log}: not a log of the V-ICAL Inspect tasks (task {ev.eval.task!r})"
        )
    info = _checked(_Info, raw_info, f"{log}: the eval's metadata").model_dump()
    if info.get("tasks_digest") != tasks_digest():
        raise InspectImportError(
            f"{log}: played with other task data ({str(info.get('tasks_digest'))[:12]}, this "
            f"vical has {tasks_digest()[:12]}); import it with the vical that played it"
        )
    epochs = ev.eval.config.epochs or 1
    if epochs != 1:
        raise InspectImportError(
            f"{log}: {epochs} epochs; V-ICAL runs are samples (-T runs=N), so run with one epoch"
        )
    if not ev.samples:
        raise InspectImportError(f"{log}: the log holds no samples (was it written with them?)")
    if out.exists() and any(out.iterdir()):
        raise InspectImportError(f"{out} exists and is not empty; choose a new --out")

    summary = ImportSummary(run_dir=out)
    played: list[tuple[str, Any, dict[str, Any]]] = []
    for s in sorted(ev.samples, key=lambda s: str(s.id)):
        sid = str(s.id)
        if s.error is not None:
            summary.errored.append((sid, s.error.message.strip().splitlines()[0][:200]))
            continue
        raw = (s.store or {}).get(STORE_KEY)
        if (
            not isinstance(raw, dict)
            or raw.get("format") != STORE_FORMAT
            or raw.get("cut_short")  # stopped by an Inspect limit: not a whole episode
        ):
            summary.unfinished.append(sid)
            continue
        data = _checked(_Store, raw, f"{log}: sample {sid[:80]}").model_dump()
        if data["task_id"] not in info["tasks"]:
            raise InspectImportError(
                f"{log}: sample {sid[:80]}: task {data['task_id'][:80]!r} is not one of the eval's"
            )
        if sid != episode_name(data["task_id"], data["run_index"]):
            raise InspectImportError(f"{log}: sample {sid} holds the episode of {data['task_id']}")
        played.append((sid, s, data))
    if not played:
        raise InspectImportError(f"{log}: no sample holds a finished episode")

    sessions = [_session(d["decisions"]) for _, _, d in played]
    settings = sessions[0]["settings"]
    for (sid, _, _), sess in zip(played, sessions, strict=True):
        if sess["settings"] != settings:
            raise InspectImportError(
                f"{log}: sample {sid} was played with other agent settings than the others"
            )
    try:
        tasks = [get_task(t) for t in info["tasks"]]
    except VicalError as e:
        raise InspectImportError(f"{log}: the eval's metadata: {e}") from None
    created = not out.exists()
    try:
        _write_run(out, log, info, settings, tasks, played, summary)
    except BaseException as e:  # nothing half-written is left behind
        if created:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for child in out.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        if isinstance(e, VicalError) or not isinstance(e, Exception):
            raise
        # the last resort: a record the checks did not foresee is one line, never a traceback
        msg = " ".join(str(e).split())[:200]
        raise InspectImportError(
            f"{log}: cannot be imported ({type(e).__name__}: {msg}); nothing was written"
        ) from e
    return summary


def _write_run(
    out: Path,
    log: Path,
    info: dict[str, Any],
    settings: dict[str, Any],
    tasks: list[Any],
    played: list[tuple[str, Any, dict[str, Any]]],
    summary: ImportSummary,
) -> None:
    from vical.run.doctor import skipped_entry
    from vical.run.results import EvalResult, RunManifest, atomic_write_json
    from vical.run.runner import (
        EpisodeJob,
        RunOptions,
        lock_run_folder,
        prepare_run,
        run_episode,
    )

    with lock_run_folder(out):
        prepare_run(
            out,
            tasks,
            BACKEND,
            settings,
            RunOptions(
                run_seed=int(info["run_seed"]),
                runs=int(info["runs"]),
                demos=bool(info["demos"]),
                rules=str(info["rules"]),
                doctor=skipped_entry(
                    "played through Inspect AI, which does not run the self-check"
                ),
            ),
        )
        machine = played[0][2].get("machine")
        if isinstance(machine, dict):  # shown as the playing machine, never compared
            path = out / "manifest.json"
            m = RunManifest.model_validate_json(path.read_text())
            known = ("cpu_model", "machine", "numpy_features", "cpu_flags", "versions", "env")
            kept = {k: v for k, v in machine.items() if k in known and len(str(v)) <= 2000}
            atomic_write_json(path, m.model_copy(update={"machine": kept}))
        for sid, _, data in played:
            uses_demos = any(rec.get("demos") for d in data["decisions"] for rec in d["records"])
            job = EpisodeJob(
                task_id=data["task_id"],
                run_index=int(data["run_index"]),
                agent=BACKEND,
                agent_kwargs={},
                run_seed=int(info["run_seed"]),
                run_dir=str(out),
                demos=bool(info["demos"]),
                rules=str(info["rules"]),
            )
            agent = LoggedAgent(sid, data["decisions"], uses_demos)
            run_episode(job, agent)
            folder = out / "episodes" / sid
            path = folder / "eval_result.json"
            r = EvalResult.model_validate_json(path.read_text())
            problems = _claims_problems(r, data["result"])
            if r.seed != data["seed"]:
                problems.append(f"seed: the sample says {data['seed']}, the run {r.seed}")
            if agent._k != len(data["decisions"]):
                problems.append(f"{len(data['decisions']) - agent._k} logged decision(s) unused")
            if problems:
                raise InspectImportError(
                    f"{sid}: the replay disagrees with the Inspect sample: " + "; ".join(problems)
                )
            # only the timing fields (_Timing): every result field stays the replay's
            atomic_write_json(path, r.model_copy(update=dict(data["timing"])))
            summary.imported.append(sid)


def summary_lines(s: ImportSummary) -> list[str]:
    lines = [f"{s.run_dir}: {len(s.imported)} episode(s) imported"]
    if s.errored:
        lines.append(
            f"{len(s.errored)} sample(s) errored (infrastructure failures, not results; "
            "`inspect eval-retry` the log, then import again):"
        )
        lines += [f"  {sid}: {msg}" for sid, msg in s.errored]
    if s.unfinished:
        lines.append(
            f"{len(s.unfinished)} sample(s) without a finished episode: " + ", ".join(s.unfinished)
        )
    return lines


def dumps(s: ImportSummary) -> str:
    return json.dumps(
        {
            "run_dir": str(s.run_dir),
            "imported": s.imported,
            "errored": [list(e) for e in s.errored],
            "unfinished": s.unfinished,
        }
    )
