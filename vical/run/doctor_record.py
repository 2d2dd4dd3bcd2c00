"""``vical doctor --record``: replay every probe and write the doctor's record.

The record (:data:`vical.run.doctor.RECORD`) holds, per environment, the probes of
:func:`vical.run.doctor.probes` played here: the actions, the observation of every
step (:func:`vical.run.doctor.observe`), the outcome, the task-data digest and each
task file's digest (so a stale record names the changed files), and the machine
that recorded it. Recording is deterministic: the same code and task data write
the same bytes (:func:`dump_record`), up to the ``recorded_on`` machine.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vical import __version__
from vical.run.doctor import (
    FLOAT_FAMILIES,
    QUICK_STEPS,
    RECORD_FORMAT,
    DoctorError,
    Probe,
    episode_task,
    observe,
    probes,
    record_path,
    run_jobs,
    selected_envs,
    task_file_digests,
)
from vical.run.machine import machine
from vical.spec import TASKS_DIR, tasks_digest


@dataclass(frozen=True)
class _RecordJob:
    env: str
    probes: tuple[Probe, ...]
    tasks_dir: str


def _record_probe(probe: Probe, tasks_dir: Path) -> dict[str, Any]:
    from vical.envs import frame_sha256, make_env

    task, clip_actions = episode_task(probe, tasks_dir)
    rng = random.Random(probe.seed)
    env = make_env(task, starts="replayed")
    try:
        steps = [observe(env, frame_sha256(env.reset()))]
        actions: list[str] = []
        while not env.done:
            if clip_actions is not None:
                if len(actions) == len(clip_actions):
                    break
                action = clip_actions[len(actions)]
            else:
                action = rng.choice(task.action_names)
            actions.append(action)
            steps.append(observe(env, env.step(action).frame_sha256))
        entry: dict[str, Any] = {"task": probe.task_id, "kind": probe.kind}
        entry["clip" if probe.kind == "clip" else "seed"] = (
            probe.clip_id if probe.kind == "clip" else probe.seed
        )
        entry.update(actions=actions, outcome=env.outcome, passed=env.passed(), steps=steps)
        return entry
    finally:
        env.close()


def _record_env(job: _RecordJob) -> tuple[str, list[dict[str, Any]]]:
    return job.env, [_record_probe(p, Path(job.tasks_dir)) for p in job.probes]


def make_record(
    envs: Sequence[str] | None = None,
    workers: int | None = None,
    tasks_dir: Path = TASKS_DIR,
) -> dict[str, Any]:
    """Replay every probe (of ``envs``, default all) and return the record as data."""
    chosen = probes(tasks_dir)
    names = selected_envs(chosen, envs)
    jobs = [_RecordJob(e, tuple(chosen[e]), str(tasks_dir)) for e in names]
    found: dict[str, list[dict[str, Any]]] = {}

    def on_result(job: _RecordJob, value: Any, error: BaseException | None) -> bool:
        if error is not None:
            raise DoctorError(f"recording {job.env} failed: {type(error).__name__}: {error}")
        env, episodes = value
        found[env] = episodes
        return True

    run_jobs(_record_env, jobs, workers, on_result, tasks_dir)
    return {
        "format": RECORD_FORMAT,
        "vical_version": __version__,
        "tasks_digest": tasks_digest(tasks_dir),
        "task_files": task_file_digests(tasks_dir),
        "complete": len(names) == len(chosen),
        "quick_steps": QUICK_STEPS,
        "float_families": sorted(FLOAT_FAMILIES),
        "recorded_on": machine(),
        "envs": {e: found[e] for e in names},
    }


def dump_record(record: dict[str, Any]) -> str:
    """The record as text: sorted keys, one step per line (small, diffable, deterministic)."""

    def compact(v: Any) -> str:
        return json.dumps(v, sort_keys=True, separators=(",", ":"))

    lines = ["{"]
    top = sorted(record)
    for i, key in enumerate(top):
        end = "," if i < len(top) - 1 else ""
        if key != "envs":
            lines.append(f" {json.dumps(key)}: {compact(record[key])}{end}")
            continue
        lines.append(' "envs": {')
        envs = sorted(record["envs"])
        for j, env in enumerate(envs):
            lines.append(f"  {json.dumps(env)}: [")
            episodes = record["envs"][env]
            for k, ep in enumerate(episodes):
                head = {x: y for x, y in ep.items() if x != "steps"}
                lines.append(f"   {compact(head)[:-1]},")
                lines.append('    "steps": [')
                steps = ep["steps"]
                for n, s in enumerate(steps):
                    lines.append(f"     {compact(s)}{',' if n < len(steps) - 1 else ''}")
                lines.append(f"   ]}}{',' if k < len(episodes) - 1 else ''}")
            lines.append(f"  ]{',' if j < len(envs) - 1 else ''}")
        lines.append(f" }}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_record(
    path: Path | None = None,
    envs: Sequence[str] | None = None,
    workers: int | None = None,
    tasks_dir: Path = TASKS_DIR,
) -> Path:
    """``vical doctor --record``: replay every probe and write the record (atomically)."""
    from vical.run.results import atomic_write_bytes

    target = record_path(path)
    text = dump_record(make_record(envs, workers, tasks_dir))
    json.loads(text)  # the hand-made layout must stay JSON
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, text.encode())
    return target
