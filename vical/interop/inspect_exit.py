"""``inspect eval`` of the V-ICAL tasks exits non-zero when no sample finished.

Inspect's ``eval`` command exits 0 whatever became of the samples: a run whose every
sample errored (a missing package, an endpoint that refuses every request) looks like
success to a shell script or a CI job. An Inspect hook, registered when Inspect loads
the V-ICAL tasks through their entry point, watches the end of each run: when a
V-ICAL task (``vical/...``) ended with samples and none of them completed, it prints
one ``error:`` line naming the task, its log and the first sample error, and the
command then exits 1 instead of 0.

Only the ``inspect eval`` and ``inspect eval-retry`` commands are affected: a Python
program that calls ``inspect_ai.eval()`` reads the returned logs' status itself.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import Any

from inspect_ai.hooks import Hooks, RunEnd, hooks

EXIT_CODE = 1
COMMANDS = ("eval", "eval-retry")
_failed: list[str] = []  # the error lines of the tasks that completed no sample


def in_inspect_command(argv: list[str] | None = None) -> bool:
    """Whether this process is Inspect's ``inspect eval`` (or ``eval-retry``) command."""
    argv = sys.argv if argv is None else argv
    return len(argv) > 1 and Path(argv[0]).name == "inspect" and argv[1] in COMMANDS


def failure_line(log: Any) -> str | None:
    """The ``error:`` line of a V-ICAL task's log in which no sample completed, else None."""
    spec = log.eval
    if not str(spec.task).startswith("vical/"):
        return None
    total = spec.dataset.samples or 0
    completed = log.results.completed_samples if log.results is not None else 0
    if total == 0 or completed > 0:
        return None
    first = None
    if log.error is not None:
        first = log.error.message
    for s in log.samples or []:
        if s.error is not None:
            first = s.error.message
            break
    reason = f": {error_summary(first)}" if first else ""
    return (
        f"error: {spec.task}: none of its {total} sample(s) completed{reason}; "
        f"the log is {log.location}"
    )


def error_summary(message: str) -> str:
    """The last line of an Inspect error message (Inspect keeps an error as the repr of
    its exception, a model error's with the whole request before the provider's
    answer), at most 200 characters."""
    text = message.replace("\\n", "\n").replace("\\'", "'")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    last = lines[-1] if lines else message.strip()
    if last.endswith("')") and len(lines) > 1:  # the closing of the outer repr
        last = last[:-2]
    return last[:200]


def _exit_nonzero() -> None:
    """At interpreter exit (registered first, so run last): exit 1 if a task failed."""
    if _failed:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_CODE)


@hooks(name="vical_exit_status", description="inspect eval exits 1 when no V-ICAL sample completed")
class ExitStatus(Hooks):
    """Records each V-ICAL task that ended without a completed sample."""

    def enabled(self) -> bool:
        return in_inspect_command()

    async def on_run_end(self, data: RunEnd) -> None:
        # (the run's end, not each task's: Inspect announces no end for a task that errored)
        for log in data.logs:
            line = failure_line(log)
            if line is not None:
                _failed.append(line)
                print(line, file=sys.stderr, flush=True)


if in_inspect_command():
    atexit.register(_exit_nonzero)
