"""Every read of a simulator's private name, one module per simulator.

The upstream simulators expose some state only under underscore names (Flappy
Bird's bird position, Tetris's observation builder, highway-env's time limit,
gym3's info buffers, minigrid's grid generator). Those names are not part of
their public API and may move in any release. Nothing in vical outside this
package touches them: game modules, families and demo recipes call the small
named functions here instead, and each module lists the names it relies on in
``RELIED_ON`` with the distribution and version (``DISTRIBUTION``,
``LOCKED_VERSION``, the pin of ``requirements.lock``) its code was checked
against and what breaks when a name moves.

:func:`missing` checks one module's names against the installed simulator;
``tests/test_envs_compat.py`` runs it for every module here (and scans the rest
of the package for private reads), so an upgrade that renames a name fails
loudly, naming it, instead of silently changing a score or a frame.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal


@dataclass(frozen=True)
class Private:
    """One private name a compat module relies on.

    ``owner``: ``module:Class`` defining it; ``kind``: ``class`` (a method or
    class attribute, checked on the class) or ``instance`` (set on the object,
    checked on the module's ``sample()`` simulator); ``breaks``: what stops
    working when the name moves.
    """

    owner: str
    name: str
    kind: Literal["class", "instance"]
    breaks: str

    def owner_class(self) -> type:
        module, _, cls = self.owner.partition(":")
        found = getattr(importlib.import_module(module), cls)
        if not isinstance(found, type):
            raise TypeError(f"{self.owner} is not a class")
        return found


def missing(module: ModuleType) -> list[str]:
    """One line per problem of a compat ``module`` on this installation: the simulator's
    installed version differs from the locked one, or a name in ``RELIED_ON`` is gone
    (each line names the distribution, the version, the owner, the name and what breaks)."""
    dist: str = module.DISTRIBUTION
    locked: str = module.LOCKED_VERSION
    relied: tuple[Private, ...] = module.RELIED_ON
    problems: list[str] = []
    installed = importlib.metadata.version(dist)
    if installed != locked:
        problems.append(
            f"{dist} {installed} is installed but {module.__name__} was checked against "
            f"{locked} (requirements.lock): re-check every name in RELIED_ON, then update it"
        )
    sample: Any = None
    for p in relied:
        if p.kind == "class":
            found = hasattr(p.owner_class(), p.name)
        else:
            if sample is None:
                make: Callable[[], Any] = module.sample
                sample = make()
            found = hasattr(sample, p.name)
        if not found:
            problems.append(
                f"{dist} {installed}: {p.owner}.{p.name} is gone ({p.kind} attribute); "
                f"it breaks {p.breaks}; update {module.__name__}"
            )
    return problems
