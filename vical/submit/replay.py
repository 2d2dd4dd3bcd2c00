"""Replay: every episode's actions played again in the simulator, and the results the
leaderboard may use rebuilt from what the simulator says.

:func:`replay_one` plays one episode's logged actions and compares frame hashes,
score, pass, outcome and failure mode with its claims; :func:`verified_result` keeps
the bundle's ids and actions and takes every scored field from the replay and this
vical's task data. :func:`replay_task` replays the episodes of one task in one
process and one simulator (the unit of work :func:`vical.submit.verify.verify_bundle`
hands to :func:`vical.run.pool.run_pool`).
"""

from __future__ import annotations

import os
from typing import Any

from vical.outcomes import AGENT_FAILURES, INFRASTRUCTURE_FAILURES, episode_failure, episode_name
from vical.run.results import EvalResult

# what only the agent can end an episode with (infrastructure failures are not results)
AGENT_ENDINGS = AGENT_FAILURES - INFRASTRUCTURE_FAILURES


def replay_one(
    result_json: str, starts: str = "replayed", jpegs: dict[int, str] | None = None
) -> tuple[str, list[str], dict[str, Any]]:
    """Replay one episode's actions.

    Returns (episode name, problems, what the simulator says: score, passed,
    outcome, failure_mode, steps, frame_hashes). Only that third part, with
    this vical's task data, reaches the leaderboard. ``starts`` is how the
    environment reaches its start state (:func:`vical.envs.make_env`); the
    default replays it, the slow path that needs no snapshot at all. ``jpegs``: the
    sha256 of the JPEG each logged request showed for the frame of a step
    (:func:`vical.submit.logcheck.check_log`); each must be the protocol's JPEG of
    the replayed frame.
    """
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    from vical.envs import make_env
    from vical.envs.core import frame_sha256

    r = EvalResult.model_validate_json(result_json)
    name = episode_name(r.task_id, r.run_index)
    problems = []
    env = make_env(r.task_id, starts=starts)
    jpegs = jpegs or {}
    shown: list[str] = []

    def check_jpeg(step: int, frame: Any) -> None:
        want = jpegs.get(step)
        if want is not None and not shown:
            from vical.agent.media import encode_jpeg, sha256_hex

            if sha256_hex(encode_jpeg(frame)) != want:
                shown.append(f"the request of step {step} showed another frame than the replay's")

    try:
        start_frame = env.reset()
        hashes = [frame_sha256(start_frame)]
        check_jpeg(0, start_frame)
        played = 0
        for i, a in enumerate(r.actions):
            if env.done:
                problems.append(f"episode ended before logged action {i + 1}")
                break
            try:
                s = env.step(a)
                hashes.append(s.frame_sha256)
                if i + 1 in jpegs:
                    check_jpeg(i + 1, s.frame)
            except ValueError as e:
                problems.append(f"action {i + 1} {a!r} rejected: {e}")
                break
            played += 1
        problems += shown
        if hashes != r.frame_hashes:
            first = next(
                (i for i, (x, y) in enumerate(zip(hashes, r.frame_hashes, strict=False)) if x != y),
                min(len(hashes), len(r.frame_hashes)),
            )
            problems.append(f"frame hashes differ from frame {first}")
        score, passed, outcome = env.score(), env.passed(), env.outcome
        if score != r.score:
            problems.append(f"score claimed {r.score}, replay gives {score}")
        if passed != r.passed:
            problems.append(f"pass claimed {r.passed}, replay gives {passed}")
        if env.done:
            failure = episode_failure(outcome, passed)
            if outcome != r.outcome:
                problems.append(f"outcome claimed {r.outcome}, replay gives {outcome}")
            if r.failure_mode in AGENT_ENDINGS:
                problems.append(f"failure {r.failure_mode} claimed, but the episode ended itself")
        else:
            # only the agent may end an episode before the simulator does
            failure = r.failure_mode if r.failure_mode in AGENT_ENDINGS else None
            if failure is None:
                problems.append(
                    f"the episode stops after {played} actions without ending and without an "
                    "agent failure"
                )
        if failure != r.failure_mode:
            problems.append(f"failure mode claimed {r.failure_mode}, replay gives {failure}")
        if r.steps != len(r.actions):
            problems.append(f"steps {r.steps} but {len(r.actions)} actions logged")
        facts = {
            "score": score,
            "passed": passed,
            "outcome": outcome,
            "failure_mode": failure,
            "steps": played,
            "frame_hashes": hashes,
        }
    finally:
        env.close()
    return name, problems, facts


def verified_result(claimed: EvalResult, facts: dict[str, Any]) -> EvalResult:
    """The result the leaderboard may use: ids and actions from the bundle, every
    scored field (score, pass, outcome, failure mode, steps, tags, budget) from the
    replay and this vical's task data."""
    from vical.spec import get_task

    task = get_task(claimed.task_id)
    return claimed.model_copy(
        update={
            **facts,
            "env": task.env.env,
            "variant": task.variant.variant,
            "tags": task.env.tags.model_dump(),
            "max_steps": task.max_steps,
            "actions": claimed.actions[: facts["steps"]],
        }
    )


Replayed = tuple[int, str, list[str], dict[str, Any]]


def replay_task(job: list[tuple[Any, ...]]) -> list[Replayed]:
    """Replay the numbered episodes of one task, in one process and one simulator.

    The task's start state is saved at its first reset and restored for the
    others without the snapshot check (``starts="trusted"``); an episode whose
    replay disagrees with its claims is replayed again from replayed starts, and
    only that second replay decides its verdict. A bundle that matches costs one
    replayed start per task; a mismatch costs one more, never a wrong verdict.
    """
    out = []
    for index, result_json, *rest in job:
        jpegs = rest[0] if rest else None
        name, problems, facts = replay_one(result_json, starts="trusted", jpegs=jpegs)
        if problems:
            name, problems, facts = replay_one(result_json, starts="replayed", jpegs=jpegs)
        out.append((index, name, problems, facts))
    return out
