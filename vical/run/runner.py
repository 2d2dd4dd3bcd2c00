"""The episode runner: parallel episodes, atomic per-episode folders, resume.

Layout of a run folder::

    runs/<id>/manifest.json
    runs/<id>/episodes/<env>__<variant>__r<k>/eval_result.json
                                             log.jsonl
                                             frames/0000.png ...
                                             media/<sha256>.<ext>
                                             trajectory.png

An episode is written into ``runs/<id>/.partial/`` and renamed into
``episodes/`` only once complete, with ``eval_result.json`` written last, so
a crash or Ctrl-C at any point leaves either a whole episode or nothing; the
same command then resumes and skips the finished ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from vical import __version__
from vical.agent.costs import episode_cost
from vical.run.results import EvalResult, RunManifest, atomic_write_json
from vical.spec import TaskSpec, get_task, tasks_digest

_MIME_EXT = {"image/jpeg": "jpg", "image/png": "png", "video/mp4": "mp4"}


def episode_name(task_id: str, run_index: int) -> str:
    env, variant = task_id.split("/", 1)
    return f"{env}__{variant}__r{run_index}"


def episode_seed(run_seed: int, task_id: str, run_index: int) -> int:
    """The agent's seed for one episode: a stable hash of run seed, task and run index."""
    h = hashlib.sha256(f"{run_seed}:{task_id}:{run_index}".encode()).hexdigest()
    return int(h[:8], 16)


@dataclass(frozen=True)
class EpisodeJob:
    task_id: str
    run_index: int
    agent: str
    agent_kwargs: dict[str, Any]
    run_seed: int
    run_dir: str
    save_frames: bool = True
    demos: bool = True
    price: dict[str, float] | None = None


@dataclass
class RunSummary:
    run_dir: Path
    total: int
    skipped: int
    finished: int
    failed: list[tuple[str, str]] = field(default_factory=list)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _save_png(path: Path, frame: np.ndarray) -> None:
    Image.fromarray(frame).save(path, format="PNG", compress_level=1)


def _failure_mode(outcome: str | None, passed: bool, agent_failure: str | None) -> str | None:
    if agent_failure:
        return agent_failure
    if passed:
        return None
    if outcome == "Time Out":
        return "timeout"
    return "early_termination"


def _load_demos(task: TaskSpec, enabled: bool) -> list[Any]:
    if not enabled or not task.variant.demos:
        return []
    try:
        from vical.demos import load_demo_package
    except ImportError:
        return []
    return load_demo_package(task)


