"""What every command shares: the two consoles, the ways to leave, and task lookup.

The root group (:class:`_RootGroup`) is the one place where a
:class:`~vical.errors.VicalError` becomes one ``error: <message>`` line and the
error's exit code; a command either raises one (an :class:`OptionError` for a bad
option value) or calls :func:`fail` directly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from vical.errors import VicalError

if TYPE_CHECKING:
    # typer vendors click and declares TyperGroup.invoke on its own copy's Context
    from typer import _click

    from vical.spec import EnvSpec, TaskSpec
    from vical.submit.verdict import Verdict

console = Console()
err = Console(stderr=True)

# SDL (under pygame, which draws several simulators' frames) takes SIGINT and SIGTERM
# for itself when it starts and finds them at their defaults, turning them into quit
# events nobody reads: the process then ignores `kill` and a container's stop. This
# hint, read by SDL at start-up, leaves the signals to Python (set before any import
# of pygame, since the cli package is imported first).
os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")


class OptionError(VicalError):
    """An option value the command cannot use; ends as one error line with status 2."""


# The backend and where its model is: declared once, with the help a command gives them.
def agent_option(default: str | None, help: str) -> Any:
    """``--agent`` (or ``--backend``, ``-a``): the agent backend a command builds."""
    return typer.Option(default, "--agent", "--backend", "-a", help=help)


def endpoint_option(help: str = "API base URL of the model server.") -> Any:
    """``--endpoint``: the API base URL of the backend's model (default: the provider's)."""
    return typer.Option(None, "--endpoint", help=help)


def model_option(help: str = "Model name at the endpoint.") -> Any:
    """``--model``: the model name at the endpoint."""
    return typer.Option(None, "--model", help=help)


# [True] when the command line runs as its own process (vical.cli.main), not inside a
# test's CliRunner: only then may leaving set the process to ignore signals
_CONSOLE = [False]


class Stop:
    """What :func:`stop_signals` saw: ``received`` is the first signal's number, or None."""

    def __init__(self) -> None:
        self.received: int | None = None

    def check(self) -> None:
        """Raise KeyboardInterrupt if a signal came and its KeyboardInterrupt was lost
        (swallowed by a library, or raised where it could not propagate)."""
        if self.received is not None:
            raise KeyboardInterrupt


def _leave_now(signum: int, frame: Any) -> None:
    from vical.run.pool import exit_at_once

    exit_at_once(signum, frame)


@contextlib.contextmanager
def stop_signals(serving: bool = False, done_ignores: bool = False) -> Iterator[Stop]:
    """SIGTERM means what SIGINT (Ctrl-C) means, for a command that runs until stopped.

    The first SIGINT or SIGTERM raises KeyboardInterrupt in the main thread; the
    command catches it, cleans up and leaves. A further one, while it cleans up
    or later, exits at once with status 130 (whatever was half-written is in a
    temporary place the next run clears). Without a signal, the previous
    handlers come back on leaving, except where :func:`interrupted` has set the
    process to ignore further signals while it exits (a handler put back then
    would be reset to the default by Python's own shutdown, and a second Ctrl-C
    would kill the process instead of leaving it with status 130). A signal
    the process was started ignoring stays ignored. Handlers are only installed
    from the main thread.

    ``serving``: for a command that serves until stopped (``play``, ``view``): the
    first signal stops it and every later one is ignored, so it ends with status 0
    however many Ctrl-C came. ``done_ignores``: for the whole command run as a
    process (:func:`vical.cli.main`): once it is over without a signal, further
    signals are ignored while Python tears down, so a signal landing after the work
    is done (every output written) does not turn its status into death by signal.
    """
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: Any) -> None:
        if stop.received is not None:
            _leave_now(signum, frame)
        stop.received = signum
        if serving:  # one stop; the later signals change nothing
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt

    # a signal ignored when we start (`nohup`, a background job of a script) stays so
    signals = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) != signal.SIG_IGN]
    old = {s: signal.signal(s, handle) for s in signals}
    try:
        yield stop
    finally:
        for s, h in old.items():
            if signal.getsignal(s) == signal.SIG_IGN:
                continue  # `interrupted()` ran: the process is leaving and ignores more
            if stop.received is not None:
                signal.signal(s, _leave_now)
            else:
                signal.signal(s, signal.SIG_IGN if done_ignores else h)


