"""The episode runner: parallel episodes, atomic per-episode folders, resume.

Layout of a run folder::

    runs/<id>/manifest.json
    runs/<id>/episodes/<env>__<variant>__r<k>/eval_result.json
                                             log.jsonl
                                             frames/0000.png ...
                                             media/<sha256>.<ext>
                                             trajectory.png

An episode is written into ``runs/<id>/.partial/`` and renamed into
``episodes/`` only once complete, with ``eval_result.json`` written last (it
holds the sha256 of every other file of the folder), so a crash or Ctrl-C at
any point leaves either a whole episode or nothing; the same command then
resumes and skips the finished ones. Resuming checks every finished folder
against the hashes in its result and re-runs a damaged one (moved aside to
``damaged/``). An episode that ended in an infrastructure failure
(``api_error``: the endpoint or network failed, not the model) is moved to
``failed-attempts/`` and re-run, unless ``retry_errors=False``.

One process writes a run folder at a time: ``runs/<id>/.lock`` is held (an
``flock``) for the whole run and a second writer is refused. Frames are
saved as PNG per the ``frames`` setting (``none``, ``failed``, ``all``); the
trajectory strip ``trajectory.png`` is always written, and every frame can be
regenerated exactly by replaying the logged actions.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vical import __version__
from vical.errors import RunFolderError  # once defined here; still importable from here
from vical.outcomes import episode_name  # episode_name: likewise
from vical.run.episode import EpisodeJob as EpisodeJob  # these three: likewise
from vical.run.episode import episode_seed as episode_seed
from vical.run.episode import run_episode as run_episode
from vical.run.results import FILE_MODE, EvalResult, RunManifest, atomic_write_json, file_sha256
from vical.run.shard import Shard, ShardInfo, select_shard, shard_mismatch
from vical.spec import TaskSpec, get_task, tasks_digest
from vical.spec.families import FAMILIES

if TYPE_CHECKING:
    from rich.progress import Progress

FRAME_MODES = ("none", "failed", "all")
EXECUTORS = ("local", "ray")  # how episodes fan out: worker processes, or a Ray cluster
# agent settings that cannot change a result: they may differ on resume (each
# episode's log records the values it ran with)
NON_RESULT_SETTINGS = frozenset(
    {
        "endpoint",
        "api_key_env",
        "rate_limit",
        "request_timeout",
        "max_retry_after",
        "transport_retries",
        "retry_base_delay",
        "retry_max_delay",
    }
)
_SETTING_FLAGS = {
    "backend": "--agent",
    "model": "--model",
    "temperature": "--temperature",
    "max_output_tokens": "--max-output-tokens",
    "reasoning_effort": "--reasoning-effort",
    "extra_body": "--extra-body",
    "seed": "--seed",
    "plans": "--plans",  # vical baseline expert
}


@dataclass
class RunSummary:
    """What one invocation did. ``failed`` are episodes that crashed (no result);
    ``infra`` are episodes that ended in an infrastructure failure (kept in
    ``episodes/`` for the record, not results, retried on the next resume)."""

    run_dir: Path
    total: int
    skipped: int
    finished: int
    failed: list[tuple[str, str]] = field(default_factory=list)
    infra: list[tuple[str, str]] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    retried: int = 0
    repaired: list[str] = field(default_factory=list)
    stopped_by_breaker: bool = False
    not_run: int = 0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def episode_problems(folder: Path) -> list[str]:
    """Why a finished episode folder is not whole (empty when it is)."""
    try:
        r = EvalResult.model_validate_json((folder / "eval_result.json").read_text())
    except (OSError, ValueError) as e:
        return [f"eval_result.json unreadable: {type(e).__name__}"]
    if r.task_id and episode_name(r.task_id, r.run_index) != folder.name:
        return [f"eval_result.json belongs to {episode_name(r.task_id, r.run_index)}"]
    problems = []
    expected = r.files or {"log.jsonl": "", "trajectory.png": ""}
    for rel, sha in expected.items():
        p = folder / rel
        if not p.is_file():
            problems.append(f"{rel} missing")
        elif sha and file_sha256(p) != sha:
            problems.append(f"{rel} changed")
    return problems


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"vical": __version__, "python": sys.version.split()[0]}
    # the simulators of every family (FAMILIES), between numpy and the pygame builds
    sims = [f.dist for f in FAMILIES.values() if f.dist not in ("gymnasium", "vical")]
    for pkg in ("gymnasium", "numpy", *dict.fromkeys(sims), "pygame-ce", "pygame"):
        with contextlib.suppress(PackageNotFoundError):
            out[pkg] = version(pkg)
    return out


def image_info() -> dict[str, str] | None:
    """The container image this process runs in, when the image declared itself."""
    digest = os.environ.get("VICAL_IMAGE_DIGEST")
    ver = os.environ.get("VICAL_IMAGE_VERSION")
    env_file = os.environ.get("VICAL_IMAGE_ENV_DIGEST_FILE")
    env_digest = None
    if env_file and Path(env_file).exists():
        env_digest = Path(env_file).read_text().strip()
    if not (digest or ver or env_digest):
        return None
    pairs = (("digest", digest), ("version", ver), ("env_digest", env_digest))
    return {k: v for k, v in pairs if v}


def _setting_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else repr(value)


def settings_differences(old: RunManifest, new: RunManifest) -> list[str]:
    """One sentence per result-changing setting that differs between two manifests."""
    out = []
    if old.agent != new.agent:
        out.append(
            f"the agent was {old.agent!r}, now {new.agent!r}: pass --agent {old.agent} to resume"
        )
    if old.run_seed != new.run_seed:
        out.append(
            f"the run seed was {old.run_seed}, now {new.run_seed}: pass --seed {old.run_seed}"
        )
    if old.demos != new.demos:
        demos_flag = "--demos" if old.demos else "--no-demos"
        out.append(f"demonstrations were {'on' if old.demos else 'off'}: pass {demos_flag}")
    if old.rules != new.rules:
        out.append(f"the rules text was {old.rules}, now {new.rules}: pass --rules {old.rules}")
    from vical.wm.couple import result_condition

    if result_condition(old.world_model) != result_condition(new.world_model):
        out.append(
            f"the world model (vical wm couple) was {old.world_model}, now {new.world_model}: "
            "pass the original --wm, --horizon and --candidates"
        )
    if old.agent == new.agent:
        keys = sorted(set(old.agent_settings) | set(new.agent_settings))
        for k in keys:
            if k in NON_RESULT_SETTINGS or k == "seed":
                continue
            a, b = old.agent_settings.get(k), new.agent_settings.get(k)
            if a == b:
                continue
            flag = _SETTING_FLAGS.get(k)
            how = (
                f"pass {flag} {_setting_text(a)}"
                if flag and a is not None
                else f"drop {flag}"
                if flag
                else "it has no flag; use the original vical version and options"
            )
            out.append(f"{k} was {_setting_text(a)}, now {_setting_text(b)}: {how}")
    return out


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_eval` plays a run, beside its tasks, folder and agent.

    ``runs`` episodes per task from ``run_seed``; ``workers`` episodes in flight
    (default: one per core, or the Ray cluster's CPUs); ``frames`` (one of
    :data:`FRAME_MODES`) the PNG frames saved; ``demos`` and ``rules`` (``basic`` or
    ``detailed``) the first turn's conditions (the paper's ablation, Section 4.4);
    ``progress`` draws the progress bar; ``price`` (USD per million input/output
    tokens) turns token usage into ``cost_usd``; ``retry_errors`` re-runs, on resume,
    episodes that ended in an infrastructure failure; ``max_consecutive_errors`` is
    the circuit breaker (0: off); ``shard`` plays one slice of the episodes
    (:mod:`vical.run.shard`); ``executor`` (one of :data:`EXECUTORS`) and
    ``ray_address`` say where episodes run; ``doctor`` is the self-check's manifest
    entry; ``world_model`` (a :class:`vical.wm.couple.Coupling`) makes a coupled run.
    """

    runs: int = 1
    run_seed: int = 0
    workers: int | None = None
    frames: str = "none"
    demos: bool = True
    progress: bool = True
    price: dict[str, float] | None = None
    retry_errors: bool = True
    max_consecutive_errors: int = 5
    shard: Shard | None = None
    rules: str = "basic"
    executor: str = "local"
    ray_address: str | None = None
    doctor: dict[str, Any] | None = None
    world_model: Any = None

    def check(self) -> None:
        """Refuse (ValueError) a ``frames``, ``executor`` or ``rules`` value not known."""
        if self.frames not in FRAME_MODES:
            raise ValueError(f"frames must be one of {', '.join(FRAME_MODES)}, not {self.frames!r}")
        if self.executor not in EXECUTORS:
            raise ValueError(
                f"executor must be one of {', '.join(EXECUTORS)}, not {self.executor!r}"
            )
        if self.rules not in ("basic", "detailed"):
            raise ValueError(f"rules must be basic or detailed, not {self.rules!r}")