def run_episode(job: EpisodeJob) -> str:
    """Play one episode and move its folder into place. Returns the episode name."""
    from vical.agent import EpisodeContext, Observation, get_agent
    from vical.envs import make_env
    from vical.envs.core import frame_sha256
    from vical.run.trajectory import draw_trajectory

    task = get_task(job.task_id)
    run_dir = Path(job.run_dir)
    name = episode_name(job.task_id, job.run_index)
    tmp = run_dir / ".partial" / f"{name}.{uuid.uuid4().hex[:8]}"
    (tmp / "frames").mkdir(parents=True)
    seed = episode_seed(job.run_seed, job.task_id, job.run_index)
    started = _now()
    t0 = time.perf_counter()
    agent_time = 0.0
    usage: dict[str, int] = {}
    agent = get_agent(job.agent, **job.agent_kwargs)
    env = make_env(task)
    frames: list[np.ndarray] = []
    actions: list[str] = []
    try:
        with open(tmp / "log.jsonl", "w") as log:

            def write(rec: dict[str, Any]) -> None:
                log.write(json.dumps(rec, sort_keys=True, default=str) + "\n")

            frame = env.reset()
            hashes = [frame_sha256(frame)]
            frames.append(frame)
            if job.save_frames:
                _save_png(tmp / "frames" / "0000.png", frame)
            write(
                {
                    "type": "start",
                    "task": task.id,
                    "seed": seed,
                    "frame_sha256": hashes[0],
                    "actions": task.action_names,
                    "max_steps": task.max_steps,
                }
            )
            agent.start(
                EpisodeContext(
                    task=task,
                    run_index=job.run_index,
                    seed=seed,
                    action_names=task.action_names,
                    max_steps=task.max_steps,
                    demos=_load_demos(task, job.demos and agent.uses_demos),
                )
            )
            previous: str | None = None
            agent_failure: str | None = None
            while not env.done:
                ta = time.perf_counter()
                decision = agent.act(
                    Observation(
                        step=env.steps,
                        frame=frame,
                        frame_sha256=hashes[-1],
                        previous_action=previous,
                    )
                )
                agent_time += time.perf_counter() - ta
                for sha, (data, mime) in decision.media.items():
                    p = tmp / "media" / f"{sha}.{_MIME_EXT.get(mime, 'bin')}"
                    if not p.exists():
                        p.parent.mkdir(exist_ok=True)
                        p.write_bytes(data)
                for rec in decision.records:
                    write(rec)
                for k, v in decision.usage.items():
                    usage[k] = usage.get(k, 0) + int(v)
                if decision.failure:
                    agent_failure = decision.failure
                    write({"type": "agent_failure", "step": env.steps, "failure": decision.failure})
                    break
                s = env.step(decision.action)
                frame = s.frame
                previous = decision.action
                actions.append(decision.action)
                hashes.append(s.frame_sha256)
                frames.append(frame)
                if job.save_frames:
                    _save_png(tmp / "frames" / f"{s.index:04d}.png", frame)
                write(
                    {
                        "type": "step",
                        "step": s.index,
                        "action": s.action,
                        "frame_sha256": s.frame_sha256,
                        "score": s.score,
                        "passed": s.passed,
                        "terminated": s.terminated,
                        "truncated": s.truncated,
                        "outcome": s.outcome,
                    }
                )
            outcome = env.outcome
            score, passed = env.score(), env.passed()
            progress = env.progress()
            write(
                {
                    "type": "end",
                    "outcome": outcome,
                    "score": score,
                    "passed": passed,
                    "agent_failure": agent_failure,
                }
            )
        draw_trajectory(
            frames,
            actions,
            tmp / "trajectory.png",
            title=f"{task.id} run {job.run_index}: score {score:.1f}, "
            f"{'pass' if passed else 'fail'} ({outcome or agent_failure})",
        )
        result = EvalResult(
            task_id=task.id,
            env=task.env.env,
            variant=task.variant.variant,
            run_index=job.run_index,
            agent=job.agent,
            seed=seed,
            score=score,
            passed=passed,
            outcome=outcome,
            failure_mode=_failure_mode(outcome, passed, agent_failure),
            steps=len(actions),
            max_steps=task.max_steps,
            actions=actions,
            frame_hashes=hashes,
            tags=task.env.tags.model_dump(),
            progress=progress,
            usage=usage,
            cost_usd=episode_cost(usage, job.price),
            wall_seconds=round(time.perf_counter() - t0, 3),
            agent_seconds=round(agent_time, 3),
            started_at=started,
            finished_at=_now(),
            vical_version=__version__,
        )
        atomic_write_json(tmp / "eval_result.json", result)
        final = run_dir / "episodes" / name
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(tmp, final)
        return name
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        env.close()
        agent.close()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"vical": __version__, "python": sys.version.split()[0]}
    for pkg in (
        "gymnasium",
        "numpy",
        "ale-py",
        "minigrid",
        "procgen2",
        "highway-env",
        "tetris-gymnasium",
        "flappy-bird-gymnasium",
        "pygame-ce",
        "pygame",
    ):
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


def prepare_run(
    run_dir: Path, tasks: list[TaskSpec], agent: str, agent_settings: dict, run_seed: int, runs: int
) -> RunManifest:
    """Create (or check, when resuming) the run folder and its manifest."""
    run_dir.mkdir(parents=True, exist_ok=True)
    manifest = RunManifest(
        run_id=run_dir.name,
        agent=agent,
        agent_settings=agent_settings,
        run_seed=run_seed,
        runs_per_task=runs,
        tasks=[t.id for t in tasks],
        tasks_digest=tasks_digest(),
        versions=_versions(),
        created_at=_now(),
        command=sys.argv,
        image=image_info(),
    )
    path = run_dir / "manifest.json"
    if path.exists():
        old = RunManifest.model_validate_json(path.read_text())
        mine = (manifest.agent, manifest.agent_settings, manifest.run_seed)
        theirs = (old.agent, old.agent_settings, old.run_seed)
        if mine != theirs:
            raise ValueError(
                f"{run_dir} already holds a run with agent/settings/seed {theirs}, not {mine}; "
                "resume it with the same options or choose another --out"
            )
        if old.tasks_digest != manifest.tasks_digest:
            raise ValueError(
                f"{run_dir} was started with other task data (digest {old.tasks_digest[:12]}); "
                "its episodes cannot be mixed with this version's; choose another --out"
            )
        merged = list(dict.fromkeys([*old.tasks, *manifest.tasks]))
        manifest = old.model_copy(
            update={"tasks": merged, "runs_per_task": max(old.runs_per_task, runs)}
        )
    atomic_write_json(path, manifest)
    shutil.rmtree(run_dir / ".partial", ignore_errors=True)
    return manifest