def serve_page(server: Any, open_browser: bool, stopped: str = "stopped") -> None:
    """Serve a local page (``vical play``, ``vical view``) until Ctrl-C or SIGTERM:
    print its address, open it in the default browser when asked, close the server
    on leaving (the caller's ``with`` blocks then release what they hold)."""
    with stop_signals(serving=True) as stop:
        try:  # the address inside: a Ctrl-C right after it is a stop like any other
            console.print(f"open {server.url} in a browser; Ctrl-C stops")
            if open_browser:
                import webbrowser

                webbrowser.open(server.url)
            server.serve_forever()
        except KeyboardInterrupt:
            name = signal.Signals(stop.received).name if stop.received else "SIGINT"
            console.print(f"\n{name}: {stopped}", soft_wrap=True, highlight=False)
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


def print_verdict(v: Verdict) -> None:
    """A verdict's mismatches and machines (stderr), then its one-line result
    (``vical verify`` and ``vical merge`` of verdict shards)."""
    from vical.submit.verify import machines_lines

    for e in v.episodes:
        if not e.ok:
            err.print(f"[red]MISMATCH[/] {e.episode}: {'; '.join(e.problems)}")
    for line in machines_lines(v.machines):
        err.print(line, markup=False, highlight=False, soft_wrap=True)
    n_bad = len(v.mismatches)
    status = "[green]PASS[/]" if v.ok else "[red]FAIL[/]"
    console.print(
        f"{status}: {len(v.episodes) - n_bad}/{len(v.episodes)} episodes replay "
        f"exactly; signer {v.signer}; {'partial' if v.partial else 'complete'} "
        "coverage"
    )


class _RootGroup(TyperGroup):
    """The ``vical`` group. Its ``invoke`` runs every command, so it is the one place
    where a :class:`~vical.errors.VicalError` a command lets through becomes one
    ``error: <message>`` line and the error's exit code (through the console
    script and through ``typer.testing.CliRunner`` alike).

    It is also where every command gets the signal contract: SIGTERM (a
    container's or a service manager's stop) means what Ctrl-C means
    (:func:`stop_signals`), and an interrupt a command lets through, as
    ``KeyboardInterrupt`` or as the pool's ``Interrupted``, ends as one
    ``interrupted:`` line and status 130, never a traceback. Commands that can
    say more (what was kept, how to resume) catch it first; commands that serve
    until stopped (``serve-baseline``, ``play``, ``view``) end with status 0.
    Every output a command writes is replaced whole (a temporary file or
    folder renamed into place), so none is half-written after either.
    """

    def invoke(self, ctx: _click.Context) -> Any:
        with stop_signals(done_ignores=_CONSOLE[0]) as stop:
            try:
                return super().invoke(ctx)
            except VicalError as e:
                fail(str(e), e.exit_code)
            except KeyboardInterrupt:
                _stopped(stop.received)
            except Exception as e:
                from vical.run.pool import Interrupted

                if isinstance(e, Interrupted):
                    _stopped(e.signum)
                raise


def _stopped(signum: int | None) -> NoReturn:
    name = signal.Signals(signum).name if signum else "SIGINT"
    interrupted(
        f"{name}: stopped before it finished; every file it writes is replaced whole, so "
        "none is half-written; run the same command again to do it"
    )


def envs() -> dict[str, EnvSpec]:
    """Every environment's spec (a bad task file is a TaskSpecError: one error line)."""
    from vical.spec import load_envs

    return load_envs()


def select(patterns: str | None) -> list[TaskSpec]:
    """The tasks the globs select (no match is a TaskSpecError: one error line)."""
    from vical.spec import select_tasks

    return select_tasks(patterns)