def prepare_run(
    run_dir: Path,
    tasks: list[TaskSpec],
    agent: str,
    agent_settings: dict[str, Any],
    options: RunOptions = RunOptions(),
    shard: ShardInfo | None = None,
) -> RunManifest:
    """Create (or check, when resuming) the run folder and its manifest.

    The manifest records the run's conditions from ``options`` (runs, run seed,
    ``demos``, ``rules``, ``doctor``: the self-check's entry, :mod:`vical.run.doctor`,
    and the ``world_model`` coupling's entry) and this machine's CPU. ``shard`` is
    recorded when the run plays one slice of its episodes (:mod:`vical.run.shard`;
    :func:`run_eval` derives it from ``options.shard``); a folder is resumed only as
    the same slice. A resumed run keeps the entries its manifest has and fills those
    it lacks.

    Call it with the folder's lock held (:func:`lock_run_folder`): it clears
    ``.partial/``, which only a writer of this folder may do.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    from vical.agent.redact import redact_argv, redact_url
    from vical.run.machine import machine

    coupling = options.world_model
    runs = options.runs
    manifest = RunManifest(
        run_id=run_dir.name,
        agent=agent,
        agent_settings=agent_settings,
        run_seed=options.run_seed,
        runs_per_task=runs,
        tasks=[t.id for t in tasks],
        tasks_digest=tasks_digest(),
        versions=_versions(),
        created_at=_now(),
        command=redact_argv(list(sys.argv)),
        image=image_info(),
        demos=options.demos,
        rules=options.rules,
        shard=shard,
        doctor=options.doctor,
        machine=machine(),
        world_model=None if coupling is None else coupling.manifest(redact_url),
    )
    path = run_dir / "manifest.json"
    if path.exists():
        try:
            old = RunManifest.model_validate_json(path.read_text())
        except ValueError as e:
            raise RunFolderError(
                f"{run_dir}/manifest.json is not a vical run manifest ({type(e).__name__}); "
                "choose another --out"
            ) from None
        diffs = settings_differences(old, manifest)
        other_shard = shard_mismatch(old.shard, shard)
        if other_shard:
            raise RunFolderError(f"{run_dir} cannot be resumed by this command: {other_shard}")
        if diffs:
            raise RunFolderError(
                f"{run_dir} holds a run with other settings, so its episodes cannot be "
                "mixed with this command's:\n  - "
                + "\n  - ".join(diffs)
                + "\nor choose a new folder with --out."
            )
        if old.tasks_digest != manifest.tasks_digest:
            raise RunFolderError(
                f"{run_dir} was started with other task data (digest {old.tasks_digest[:12]}, "
                f"this vical has {manifest.tasks_digest[:12]}); its episodes cannot be mixed "
                "with this version's; choose another --out"
            )
        merged = list(dict.fromkeys([*old.tasks, *manifest.tasks]))
        manifest = old.model_copy(
            update={
                "tasks": merged,
                "runs_per_task": max(old.runs_per_task, runs),
                "doctor": old.doctor if old.doctor is not None else manifest.doctor,
                "machine": old.machine if old.machine is not None else manifest.machine,
            }
        )
    atomic_write_json(path, manifest)
    shutil.rmtree(run_dir / ".partial", ignore_errors=True)
    return manifest


@contextlib.contextmanager
def lock_run_folder(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir/.lock`` for the duration; refuse when another process holds it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise RunFolderError(
                f"{run_dir} is in use by {holder}; wait for it to finish (or stop it), "
                "or write this run to another folder with --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"vical pid {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _move_aside(folder: Path, to: Path) -> None:
    to.mkdir(parents=True, exist_ok=True)
    k = 1
    while (to / f"{folder.name}.{k}").exists():
        k += 1
    os.rename(folder, to / f"{folder.name}.{k}")


def scan_episodes(run_dir: Path, retry_errors: bool, summary: RunSummary) -> set[str]:
    """Names of the finished, whole episodes to keep; damaged folders (and, when
    ``retry_errors``, infrastructure failures) are moved aside to be re-run."""
    done: set[str] = set()
    eps = run_dir / "episodes"
    if not eps.is_dir():
        return done
    for folder in sorted(eps.iterdir()):
        if not folder.is_dir():
            continue
        problems = episode_problems(folder)
        if problems:
            summary.repaired.append(f"{folder.name}: {'; '.join(problems)}")
            _move_aside(folder, run_dir / "damaged")
            continue
        r = EvalResult.model_validate_json((folder / "eval_result.json").read_text())
        if r.infrastructure_failure and retry_errors:
            summary.retried += 1
            _move_aside(folder, run_dir / "failed-attempts")
            continue
        done.add(folder.name)
    return done


class _Tally:
    """Running figures for the progress line: mean score, pass rate, errors, tokens, cost."""

    def __init__(self) -> None:
        self.n = 0
        self.score = 0.0
        self.passed = 0
        self.errors = 0
        self.tokens = 0
        self.cost: float | None = None

    def add(self, r: EvalResult) -> None:
        self.tokens += int(r.usage.get("input_tokens", 0)) + int(r.usage.get("output_tokens", 0))
        if r.cost_usd is not None:
            self.cost = (self.cost or 0.0) + r.cost_usd
        if r.infrastructure_failure:
            self.errors += 1
            return
        self.n += 1
        self.score += r.score
        self.passed += int(r.passed)

    def fields(self, task_id: str) -> list[str]:
        """Progress fields in priority order; the display drops from the end to fit."""
        out = []
        if self.n:
            out += [f"S {self.score / self.n:.1f}", f"P {100 * self.passed / self.n:.0f}%"]
        if self.errors:
            out.append(f"err {self.errors}")
        if self.tokens:
            out.append(f"{_short(self.tokens)} tok")
        if self.cost is not None:
            out.append(f"${self.cost:.2f}")
        out.append(task_id)
        return out


def _short(n: int) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def fit_fields(fields: list[str], width: int) -> str:
    """Join as many leading fields as fit in ``width`` columns; never cut one."""
    out = ""
    for f in fields:
        candidate = f"{out}  {f}" if out else f
        if len(candidate) > width:
            break
        out = candidate
    return out


def _progress_bar(enabled: bool) -> tuple[Progress, int]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    wide = console.width >= 100
    columns = [
        TextColumn("[bold]eval[/]"),
        BarColumn(bar_width=30 if wide else 12),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    ]
    if wide:
        columns.append(TimeRemainingColumn())
    columns.append(TextColumn("{task.description}"))
    # fixed part: label 4, bar, counts up to 15, elapsed 7, remaining 7, separators
    fixed = 4 + (30 if wide else 12) + 15 + 8 + (8 if wide else 0) + len(columns)
    bar = Progress(*columns, console=console, disable=not enabled, transient=False)
    return bar, max(0, console.width - fixed)


def run_eval(
    tasks: list[TaskSpec],
    run_dir: Path,
    agent: str = "random",
    agent_kwargs: dict[str, Any] | None = None,
    agent_settings: dict[str, Any] | None = None,
    options: RunOptions = RunOptions(),
) -> RunSummary:
    """Run every (task, run index) episode not yet finished in ``run_dir``.

    ``options`` (:class:`RunOptions`) says how; ``agent_settings`` are the settings
    the manifest records (None: what the agent built from ``agent_kwargs`` reports).

    With ``options.shard``, only that slice of the episodes
    (:func:`vical.run.shard.select_shard`) is run, and the manifest records it so
    ``vical merge`` can put the slices together.

    ``options.executor`` is ``local`` (worker processes, :func:`vical.run.pool.run_pool`)
    or ``ray`` (tasks on the Ray cluster at ``options.ray_address``, or ``$RAY_ADDRESS``:
    :mod:`vical.run.ray_executor`); ``options.workers`` is then the most episodes in
    flight (default: the cluster's CPUs).

    ``options.rules`` (``basic`` or ``detailed``) is the rules text the first turn
    carries and ``options.demos`` whether it carries the demonstrations: the two
    conditions of the paper's ablation (Section 4.4), both recorded in the manifest.

    ``options.doctor`` is the result of the reproducibility self-check the caller ran
    before the first request (:meth:`vical.run.doctor.DoctorReport.manifest_entry`
    or :func:`vical.run.doctor.skipped_entry`), recorded in the manifest.

    ``options.world_model`` (a :class:`vical.wm.couple.Coupling`) makes a coupled run:
    before each decision the world model imagines every candidate's rollout, logged and
    shown to the agent (``vical wm couple``); the manifest records it as ``world_model``.

    ``options.price`` (USD per million input/output tokens) turns each episode's token
    usage into ``cost_usd``. ``options.frames`` is ``none``, ``failed`` or ``all``.
    After ``options.max_consecutive_errors`` episodes in a row end in an
    infrastructure failure the run stops scheduling (a circuit breaker; 0
    turns it off) and ``RunSummary.stopped_by_breaker`` is set. Raises
    :class:`vical.run.pool.Interrupted` on SIGINT/SIGTERM with every finished
    episode kept and no partial one left behind.
    """
    from vical.run.pool import run_pool

    options.check()
    runs, executor = options.runs, options.executor
    max_consecutive_errors = options.max_consecutive_errors
    agent_kwargs = dict(agent_kwargs or {})
    run_dir = Path(run_dir)
    with lock_run_folder(run_dir):
        if agent_settings is None:  # what the agent reports, as the CLI records it
            from vical.agent import get_agent

            probe = get_agent(agent, **agent_kwargs)
            agent_settings = probe.settings()
            probe.close()
        episodes = [(t.id, k) for t in tasks for k in range(runs)]
        info = None
        if options.shard is not None:
            episodes, info = select_shard(tasks, runs, options.shard)
        prepare_run(run_dir, tasks, agent, agent_settings, options, info)
        summary = RunSummary(run_dir, total=len(episodes), skipped=0, finished=0)
        done = scan_episodes(run_dir, options.retry_errors, summary)
        jobs = [
            EpisodeJob(
                tid,
                k,
                agent,
                agent_kwargs,
                options.run_seed,
                str(run_dir),
                options.frames,
                options.demos,
                options.price,
                options.rules,
                options.world_model,
            )
            for tid, k in episodes
            if episode_name(tid, k) not in done
        ]
        summary.skipped = summary.total - len(jobs)
        if not jobs:
            return summary
        in_flight = options.workers  # for ray: None is as many as the cluster has CPUs
        workers = max(1, min(options.workers or os.cpu_count() or 1, len(jobs)))
        bar, room = _progress_bar(options.progress)
        tally = _Tally()
        streak = 0

        def on_result(job: EpisodeJob, name: str | None, error: BaseException | None) -> bool:
            nonlocal streak
            ep = episode_name(job.task_id, job.run_index)
            if error is not None:
                summary.failed.append((ep, f"{type(error).__name__}: {error}"))
                streak = 0
            else:
                r = EvalResult.model_validate_json(
                    (run_dir / "episodes" / ep / "eval_result.json").read_text()
                )
                tally.add(r)
                summary.finished += 1
                summary.outcomes[r.failure_mode or "pass"] += 1
                if r.infrastructure_failure:
                    summary.infra.append((ep, _last_api_error(run_dir / "episodes" / ep)))
                    streak += 1
                else:
                    streak = 0
            bar.advance(pid)
            bar.update(pid, description=fit_fields(tally.fields(job.task_id), room))
            if max_consecutive_errors and streak >= max_consecutive_errors:
                summary.stopped_by_breaker = True
                return False
            return True

        cluster: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        if executor == "ray":  # connected before the bar is drawn: a refusal is one error line
            from vical.run.ray_executor import connected
            from vical.run.ray_executor import ray_address as address

            cluster = connected(address(options.ray_address))
        try:
            with cluster as ray, bar:
                pid = bar.add_task(
                    fit_fields(tally.fields(jobs[0].task_id), room),
                    total=summary.total,
                    completed=summary.skipped,
                )
                clear = lambda: shutil.rmtree(run_dir / ".partial", ignore_errors=True)  # noqa: E731
                if executor == "ray":
                    from vical.run.ray_executor import run_on_ray

                    run_on_ray(ray, jobs, in_flight, on_result, on_abort=clear)
                else:
                    from vical.envs import preload

                    preload([get_task(t) for t in dict.fromkeys(j.task_id for j in jobs)])
                    run_pool(
                        run_episode, jobs, workers, on_result, on_abort=clear, on_interrupt=clear
                    )
        except BaseException:  # an interrupt, a lost cluster: finished episodes stay
            shutil.rmtree(run_dir / ".partial", ignore_errors=True)
            raise
        summary.not_run = (
            len(jobs) - summary.finished - len(summary.failed) if summary.stopped_by_breaker else 0
        )
        shutil.rmtree(run_dir / ".partial", ignore_errors=True)
        return summary


def _last_api_error(folder: Path) -> str:
    """The last transport/API error message an episode's log holds."""
    message = "the endpoint failed"
    try:
        with open(folder / "log.jsonl") as f:
            for line in f:
                if '"api_error"' in line:
                    rec = json.loads(line)
                    if rec.get("type") == "api_error":
                        status = rec.get("status")
                        text = str(rec.get("message") or "")[:200]
                        message = f"HTTP {status}: {text}" if status else text
    except (OSError, ValueError):
        pass
    return message
