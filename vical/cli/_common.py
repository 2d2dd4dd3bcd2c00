"""What every command shares: the two consoles, the ways to leave, and task lookup.

The root group (:class:`_RootGroup`) is the one place where a
:class:`~vical.errors.VicalError` becomes one ``error: <message>`` line and the
error's exit code; a command either raises one (an :class:`OptionError` for a bad
option value) or calls :func:`fail` directly.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from vical.errors import VicalError

if TYPE_CHECKING:
    from vical.spec import EnvSpec, TaskSpec

console = Console()
err = Console(stderr=True)


class OptionError(VicalError):
    """An option value the command cannot use; ends as one error line with status 2."""


# Generation options shared by every command that talks to a model (eval, audit):
# one declaration each, so their flags and help read the same everywhere.
API_KEY_ENV = typer.Option(None, "--api-key-env", help="Environment variable holding the API key.")
TEMPERATURE = typer.Option(None, "--temperature", help="Sampling temperature.")
MAX_OUTPUT_TOKENS = typer.Option(None, "--max-output-tokens", help="Cap on tokens per reply.")
REASONING_EFFORT = typer.Option(
    None, "--reasoning-effort", help="Reasoning effort where the provider has it."
)
EXTRA_BODY = typer.Option(None, "--extra-body", help="JSON object merged into each request body.")


def serve_page(server: Any, open_browser: bool, stopped: str = "stopped") -> None:
    """Serve a local page (``vical play``, ``vical view``) until Ctrl-C: print its
    address, open it in the default browser when asked, close the server on leaving."""
    console.print(f"open {server.url} in a browser; Ctrl-C stops")
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print(f"\n{stopped}")
    finally:
        server.close()


def say(line: str) -> None:
    """Print ``line`` as is: no markup, no highlighting, never re-wrapped (it pastes whole)."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print one error (never re-wrapped, so it pastes whole) and exit with ``code``."""
    err.print(f"[bold red]error:[/] {escape(msg)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def interrupted(msg: str) -> NoReturn:
    """Leave after an interrupt whose cleanup is done: print ``msg``, exit 130.

    Further SIGINT/SIGTERM are ignored from here on: Python restores the default
    handlers while it exits, and a second Ctrl-C landing then would turn status
    130 into death by signal.
    """
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    err.print(f"\ninterrupted: {msg}", soft_wrap=True, highlight=False, markup=False)
    raise typer.Exit(130)


class _RootGroup(TyperGroup):
    """The ``vical`` group. Its ``invoke`` runs every command, so it is the one place
    where a :class:`~vical.errors.VicalError` a command lets through becomes one
    ``error: <message>`` line and the error's exit code (through the console
    script and through ``typer.testing.CliRunner`` alike)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except VicalError as e:
            fail(str(e), e.exit_code)


def envs() -> dict[str, EnvSpec]:
    """Every environment's spec (a bad task file is a TaskSpecError: one error line)."""
    from vical.spec import load_envs

    return load_envs()


def select(patterns: str | None) -> list[TaskSpec]:
    """The tasks the globs select (no match is a TaskSpecError: one error line)."""
    from vical.spec import select_tasks

    return select_tasks(patterns)
