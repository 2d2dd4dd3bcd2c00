"""How an episode can end, and what its folder is called.

The failure modes (paper Appendix 5.1) and the episode-folder name are used
by the agents, the runner, the report and verification; they are spelled
here once. This module imports nothing from vical, so every layer may use it
(agent/ must not import run/).

The values are the strings written to ``eval_result.json``
(``failure_mode``); :class:`FailureMode` is a ``StrEnum``, so a member
compares, hashes, formats and serialises exactly like its string and result
files are the same bytes as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any


class FailureMode(StrEnum):
    """Why an episode did not pass."""

    TIMEOUT = "timeout"  # the step budget ran out without a pass
    INVALID_ACTION = "invalid_action"  # no legal action after the format retries
    TOKEN_OVERFLOW = "token_overflow"  # the conversation outgrew the model's context
    EARLY_TERMINATION = "early_termination"  # the game ended without a pass (death, failure)
    API_ERROR = "api_error"  # the endpoint or the network failed, not the model


# every mode, in the order the report lists them
FAILURE_MODES: tuple[FailureMode, ...] = tuple(FailureMode)
# modes an agent reports itself (a Decision's ``failure``); the runner adds the others
AGENT_FAILURES: frozenset[FailureMode] = frozenset(
    {FailureMode.INVALID_ACTION, FailureMode.TOKEN_OVERFLOW, FailureMode.API_ERROR}
)
# modes caused by the infrastructure (endpoint, network, server), not by the model:
# such episodes are not results; they are reported apart and retried on resume
INFRASTRUCTURE_FAILURES: frozenset[FailureMode] = frozenset({FailureMode.API_ERROR})
# modes the environment decides (the game ended or the budget ran out)
ENVIRONMENT_FAILURES: frozenset[FailureMode] = frozenset(
    {FailureMode.TIMEOUT, FailureMode.EARLY_TERMINATION}
)


def short_tasks(results: Iterable[Any], runs_per_task: int) -> list[str]:
    """Tasks among ``results`` (objects with ``task_id`` and ``run_index``) that do not
    hold exactly the runs 0..runs_per_task-1, sorted."""
    runs: dict[str, set[int]] = {}
    for r in results:
        runs.setdefault(r.task_id, set()).add(r.run_index)
    return sorted(t for t, ks in runs.items() if ks != set(range(runs_per_task)))


def episode_failure(
    outcome: str | None, passed: bool, agent_failure: str | None = None
) -> FailureMode | None:
    """The failure mode of a finished episode (None when it passed).

    An agent's own failure wins; otherwise an episode without a pass timed out
    when the game's outcome is ``Time Out`` (the step budget ran out) and ended
    early in every other case.
    """
    if agent_failure:
        return FailureMode(agent_failure)
    if passed:
        return None
    if outcome == "Time Out":
        return FailureMode.TIMEOUT
    return FailureMode.EARLY_TERMINATION


_EPISODE = re.compile(r"(?P<env>[^/]+?)__(?P<variant>[^/]+)__r(?P<run>0|[1-9][0-9]*)")


def episode_name(task_id: str, run_index: int) -> str:
    """The folder name of one episode: ``<env>__<variant>__r<k>`` for task ``env/variant``."""
    env, sep, variant = task_id.partition("/")
    if not sep or not env or not variant or "/" in variant:
        raise ValueError(f"task id {task_id!r} is not of the form env/variant")
    if run_index < 0:
        raise ValueError(f"run index {run_index} is negative")
    return f"{env}__{variant}__r{run_index}"


def parse_episode_name(name: str) -> tuple[str, int]:
    """The task id and run index an episode folder name stands for (the inverse of
    :func:`episode_name`); ValueError for a name it could not have made."""
    m = _EPISODE.fullmatch(name)
    if m is None:
        raise ValueError(f"{name!r} is not an episode name (<env>__<variant>__r<k>)")
    return f"{m['env']}/{m['variant']}", int(m["run"])
