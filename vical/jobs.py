"""The contract of a job runner, and the simplest one: every job here, in order.

:func:`vical.run.pool.run_pool` runs jobs on worker processes; the packages below
``vical.run`` in the import layers (the world-model track) take such a runner as an
argument (:class:`Pool`) and run their jobs with :func:`in_process` when given none.
Both report each job the same way (:func:`report`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

J = TypeVar("J")
OnResult = Callable[[J, Any, BaseException | None], bool | None]


class Pool(Protocol):
    """How jobs are run: :func:`vical.run.pool.run_pool`'s signature."""

    def __call__(
        self,
        fn: Callable[[J], Any],
        jobs: Iterable[J],
        workers: int,
        on_result: OnResult[J],
        *,
        initializer: Callable[[], None] | None = None,
        on_abort: Callable[[], None] | None = None,
        on_interrupt: Callable[[], None] | None = None,
    ) -> bool: ...


def report(fn: Callable[[J], Any], job: J, on_result: OnResult[J]) -> bool:
    """Run one job here and hand its value or its error to ``on_result``; False when
    ``on_result`` asks to stop."""
    try:
        value = fn(job)
    except Exception as e:
        return on_result(job, None, e) is not False
    return on_result(job, value, None) is not False


def in_process(
    fn: Callable[[J], Any],
    jobs: Iterable[J],
    workers: int,
    on_result: OnResult[J],
    **_hooks: Callable[[], None] | None,
) -> bool:
    """A :class:`Pool` that runs each job here, in order (``workers`` and the pool's
    hooks are ignored); Ctrl-C interrupts the job itself. False when ``on_result``
    stopped it early."""
    return all(report(fn, job, on_result) for job in jobs)
