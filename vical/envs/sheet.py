"""Former home of the start-state review tools, now in :mod:`vical.authoring`.

The runtime package does not depend on the authoring tools: these two names are
kept for the CLI's ``vical tasks sheet`` / ``vical tasks make-init`` and import
their new homes only when called.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vical.spec import EnvSpec, TaskSpec


def start_sheet(tasks: list[TaskSpec], out: Path, columns: int = 5) -> None:
    """See :func:`vical.authoring.sheet.start_sheet`."""
    from vical.authoring.sheet import start_sheet as draw

    draw(tasks, out, columns)


def init_generator(spec: EnvSpec) -> Callable[[EnvSpec], dict[str, list[str]]] | None:
    """See :func:`vical.authoring.init_generator`."""
    from vical.authoring import init_generator as find

    return find(spec)
