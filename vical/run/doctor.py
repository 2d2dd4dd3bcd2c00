"""``vical doctor``: does this machine reproduce the simulators bit for bit?

Verification replays a submitter's actions on the maintainer's machine and
expects every frame hash, score and pass flag to come out equal (DESIGN.md,
invariant 1). The float-physics simulators (classic control, highway, Flappy
Bird, Breakout) compute in float64, and a CPU, a libm or numpy's run-time SIMD
dispatch can change the last bit of a result; such a bit drifts until a frame
changes. The doctor finds that before it costs an evaluation: it replays
episodes whose every step was recorded by a maintainer and names the first
step and quantity that differ.

What is replayed, per environment (:func:`probes`):

* its longest stored demonstration clip (over every task of the environment),
  from the clip's own start (:func:`vical.demos.render.clip_task`);
* one random-agent episode of its first task, its actions drawn as the runner's
  random agent would for run 0 of run seed 0
  (:func:`vical.run.episode.episode_seed`).

What is compared, per step (step 0 is the start frame): the frame's sha256
(its first :data:`HASH_CHARS` hex digits), the score's ``repr`` and, where the
adapter exposes float state through a ``doctor_state()`` method returning
``{name: float or list of floats}``, each of those floats as ``float.hex``; at
the end, the outcome. An adapter without the hook records no state.

The record is one JSON file of package data, ``vical/data/doctor.json``
(:data:`RECORD`; ``$VICAL_DOCTOR_RECORD`` or an argument points elsewhere),
written by ``vical doctor --record`` (:mod:`vical.run.doctor_record`): the recorded
actions of every episode, its per-step observations, the task-data digest (a
record of other task data is reported as stale, naming the changed task files)
and the machine that recorded it. Recording is deterministic: the same code
and task data write the same bytes, up to the ``recorded_on`` machine.

``--quick`` (:data:`QUICK_STEPS` steps of each episode of the float-physics
environments) is what ``vical eval`` runs before an API backend's first
request; its result, and this machine's CPU (:func:`vical.run.machine.machine`), go into the run
manifest and from there into the bundle's fingerprint.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vical import __version__
from vical.errors import VicalError
from vical.run.machine import WIDTH
from vical.spec import TASKS_DIR, TaskSpec, all_tasks, get_task, tasks_digest
from vical.spec.families import FAMILIES

RECORD_FORMAT = 1
RECORD = Path(__file__).resolve().parents[1] / "data" / "doctor.json"
RECORD_VAR = "VICAL_DOCTOR_RECORD"  # another record to check against (tests, maintainers)
STATE_HOOK = "doctor_state"  # the adapter method that exposes float state
HASH_CHARS = 16
# the families whose simulators integrate float physics (what --quick replays)
FLOAT_FAMILIES = frozenset(f.name for f in FAMILIES.values() if f.float_physics)
QUICK_STEPS = 40  # covers the float games' clips (highway drive39 first diverged at 25)

State = dict[str, str | list[str]]


class DoctorError(VicalError):
    """The doctor cannot run as asked (unknown environment, unreadable record)."""


# ---------------------------------------------------------------------------
# what is replayed
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """One episode the doctor replays: a demonstration clip, or a random episode."""

    env: str
    task_id: str
    kind: str  # "clip" | "random"
    clip_id: str | None = None
    seed: int | None = None

    @property
    def label(self) -> str:
        if self.kind == "clip":
            return f"{self.task_id} clip {self.clip_id}"
        return f"{self.task_id} random seed {self.seed}"


def probes(tasks_dir: Path = TASKS_DIR) -> dict[str, list[Probe]]:
    """Per environment (sorted by key): its longest clip (the first of equal length,
    in task-file order) and a random episode of its first task."""
    from vical.run.episode import episode_seed

    by_env: dict[str, list[TaskSpec]] = {}
    for t in all_tasks(tasks_dir):
        by_env.setdefault(t.env.env, []).append(t)
    out: dict[str, list[Probe]] = {}
    for env in sorted(by_env):
        tasks = by_env[env]
        chosen: list[Probe] = []
        best: tuple[int, str, str] | None = None
        for t in tasks:
            for c in t.variant.demos:
                if best is None or len(c.actions) > best[0]:
                    best = (len(c.actions), t.id, c.id)
        if best is not None:
            chosen.append(Probe(env, best[1], "clip", clip_id=best[2]))
        first = tasks[0].id
        chosen.append(Probe(env, first, "random", seed=episode_seed(0, first, 0)))
        out[env] = chosen
    return out


def episode_task(probe: Probe, tasks_dir: Path) -> tuple[TaskSpec, list[str] | None]:
    """The task a probe plays and, for a clip, the clip's actions."""
    task = get_task(probe.task_id, tasks_dir)
    if probe.kind != "clip":
        return task, None
    from vical.demos.render import clip_task

    for clip in task.variant.demos:
        if clip.id == probe.clip_id:
            return clip_task(task, clip), list(clip.actions)
    raise DoctorError(f"{probe.task_id} has no demonstration clip {probe.clip_id!r}")


