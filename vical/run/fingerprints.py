"""Fingerprints of what the simulators do, recorded once and compared after a change.

Four kinds, each a sha256 over frame hashes:

- ``starts``: every task's opening frame (seed, initial skip, human-init replay);
- ``clips``: every distinct stored demonstration clip replayed from its own start
  (every frame, then the outcome, the score and the pass flag);
- ``demos``: per task, its longest demonstration clip replayed the same way;
- ``random``: one random-agent episode per task (the runner's agent seed for run 0
  of run seed 0): every frame, then the score, pass flag and outcome.

The built-in environments' fingerprints are the test suite's record
(``tests/data/behaviour.json``). An environment added from a folder keeps its own
beside its task file: ``vical tasks record <folder>`` writes
``<folder>/fingerprints.json`` (:data:`FOLDER_FILE`) with the folder's doctor
record (:mod:`vical.run.doctor`) beside it, and the suite's per-environment tests
read them from there (:func:`recorded`).
"""

from __future__ import annotations

import hashlib
import json
import random
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from vical.errors import VicalError
from vical.spec import TASK_DIRS, TaskDirs, TaskSpec, all_tasks, get_task, tasks_digest

FOLDER_FILE = "fingerprints.json"  # an added folder's fingerprints, beside its task files
DOCTOR_FILE = "doctor.json"  # an added folder's doctor record (vical doctor --tasks-dir)
KINDS = ("starts", "clips", "demos", "random")

Fingerprints = dict[str, dict[str, str]]


class RecordError(VicalError):
    """A folder's recorded data is missing or was made on other task files."""


def start_fingerprint(task_id: str, tasks_dir: TaskDirs = TASK_DIRS) -> str:
    """sha256 of the task's opening frame."""
    from vical.demos.render import task_start_sha256

    return task_start_sha256(get_task(task_id, tasks_dir))


def clip_fingerprint(task_id: str, clip_id: str, tasks_dir: TaskDirs = TASK_DIRS) -> str:
    """The task's clip ``clip_id`` replayed from its own start: frames, outcome, score."""
    from vical.demos.render import replay_clip
    from vical.envs import frame_sha256

    task = get_task(task_id, tasks_dir)
    clip = next(c for c in task.variant.demos if c.id == clip_id)
    rep = replay_clip(task, clip)
    h = hashlib.sha256()
    for f in rep.frames:
        h.update(frame_sha256(f).encode())
    h.update(f"|{rep.outcome}|{rep.score!r}|{rep.passed}".encode())
    return h.hexdigest()


def random_fingerprint(task_id: str, tasks_dir: TaskDirs = TASK_DIRS) -> str:
    """One random episode (the runner's seed for run 0 of run seed 0), replayed."""
    from vical.envs import frame_sha256, make_env
    from vical.run.episode import episode_seed

    task = get_task(task_id, tasks_dir)
    rng = random.Random(episode_seed(0, task_id, 0))
    env = make_env(task)
    h = hashlib.sha256()
    try:
        h.update(frame_sha256(env.reset()).encode())
        while not env.done:
            h.update(env.step(rng.choice(task.action_names)).frame_sha256.encode())
        h.update(f"|{env.score()!r}|{env.passed()}|{env.outcome}".encode())
    finally:
        env.close()
    return h.hexdigest()


def longest_clip(task: TaskSpec) -> str:
    """The id of the task's longest demonstration clip (first among equals)."""
    return max(task.variant.demos, key=lambda c: len(c.actions)).id


def distinct_clips(tasks: list[TaskSpec]) -> list[tuple[str, str]]:
    """(task id, clip id) for the first task of ``tasks`` that holds each distinct clip."""
    seen: dict[str, str] = {}
    for t in tasks:
        for c in t.variant.demos:
            seen.setdefault(c.id, t.id)
    return sorted((t, c) for c, t in seen.items())


def fingerprint_all(tasks_dir: TaskDirs = TASK_DIRS, workers: int = 2) -> Fingerprints:
    """Every fingerprint of every task of ``tasks_dir`` (``workers`` processes)."""
    tasks = all_tasks(tasks_dir)
    ids = [t.id for t in tasks]
    clips = distinct_clips(tasks)
    dirs = [tasks_dir] * len(ids)
    with_demos = [t for t in tasks if t.variant.demos]
    with ProcessPoolExecutor(workers) as pool:
        starts = dict(zip(ids, pool.map(start_fingerprint, ids, dirs), strict=True))
        rnd = dict(zip(ids, pool.map(random_fingerprint, ids, dirs), strict=True))
        keys = [f"{t}#{c}" for t, c in clips]
        cl = pool.map(
            clip_fingerprint, [t for t, _ in clips], [c for _, c in clips], [tasks_dir] * len(keys)
        )
        demo_ids = [t.id for t in with_demos]
        longest = [longest_clip(t) for t in with_demos]
        demos = pool.map(clip_fingerprint, demo_ids, longest, [tasks_dir] * len(demo_ids))
        return {
            "starts": starts,
            "clips": dict(zip(keys, cl, strict=True)),
            "demos": dict(zip(demo_ids, demos, strict=True)),
            "random": rnd,
        }


def record_folder(folder: Path, workers: int = 2) -> tuple[Path, Path]:
    """``vical tasks record``: write the fingerprints and the doctor record of an added
    folder of task files beside them; returns the two paths written.

    The fingerprints carry the folder's task-data digest: :func:`recorded` refuses
    them once a task file of the folder changes.
    """
    from vical.run.doctor_record import write_record
    from vical.run.results import atomic_write_bytes

    folder = Path(folder)
    doc: dict[str, Any] = {"tasks_digest": tasks_digest(folder)}
    doc.update(fingerprint_all(folder, workers))
    target = folder / FOLDER_FILE
    atomic_write_bytes(target, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    doctor = write_record(folder / DOCTOR_FILE, None, workers, tasks_dir=folder)
    return target, doctor


def folder_fingerprints(folder: Path) -> Fingerprints:
    """The fingerprints recorded beside an added folder's task files, checked fresh."""
    path = Path(folder) / FOLDER_FILE
    fix = f"run `vical tasks record {folder}`"
    if not path.is_file():
        raise RecordError(f"{path}: no fingerprints recorded for this folder; {fix}")
    doc = json.loads(path.read_text())
    if doc.get("tasks_digest") != tasks_digest(Path(folder)):
        raise RecordError(f"{path}: recorded on other task files of the folder; {fix} again")
    return {k: dict(doc.get(k, {})) for k in KINDS}


def recorded(baseline: Path, extra: tuple[Path, ...]) -> Fingerprints:
    """The built-in record ``baseline`` with each added folder's own fingerprints."""
    out: Fingerprints = {k: dict(v) for k, v in json.loads(baseline.read_text()).items()}
    for folder in extra:
        for kind, values in folder_fingerprints(folder).items():
            out.setdefault(kind, {}).update(values)
    return out
