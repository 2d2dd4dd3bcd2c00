"""Screen-viable starts: a generated start from which no screen-blind policy of the
reflex screen passes the task (the check the start searches of
:mod:`vical.authoring.search.starts` and :mod:`vical.authoring.search.decision_points` take).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vical.errors import TaskDataError
from vical.spec import EnvSpec, TaskSpec, TaskVariant

Viable = Callable[[TaskVariant, list[str]], bool]
"""``viable(variant, init_actions)``: may the variant start after these actions?"""

# ours: how many walks :func:`dense_starts` draws beyond its ``candidates`` before it
# gives up on a variant none of whose walks is viable (four more batches of six)
EXTRA_CANDIDATES = 24


class NoViableStart(TaskDataError, RuntimeError):
    """No drawn start of a generated variant passes the viability check."""


def reflex_pass(
    env_spec: EnvSpec,
    variant: TaskVariant,
    init_actions: list[str],
    make: Callable[[TaskSpec], Any] | None = None,
) -> str | None:
    """The first deterministic screen-blind policy that passes the task from a start.

    The task is ``variant`` started after ``init_actions``; the policies are the
    reflex screen's deterministic ones (:func:`vical.run.screen.battery` without its
    random family: every constant action, then the action cycles), each played for
    one episode on ``make(task)`` (default :func:`vical.envs.make_env`) exactly as
    ``vical tasks screen`` plays it. Returns the passing policy's name, or None when
    none passes.
    """
    from vical.envs import make_env
    from vical.run.screen import battery, is_random, play

    task = TaskSpec(
        env=env_spec, variant=variant.model_copy(update={"init_actions": list(init_actions)})
    )
    env = (make or make_env)(task)
    try:
        for pol in battery(task):
            if not is_random(pol.name) and play(env, pol.make(), pol.name).passed:
                return pol.name
    finally:
        env.close()
    return None


def screen_viable(env_spec: EnvSpec, make: Callable[[TaskSpec], Any] | None = None) -> Viable:
    """A viability check for generated starts: no constant action and no action cycle
    of the reflex screen passes the task from the start (see :func:`reflex_pass`;
    ``make`` builds the env, default :func:`vical.envs.make_env`).

    Random play is left out to keep the check cheap (the screen judges it by its pass
    rate over several episodes, not by one pass)."""

    def viable(variant: TaskVariant, init_actions: list[str]) -> bool:
        return reflex_pass(env_spec, variant, init_actions, make) is None

    return viable