def float_state(adapter: object) -> State:
    """The adapter's ``doctor_state()`` as float hex strings (empty without the hook)."""
    hook = getattr(adapter, STATE_HOOK, None)
    if hook is None:
        return {}
    out: State = {}

    def put(name: str, value: Any) -> None:
        if isinstance(value, dict):  # nested names: {"ego": {"y": ...}} is "ego.y"
            for k, v in value.items():
                put(f"{name}.{k}", v)
        elif isinstance(value, int | float) or getattr(value, "ndim", None) == 0:
            out[name] = float(value).hex()
        else:
            out[name] = [float(v).hex() for v in value]

    for name, value in hook().items():
        put(str(name), value)
    return out  # in the hook's order: the first name that differs is reported


def observe(env: Any, frame_hash: str) -> dict[str, Any]:
    obs: dict[str, Any] = {"frame": frame_hash[:HASH_CHARS], "score": repr(env.score())}
    state = float_state(env.adapter)
    if state:
        obs["state"] = state
    return obs


def task_file_digests(tasks_dir: Path) -> dict[str, str]:
    return {
        f.stem: hashlib.sha256(f.read_bytes()).hexdigest()[:HASH_CHARS]
        for f in sorted(Path(tasks_dir).glob("*.yaml"))
    }


# ---------------------------------------------------------------------------
# checking
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Divergence:
    """The first step of an episode where this machine disagrees with the record."""

    env: str
    episode: str  # Probe.label: "<task> clip <id>" or "<task> random seed <n>"
    step: int  # 0: the start frame; k: after the k-th action
    quantity: str  # a state name ("ego.y", "x[2]"), "frame", "score", "end" or "error"
    value: str
    recorded: str

    def line(self) -> str:
        """One line: ``<episode>: step <k>: <quantity> <value> != recorded <recorded>``."""
        return (
            f"{self.episode}: step {self.step}: {self.quantity} {self.value} "
            f"!= recorded {self.recorded}"
        )


@dataclass
class EpisodeCheck:
    env: str
    episode: str
    steps: int = 0  # steps compared (the start frame included)
    floats: int = 0  # float state values compared
    divergence: Divergence | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class _CheckJob:
    env: str
    episodes: tuple[str, ...]  # each recorded episode, as compact JSON
    limit: int | None  # compare at most this many actions (quick)
    tasks_dir: str


def _state_difference(now: State, then: State) -> tuple[str, str, str] | None:
    """(name, value, recorded) of the first state value that differs, in the adapter's
    order (e.g. the ego car before the others), then names only the record has."""
    for name in [*now, *(n for n in then if n not in now)]:
        a, b = now.get(name), then.get(name)
        if a == b:
            continue
        if a is None or b is None or isinstance(a, str) != isinstance(b, str):
            # a name only one side has: most often a record made before the adapter
            # exposed it (re-record), or a simulator that changed its objects
            return name, _shown(a), _shown(b, "(not recorded)")
        if isinstance(a, str) or isinstance(b, str):
            return name, str(a), str(b)
        if len(a) != len(b):
            return f"{name} length", str(len(a)), str(len(b))
        i = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
        return f"{name}[{i}]", a[i], b[i]
    return None


def _shown(value: str | list[str] | None, absent: str = "(absent)") -> str:
    if value is None:
        return absent
    if isinstance(value, str) or not value:
        return str(value)
    return f"[{value[0]}, ... {len(value)} values]" if len(value) > 1 else f"[{value[0]}]"


