"""The errors vical raises on purpose, under one base class.

Every error a user can fix (a bad task glob, a run folder made with other
settings, a missing API key, an SDK that is not installed) is a
:class:`VicalError`. Its message is one line that says what is wrong and,
where there is one, the fix; ``exit_code`` is the status the command line
exits with (2: the input or the installation is wrong, the default). The
command line prints ``error: <message>`` for any of them and exits with that
code, so a command does not need its own ``except`` for each.

Concrete classes keep the builtin base they had before this module existed
(``TaskSpecError`` is still a ``ValueError``, ``ApiKeyMissing`` still a
``RuntimeError``), so older ``except ValueError`` clauses still catch them.

This module imports nothing from vical: every layer may import it.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class VicalError(Exception):
    """An error with a one-line message for the user and the exit code to leave with."""

    exit_code: int = 2


class TaskDataError(VicalError):
    """Task files or task ids are wrong: an unreadable YAML file, an unknown id or glob."""


class RunFolderError(VicalError, ValueError):
    """A run folder cannot be used as asked (busy, other settings, other task data)."""


class AgentConfigError(VicalError):
    """An agent cannot be built or reach its model: bad option, missing key, failed preflight."""


class MissingDependency(VicalError, ImportError):
    """An optional package is needed for what was asked and is not installed.

    The message names the package and the extra that installs it, e.g.
    ``pip install 'vical[api]'``. It is also an ``ImportError``, so code that
    already treats an absent package as optional keeps doing so.
    """

    def __init__(self, package: str, extra: str, needed_for: str):
        self.package = package
        self.extra = extra
        self.needed_for = needed_for
        super().__init__(
            f"{needed_for} needs the Python package {package!r}, which is not installed; "
            f"install it with: pip install 'vical[{extra}]'"
        )


def import_optional(module: str, *, package: str, extra: str, needed_for: str) -> ModuleType:
    """Import ``module`` from an optional dependency, or raise :class:`MissingDependency`.

    ``package`` is the distribution name to install (``google-genai`` for the
    module ``google.genai``), ``extra`` the vical extra that pulls it in, and
    ``needed_for`` what the user asked for (``backend openai-chat``). Only the
    absence of ``module`` itself (or of its parent package) is translated; an
    ImportError raised from inside an installed package is a real bug and
    propagates unchanged.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = getattr(e, "name", None)
        parents = {module.rsplit(".", k)[0] for k in range(module.count(".") + 1)}
        if missing is not None and missing not in parents:
            raise
        raise MissingDependency(package, extra, needed_for) from e


class TaskSpecError(TaskDataError, ValueError):
    """A task file could not be loaded; the message names file, task and field."""