class _Tally:
    """Running figures for the progress bar: mean score, pass rate, tokens, cost."""

    def __init__(self) -> None:
        self.n = 0
        self.score = 0.0
        self.passed = 0
        self.tokens = 0
        self.cost: float | None = None

    def add(self, run_dir: Path, name: str) -> None:
        r = EvalResult.model_validate_json(
            (run_dir / "episodes" / name / "eval_result.json").read_text()
        )
        self.n += 1
        self.score += r.score
        self.passed += int(r.passed)
        self.tokens += int(r.usage.get("input_tokens", 0)) + int(r.usage.get("output_tokens", 0))
        if r.cost_usd is not None:
            self.cost = (self.cost or 0.0) + r.cost_usd

    def line(self, task_id: str) -> str:
        if not self.n:
            return task_id
        cost = "" if self.cost is None else f" ${self.cost:.4f}"
        return (
            f"score {self.score / self.n:.1f} pass {100 * self.passed / self.n:.0f}% "
            f"tokens {self.tokens}{cost} | {task_id}"
        )


def run_eval(
    tasks: list[TaskSpec],
    run_dir: Path,
    agent: str = "random",
    agent_kwargs: dict | None = None,
    agent_settings: dict | None = None,
    runs: int = 1,
    run_seed: int = 0,
    workers: int | None = None,
    save_frames: bool = True,
    demos: bool = True,
    progress: bool = True,
    price: dict[str, float] | None = None,
) -> RunSummary:
    """Run every (task, run index) episode not yet finished in ``run_dir``.

    ``price`` (USD per million input/output tokens) turns each episode's token
    usage into ``cost_usd``; the progress bar shows the running mean score, pass
    rate, tokens and cost of the episodes finished in this invocation.
    """
    agent_kwargs = dict(agent_kwargs or {})
    run_dir = Path(run_dir)
    prepare_run(run_dir, tasks, agent, agent_settings or agent_kwargs, run_seed, runs)
    done = {p.parent.name for p in (run_dir / "episodes").glob("*/eval_result.json")}
    jobs = [
        EpisodeJob(t.id, k, agent, agent_kwargs, run_seed, str(run_dir), save_frames, demos, price)
        for t in tasks
        for k in range(runs)
        if episode_name(t.id, k) not in done
    ]
    summary = RunSummary(
        run_dir, total=len(tasks) * runs, skipped=len(tasks) * runs - len(jobs), finished=0
    )
    if not jobs:
        return summary
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("[bold]eval[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
        disable=not progress,
        transient=False,
    )
    tally = _Tally()

    def finished_one(job: EpisodeJob, error: BaseException | None) -> None:
        name = episode_name(job.task_id, job.run_index)
        if error is None:
            summary.finished += 1
            tally.add(run_dir, name)
        else:
            summary.failed.append((name, repr(error)))
        bar.advance(pid)
        bar.update(pid, description=tally.line(job.task_id))

    with bar:
        pid = bar.add_task("", total=summary.total, completed=summary.skipped)
        if workers == 1:
            for job in jobs:
                bar.update(pid, description=tally.line(job.task_id))
                try:
                    run_episode(job)
                except Exception as e:
                    finished_one(job, e)
                else:
                    finished_one(job, None)
            return summary
        with ProcessPoolExecutor(max_workers=workers) as pool:
            pending = {pool.submit(run_episode, j): j for j in jobs}
            try:
                while pending:
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        job = pending.pop(fut)
                        finished_one(job, fut.exception())
            except KeyboardInterrupt:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    return summary