def _compare(obs: dict[str, Any], rec: dict[str, Any]) -> tuple[str, str, str] | None:
    """What differs first at one step: a float state, else the frame, else the score."""
    diff = _state_difference(obs.get("state", {}), rec.get("state", {}))
    if diff is not None:
        return diff
    for key in ("frame", "score"):
        if obs[key] != rec.get(key):
            return key, str(obs[key]), str(rec.get(key))
    return None


def _check_episode(
    env_key: str, ep: dict[str, Any], limit: int | None, tasks_dir: Path
) -> EpisodeCheck:
    from vical.envs import frame_sha256, make_env

    probe = Probe(env_key, ep["task"], ep["kind"], ep.get("clip"), ep.get("seed"))
    check = EpisodeCheck(env_key, probe.label)

    def diverge(step: int, quantity: str, value: str, recorded: str) -> EpisodeCheck:
        check.divergence = Divergence(env_key, probe.label, step, quantity, value, recorded)
        return check

    recorded: list[dict[str, Any]] = ep["steps"]
    actions: list[str] = ep["actions"]
    if limit is not None:
        actions = actions[:limit]
    try:
        task, _ = episode_task(probe, tasks_dir)
        env = make_env(task, starts="replayed")
    except Exception as e:
        return diverge(0, "error", f"{type(e).__name__}: {e}", "a playable task")
    try:
        obs = observe(env, frame_sha256(env.reset()))
        for step, action in enumerate([None, *actions]):
            if action is not None:
                if env.done:
                    return diverge(step, "end", f"over ({env.outcome})", "continues")
                obs = observe(env, env.step(action).frame_sha256)
            check.steps += 1
            check.floats += sum(
                1 if isinstance(v, str) else len(v) for v in obs.get("state", {}).values()
            )
            diff = _compare(obs, recorded[step])
            if diff is not None:
                return diverge(step, *diff)
        whole = len(actions) == len(ep["actions"])  # played to the end: it must end as recorded
        if whole and (env.outcome != ep["outcome"] or env.passed() != ep["passed"]):
            return diverge(
                len(actions),
                "end",
                f"{env.outcome} passed={env.passed()}",
                f"{ep['outcome']} passed={ep['passed']}",
            )
    except Exception as e:  # an action refused, a simulator error: this machine differs
        return diverge(check.steps, "error", f"{type(e).__name__}: {e}", "no error")
    finally:
        env.close()
    return check


def _check_env(job: _CheckJob) -> list[EpisodeCheck]:
    out = []
    for ep in job.episodes:
        t0 = time.monotonic()
        check = _check_episode(job.env, json.loads(ep), job.limit, Path(job.tasks_dir))
        check.seconds = round(time.monotonic() - t0, 3)
        out.append(check)
    return out


@dataclass
class DoctorReport:
    """What one doctor run found. ``status``: ``ok``, ``diverged``, ``stale`` (the record
    was made on other task data) or ``missing`` (no readable record)."""

    status: str
    quick: bool
    record: str
    envs: list[str] = field(default_factory=list)
    episodes: list[EpisodeCheck] = field(default_factory=list)
    problem: str | None = None  # why the check could not run (stale, missing)
    seconds: float = 0.0
    record_complete: bool = True
    recorded_on: dict[str, Any] | None = None  # the machine that made the record

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def divergences(self) -> list[Divergence]:
        return [e.divergence for e in self.episodes if e.divergence is not None]

    @property
    def first(self) -> Divergence | None:
        found = self.divergences
        return found[0] if found else None

    def summary(self) -> str:
        """One line: ``ok (...)``, the first divergence, or why nothing was checked."""
        mode = "quick" if self.quick else "full"
        if self.status == "ok":
            steps = sum(e.steps for e in self.episodes)
            return f"ok ({mode}: {len(self.episodes)} episodes, {steps} steps)"
        first = self.first
        if first is not None:
            more = len(self.divergences) - 1
            return f"{first.line()}" + (f" (+{more} more episode(s))" if more else "")
        return self.problem or self.status

    def manifest_entry(self) -> dict[str, Any]:
        """The compact result a run manifest and a bundle carry."""
        first = self.first
        return {
            "status": self.status,
            "mode": "quick" if self.quick else "full",
            "summary": self.summary(),
            "first": asdict(first) if first is not None else None,
            "episodes": len(self.episodes),
            "steps": sum(e.steps for e in self.episodes),
            "vical_version": __version__,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "ok": self.ok,
            "mode": "quick" if self.quick else "full",
            "record": self.record,
            "record_complete": self.record_complete,
            "recorded_on": self.recorded_on,
            "problem": self.problem,
            "envs": self.envs,
            "seconds": round(self.seconds, 2),
            "summary": self.summary(),
            "divergences": [asdict(d) for d in self.divergences],
            "episodes": [
                {k: v for k, v in asdict(e).items() if k != "divergence"}
                | {"ok": e.divergence is None}
                for e in self.episodes
            ],
        }


