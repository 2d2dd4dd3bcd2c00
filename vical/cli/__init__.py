"""The ``vical`` command line: a typer app, each command a thin call into a subpackage.

One module per group of commands; this one builds the app and registers them in
the order ``vical --help`` lists them:

``_common``  the consoles, :func:`fail`, :func:`interrupted`, :class:`OptionError`,
             task lookup, and the root group: the one place a
             :class:`~vical.errors.VicalError` becomes ``error: <message>`` and its
             exit code
``_api``     :class:`ApiOptions` and :func:`~vical.cli._api.api_options`, the model's
             options of every command that talks to one (eval, audit, wm couple)
``eval``     ``vical eval``, ``vical baseline random`` (:class:`EvalOptions`)
``report``   ``vical report`` (:class:`ReportOptions`)
``submit``   ``vical keygen|submit|verify``, ``vical leaderboard add|build``
``scale``    ``vical merge`` (shards of a run or of a verification), ``--shard`` parsing
``serve``    ``vical serve-baseline``
``doctor``   ``vical doctor`` (does this machine reproduce the recorded simulator results?)
``tasks``    ``vical tasks list|show|digest|sheet|make-init``
``demos``    ``vical demos make|pack|render``
``dataset``  ``vical dataset build|verify|stats|push``
``play``     ``vical play`` (a person plays tasks in the browser)
``view``     ``vical view`` (runs and bundles in the browser, static export)
``inspect_import``  ``vical import-inspect`` (an Inspect AI log as a run folder)
``audit``    ``vical audit RUN|run|report|sample|label|agreement`` (trajectory audits)
``wm``       ``vical wm build|eval|report|submit|verify`` (the world-model track)
``hub``      ``vical hub serve|worker|admin|register|status`` (the leaderboard service)

Start-up stays light: at import time these modules load only the standard library,
typer, rich and two stdlib-only vical modules (errors, paper). Each command imports
the subpackage it calls, so ``vical --help`` loads no pydantic, numpy, simulator or
optional extra.
"""

import os

# Plain help text: typer's boxed help cuts option names into ellipses in an 80-column
# terminal (set TYPER_USE_RICH=1 for the boxes). Read by typer when it is imported.
os.environ.setdefault("TYPER_USE_RICH", "0")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import typer

from vical import __version__
from vical.cli._api import ApiOptions
from vical.cli._common import _RootGroup, console
from vical.cli._common import select as _select
from vical.cli.audit import audit_app
from vical.cli.dataset import dataset_app
from vical.cli.demos import demos_app
from vical.cli.doctor import doctor_cmd
from vical.cli.eval import EvalOptions, baseline_app, eval_cmd
from vical.cli.hub import hub_app
from vical.cli.inspect_import import import_inspect_cmd
from vical.cli.play import play_cmd
from vical.cli.report import ReportOptions, report_cmd
from vical.cli.scale import merge_cmd
from vical.cli.serve import serve_baseline
from vical.cli.submit import keygen_cmd, leaderboard_app, submit_cmd, verify_cmd
from vical.cli.tasks import number_sources, tasks_app
from vical.cli.view import view_cmd
from vical.cli.wm import wm_app

__all__ = [
    "ApiOptions",
    "EvalOptions",
    "ReportOptions",
    "_RootGroup",
    "_select",
    "app",
    "main",
    "number_sources",
]

app = typer.Typer(
    cls=_RootGroup,
    help="vical: evaluate multimodal agents on the V-ICAL benchmark (342 tasks, 37 games).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        console.print(f"vical {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """vical command line."""


# Commands first, then groups, each in the order `vical --help` shows them.
app.command("eval")(eval_cmd)
app.command("report")(report_cmd)
app.command("keygen")(keygen_cmd)
app.command("submit")(submit_cmd)
app.command("serve-baseline")(serve_baseline)
app.command("verify")(verify_cmd)
app.command("merge")(merge_cmd)
app.command("doctor")(doctor_cmd)
app.command("play")(play_cmd)
app.command("view")(view_cmd)
app.command("import-inspect")(import_inspect_cmd)
app.add_typer(tasks_app, name="tasks")
app.add_typer(baseline_app, name="baseline")
app.add_typer(leaderboard_app, name="leaderboard")
app.add_typer(demos_app, name="demos")
app.add_typer(dataset_app, name="dataset")
app.add_typer(audit_app, name="audit")
app.add_typer(wm_app, name="wm")
app.add_typer(hub_app, name="hub")


def main() -> None:
    from vical.cli import _common

    _common._CONSOLE[0] = True  # the process ends with the command: see stop_signals
    app()
