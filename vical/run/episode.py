"""One episode: its seed, its job, and playing it into its folder.

:func:`run_episode` plays one :class:`EpisodeJob` into ``runs/<id>/.partial/``
and renames the folder into ``episodes/`` once complete, with
``eval_result.json`` written last (it holds the sha256 of every other file of
the folder). The worker processes of :mod:`vical.run.pool` and the Ray workers
of :mod:`vical.run.ray_executor` call it; :mod:`vical.run.runner` runs a whole
evaluation of such jobs (resume, locking, progress) and re-exports these names.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from vical import __version__
from vical.agent.costs import episode_cost
from vical.outcomes import episode_failure, episode_name
from vical.run.results import EvalResult, atomic_write_json, file_sha256
from vical.spec import TaskSpec, get_task

if TYPE_CHECKING:
    from vical.agent import Agent
    from vical.agent.base import Imagined

_MIME_EXT = {"image/jpeg": "jpg", "image/png": "png", "video/mp4": "mp4"}


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
    frames: str = "none"
    demos: bool = True
    price: dict[str, float] | None = None
    rules: str = "basic"  # the rules text the prompt carries: basic or detailed
    # a coupled run (vical wm couple): the vical.wm.couple.Coupling; None: a plain run
    world_model: Any = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _save_png(path: Path, frame: npt.NDArray[np.uint8]) -> None:
    Image.fromarray(frame).save(path, format="PNG", compress_level=1)


def _folder_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` except eval_result.json, by relative path."""
    return {
        p.relative_to(folder).as_posix(): file_sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "eval_result.json"
    }


def _load_demos(task: TaskSpec, enabled: bool) -> list[Any]:
    if not enabled or not task.variant.demos:
        return []
    try:
        from vical.demos import load_demo_package
    except ImportError:
        return []
    return load_demo_package(task)


def run_episode(job: EpisodeJob, agent: Agent | None = None) -> str:
    """Play one episode and move its folder into place. Returns the episode name.

    ``agent`` is the agent to play with, when the caller holds one already (a
    person at ``vical play`` whose decisions come from the browser); by default
    the job's registered backend is built. Either way the episode is written the
    same way, and the agent is closed at the end.
    """
    from vical.agent import EpisodeContext, Observation, get_agent
    from vical.envs import make_env
    from vical.envs.core import frame_sha256
    from vical.run.trajectory import draw_trajectory

    task = get_task(job.task_id)
    run_dir = Path(job.run_dir)
    name = episode_name(job.task_id, job.run_index)
    tmp = run_dir / ".partial" / f"{name}.{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    seed = episode_seed(job.run_seed, job.task_id, job.run_index)
    started = _now()
    t0 = time.perf_counter()
    agent_time = 0.0
    usage: dict[str, int] = {}
    if agent is None:
        agent = get_agent(job.agent, **job.agent_kwargs)
    env = make_env(task)
    frames: list[npt.NDArray[np.uint8]] = []
    actions: list[str] = []
    imagination = None
    try:
        if job.world_model is not None:  # a coupled run: vical.wm.couple
            from vical.wm.couple import Imagination

            imagination = Imagination(task, job.world_model, seed)
        with open(tmp / "log.jsonl", "w") as log:

            def write(rec: dict[str, Any]) -> None:
                log.write(json.dumps(rec, sort_keys=True, default=str) + "\n")

            frame = env.reset()
            hashes = [frame_sha256(frame)]
            frames.append(frame)
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
                    rules=job.rules,
                )
            )
            previous: str | None = None
            agent_failure: str | None = None
            while not env.done:
                imagined: tuple[Imagined, ...] = ()
                if imagination is not None:
                    imagined = _imagine(imagination, env.steps, frames, actions, tmp, write)
                ta = time.perf_counter()
                decision = agent.act(
                    Observation(
                        step=env.steps,
                        frame=frame,
                        frame_sha256=hashes[-1],
                        previous_action=previous,
                        imagined=imagined,
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
                action = decision.action
                if action is None:  # the agent failed: decision.failure says how
                    agent_failure = decision.failure
                    write({"type": "agent_failure", "step": env.steps, "failure": decision.failure})
                    break
                s = env.step(action)
                if imagination is not None:
                    imagination.observe(action)
                frame = s.frame
                previous = action
                actions.append(action)
                hashes.append(s.frame_sha256)
                frames.append(frame)
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
        if job.frames == "all" or (job.frames == "failed" and not passed):
            (tmp / "frames").mkdir()
            for i, f in enumerate(frames):
                _save_png(tmp / "frames" / f"{i:04d}.png", f)
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
            failure_mode=episode_failure(outcome, passed, agent_failure),
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
            files=_folder_hashes(tmp),
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
        if imagination is not None:
            imagination.close()


def _imagine(
    imagination: Any,
    step: int,
    frames: list[npt.NDArray[np.uint8]],
    actions: list[str],
    folder: Path,
    write: Any,
) -> tuple[Imagined, ...]:
    """A coupled decision's imagined rollouts: the world model's frames stored in
    ``media/`` as PNG and its ``imagined`` record logged before the agent's records."""
    from vical.agent.base import Imagined

    rollouts, record, media = imagination.imagine(step, frames, actions)
    for name, data in media.items():
        p = folder / "media" / name
        if not p.exists():
            p.parent.mkdir(exist_ok=True)
            p.write_bytes(data)
    write(record)
    return tuple(
        Imagined(
            r.action,
            tuple(r.intervention),
            tuple(r.frames),
            tuple(f["sha256"] for f in c["frames"]),
        )
        for r, c in zip(rollouts, record["candidates"], strict=True)
    )