def skipped_entry(why: str) -> dict[str, Any]:
    """The manifest entry of a run whose doctor did not run (``--skip-doctor``, random agent)."""
    return {"status": "skipped", "summary": why, "vical_version": __version__}


def record_path(path: Path | None = None) -> Path:
    """The record to use: ``path``, else ``$VICAL_DOCTOR_RECORD``, else the packaged one."""
    if path is not None:
        return Path(path)
    env = os.environ.get(RECORD_VAR)
    return Path(env) if env else RECORD


def load_record(path: Path) -> dict[str, Any]:
    """The record at ``path``; :class:`DoctorError` when it is not a doctor record."""
    try:
        data = json.loads(Path(path).read_bytes())
    except (OSError, ValueError) as e:
        raise DoctorError(f"cannot read the doctor record {path}: {e}") from None
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        raise DoctorError(f"{path} is not a doctor record (format {RECORD_FORMAT})")
    if not isinstance(data.get("envs"), dict):
        raise DoctorError(f"{path} is not a doctor record (no envs)")
    return data


def selected_envs(available: dict[str, Any], envs: Sequence[str] | None) -> list[str]:
    if not envs:
        return sorted(available)
    unknown = [e for e in envs if e not in available]
    if unknown:
        raise DoctorError(
            f"unknown environment(s) {', '.join(unknown)}; the record has: "
            + ", ".join(sorted(available))
        )
    return sorted(dict.fromkeys(envs))


def _stale(record: dict[str, Any], tasks_dir: Path) -> str | None:
    """Why the record does not belong to this task data (None when it does)."""
    if record.get("tasks_digest") == tasks_digest(tasks_dir):
        return None
    now = task_file_digests(tasks_dir)
    then = record.get("task_files") or {}
    changed = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
    shown = ", ".join(f"{k}.yaml" for k in changed[:6]) + (" ..." if len(changed) > 6 else "")
    return (
        f"stale record: it was made on task data {str(record.get('tasks_digest'))[:12]}, "
        f"this vical has {tasks_digest(tasks_dir)[:12]}"
        + (f" (changed: {shown})" if changed else "")
        + "; maintainers re-record it with `vical doctor --record`"
    )


def run_jobs(
    fn: Callable[[Any], Any],
    jobs: list[Any],
    workers: int | None,
    on_result: Callable[[Any, Any, BaseException | None], bool | None],
    tasks_dir: Path,
) -> None:
    """Jobs through :func:`vical.run.pool.run_pool` (Ctrl-C: :class:`Interrupted` promptly)."""
    from vical.envs import preload
    from vical.run.pool import run_pool

    if not jobs:
        return
    n = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    with contextlib.suppress(Exception):  # best effort, as for eval
        preload([get_task(t.id, tasks_dir) for t in _first_tasks(jobs, tasks_dir)])
    run_pool(fn, jobs, n, on_result)


def _first_tasks(jobs: list[Any], tasks_dir: Path) -> Iterator[TaskSpec]:
    wanted = {j.env for j in jobs}
    seen: set[str] = set()
    for t in all_tasks(tasks_dir):
        if t.env.env in wanted and t.env.env not in seen:
            seen.add(t.env.env)
            yield t


_CACHE: dict[tuple[Any, ...], DoctorReport] = {}


