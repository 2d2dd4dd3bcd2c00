"""``vical doctor``: does this machine reproduce the recorded simulator results?

A thin call into :mod:`vical.run.doctor`: replay one long demonstration clip and one
random episode per environment, compare every step's frame hash, score and float
state with the packaged record, then print this machine's CPU features, library
versions and the environment variables that change float results.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vical.cli._common import console, interrupted, say

if TYPE_CHECKING:
    from vical.run.doctor import EpisodeCheck


def doctor_cmd(
    quick: bool = typer.Option(
        False,
        "--quick",
        help="Only the first steps of the float-physics environments (a few seconds; what "
        "`vical eval` runs before an API model's first request).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    env: list[str] = typer.Option(
        None,
        "--env",
        "-e",
        metavar="ENV",
        help="Check only this environment (repeat it, or separate keys with commas).",
    ),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Parallel processes."),
    record_file: Path = typer.Option(
        None,
        "--record-file",
        help="The record to check against or write (default: $VICAL_DOCTOR_RECORD, else "
        "the one packaged with vical).",
    ),
    tasks_dir: Path = typer.Option(
        None,
        "--tasks-dir",
        help="An added folder of task files to check instead of the built-in set, against "
        "the record beside them (FOLDER/doctor.json, written by `vical tasks record`).",
    ),
    record: bool = typer.Option(
        False,
        "--record",
        help="Maintainers: replay every environment on this machine and write the record "
        "(after a change meant to alter simulator results).",
    ),
) -> None:
    """Check that this machine reproduces the simulators bit for bit.

    Replays, per environment, its longest demonstration clip and one random-agent
    episode, comparing each step's frame hash, score and float state (where the
    simulator exposes it) with a record made on the maintainers' machine. Prints OK
    or the first step and quantity that differ, then the CPU features, library
    versions and numeric environment variables to quote in a bug report.

    Exit status: 0 OK; 1 a divergence (results made here may fail verification);
    2 the check could not run (stale or missing record, unknown environment);
    130 interrupted.
    """
    from vical.run.doctor import report_lines, run_doctor
    from vical.run.doctor_record import write_record
    from vical.run.fingerprints import DOCTOR_FILE
    from vical.run.machine import machine, machine_lines
    from vical.run.pool import Interrupted
    from vical.spec import TASKS_DIR

    envs = [e.strip() for item in env or [] for e in item.split(",") if e.strip()] or None
    folder = TASKS_DIR if tasks_dir is None else tasks_dir
    if tasks_dir is not None and record_file is None:
        record_file = tasks_dir / DOCTOR_FILE
    if record:
        try:
            path = write_record(record_file, envs, workers, tasks_dir=folder)
        except (Interrupted, KeyboardInterrupt):
            interrupted("the record was not written")
        say(f"wrote the doctor record {path}")
        return
    show = not as_json and sys.stdout.isatty()

    def progress(name: str, checks: list[EpisodeCheck]) -> None:
        if show:
            bad = sum(c.divergence is not None for c in checks)
            say(f"  {name:<16}{'DIVERGED' if bad else 'ok'}")

    try:
        report = run_doctor(
            record_file, envs, quick=quick, workers=workers, on_env=progress, tasks_dir=folder
        )
    except (Interrupted, KeyboardInterrupt):
        interrupted("the check was stopped; run it again to finish it")
    here = machine(full=True)
    code = 0 if report.ok else 1 if report.status == "diverged" else 2
    if as_json:
        sys.stdout.write(json.dumps({**report.to_json(), "machine": here}, indent=2) + "\n")
        raise typer.Exit(code)
    for line in report_lines(report):
        say(line)
    say("this machine:")
    for line in machine_lines(here):
        say(line)
    if code == 1:
        say("the record was made on:")
        for line in machine_lines(report.recorded_on):
            say(line)
        console.print(
            "Episodes played here may fail verification. Compare the numpy cpu lines; "
            "NPY_DISABLE_CPU_FEATURES can turn a feature off (README: When a run goes "
            "wrong). Quote this output in a bug report.",
            markup=False,
            highlight=False,
        )
    raise typer.Exit(code)
