"""Fingerprints of what the simulators do, recorded once and compared after changes.

Three kinds, each a sha256 over frame hashes:
- ``starts``: every task's opening frame (seed, initial skip, human-init replay);
- ``clips``: every stored demonstration clip replayed from its own start
  (every frame, the outcome, the score);
- ``random``: one random-agent episode per task (seed 0): the frames its
  actions produce, its score, pass flag and outcome.

``python -m tests.behaviour --record`` rewrites ``tests/data/behaviour.json``;
only do that for a change that is meant to alter behaviour (and say so in
CHANGELOG.md, since it changes results).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

BASELINE = Path(__file__).parent / "data" / "behaviour.json"


def start_fingerprint(task_id: str) -> str:
    from vical.demos.render import task_start_sha256
    from vical.spec import get_task

    return task_start_sha256(get_task(task_id))


def clip_fingerprint(task_id: str, clip_id: str) -> str:
    from vical.demos.render import replay_clip
    from vical.envs import frame_sha256
    from vical.spec import get_task

    task = get_task(task_id)
    clip = next(c for c in task.variant.demos if c.id == clip_id)
    rep = replay_clip(task, clip)
    h = hashlib.sha256()
    for f in rep.frames:
        h.update(frame_sha256(f).encode())
    h.update(f"|{rep.outcome}|{rep.score!r}|{rep.passed}".encode())
    return h.hexdigest()


def random_fingerprint(task_id: str) -> str:
    """One random episode (the runner's seed for run 0 of run seed 0), replayed."""
    import random

    from vical.envs import make_env
    from vical.run.runner import episode_seed
    from vical.spec import get_task

    task = get_task(task_id)
    rng = random.Random(episode_seed(0, task_id, 0))
    env = make_env(task)
    h = hashlib.sha256()
    try:
        frame = env.reset()
        from vical.envs import frame_sha256

        h.update(frame_sha256(frame).encode())
        while not env.done:
            s = env.step(rng.choice(task.action_names))
            h.update(s.frame_sha256.encode())
        h.update(f"|{env.score()!r}|{env.passed()}|{env.outcome}".encode())
    finally:
        env.close()
    return h.hexdigest()


def distinct_clips() -> list[tuple[str, str]]:
    """(task id, clip id) for the first task that holds each distinct clip."""
    from vical.spec import all_tasks

    seen: dict[str, str] = {}
    for t in all_tasks():
        for c in t.variant.demos:
            seen.setdefault(c.id, t.id)
    return sorted((t, c) for c, t in seen.items())


def record() -> dict:
    from concurrent.futures import ProcessPoolExecutor

    from vical.spec import all_tasks

    ids = [t.id for t in all_tasks()]
    clips = distinct_clips()
    with ProcessPoolExecutor(2) as pool:
        starts = dict(zip(ids, pool.map(start_fingerprint, ids), strict=True))
        rnd = dict(zip(ids, pool.map(random_fingerprint, ids), strict=True))
        cl = dict(
            zip(
                [f"{t}#{c}" for t, c in clips],
                pool.map(clip_fingerprint, [t for t, _ in clips], [c for _, c in clips]),
                strict=True,
            )
        )
    return {"starts": starts, "clips": cl, "random": rnd}


if __name__ == "__main__":
    if "--record" not in sys.argv:
        sys.exit("usage: python -m tests.behaviour --record")
    BASELINE.parent.mkdir(exist_ok=True)
    BASELINE.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {BASELINE}")