def run_doctor(
    record: Path | None = None,
    envs: Sequence[str] | None = None,
    quick: bool = False,
    workers: int | None = None,
    tasks_dir: Path = TASKS_DIR,
    cached: bool = False,
    on_env: Callable[[str, list[EpisodeCheck]], None] | None = None,
) -> DoctorReport:
    """Replay the recorded episodes and compare them step by step with the record.

    ``envs`` restricts the environments (default: every one the record holds; with
    ``quick``, those of the float-physics families). ``quick`` compares the first
    :data:`QUICK_STEPS` actions of each episode. ``cached``: a result this process
    already computed for the same record bytes, task data and selection is reused (a
    machine does not change under a running process). ``on_env`` is called in this
    process as each environment finishes. Raises :class:`DoctorError` for an unknown
    environment and :class:`vical.run.pool.Interrupted` on Ctrl-C.
    """
    t0 = time.monotonic()
    path = record_path(record)
    try:
        raw = path.read_bytes()
    except OSError as e:
        why = f"no doctor record at {path} ({e.strerror or e}); reinstall vical"
        return DoctorReport("missing", quick, str(path), problem=why)
    data = load_record(path)
    recorded: dict[str, list[dict[str, Any]]] = data["envs"]
    complete = bool(data.get("complete", True))
    key = (hashlib.sha256(raw).hexdigest(), tuple(envs or ()), quick, str(tasks_dir))
    if cached and key in _CACHE:
        return _CACHE[key]
    stale = _stale(data, tasks_dir)
    if stale is not None:
        return DoctorReport("stale", quick, str(path), problem=stale, record_complete=complete)
    names = selected_envs(recorded, envs)
    if quick and not envs:
        from vical.spec import load_envs

        specs = load_envs(tasks_dir)
        names = [e for e in names if e in specs and specs[e].family in FLOAT_FAMILIES]
    limit = QUICK_STEPS if quick else None
    jobs = [
        _CheckJob(e, tuple(json.dumps(ep) for ep in recorded[e]), limit, str(tasks_dir))
        for e in names
    ]
    # longest first, so two workers finish together
    jobs.sort(key=lambda j: -sum(len(json.loads(ep)["actions"]) for ep in j.episodes))
    found: dict[str, list[EpisodeCheck]] = {}

    def on_result(job: _CheckJob, value: Any, error: BaseException | None) -> bool:
        if error is not None:
            value = [
                EpisodeCheck(
                    job.env,
                    f"{job.env} (worker)",
                    divergence=Divergence(
                        job.env, job.env, 0, "error", f"{type(error).__name__}: {error}", "none"
                    ),
                )
            ]
        found[job.env] = value
        if on_env is not None:
            on_env(job.env, value)
        return True

    run_jobs(_check_env, jobs, workers, on_result, tasks_dir)
    episodes = [c for e in names for c in found.get(e, [])]
    status = "ok" if all(c.divergence is None for c in episodes) else "diverged"
    report = DoctorReport(
        status,
        quick,
        str(path),
        envs=names,
        episodes=episodes,
        seconds=time.monotonic() - t0,
        record_complete=complete,
        recorded_on=data.get("recorded_on"),
    )
    _CACHE[key] = report
    return report


def report_lines(report: DoctorReport, width: int = WIDTH) -> list[str]:
    """The verdict of :func:`run_doctor` as text: OK, or the first divergence."""
    import textwrap

    mode = "quick" if report.quick else "full"
    if report.status in ("stale", "missing"):
        return textwrap.wrap(f"CANNOT CHECK: {report.problem}", width, subsequent_indent="  ")
    steps = sum(e.steps for e in report.episodes)
    floats = sum(e.floats for e in report.episodes)
    head = (
        f"{len(report.episodes)} episode(s) of {len(report.envs)} environment(s), {steps} "
        f"steps ({floats} float state values), {mode}, {report.seconds:.1f} s"
    )
    lines = textwrap.wrap(f"checked {head}", width, subsequent_indent="  ")
    if not report.record_complete:
        lines.append("note: the record covers only some environments")
    first = report.first
    if first is None:
        lines.append("OK: every frame, score and float state matches the record")
        return lines
    lines += textwrap.wrap(
        f"DIVERGED: {first.episode}, step {first.step}:", width, subsequent_indent="  "
    )
    lines += textwrap.wrap(
        f"{first.quantity} {first.value} != recorded {first.recorded}",
        width,
        initial_indent="  ",
        subsequent_indent="    ",
        break_long_words=True,
    )
    rest = report.divergences[1:]
    if rest:
        envs = sorted({d.env for d in report.divergences})
        lines += textwrap.wrap(
            f"{len(report.divergences)} episode(s) diverge, in: {', '.join(envs)} "
            "(--json lists each)",
            width,
            subsequent_indent="  ",
        )
    return lines
