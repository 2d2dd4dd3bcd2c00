"""``vical audit``: trajectory audits of a run, their tables, and their human verification.

``vical audit RUN --backend … --endpoint … --model …`` (the same as ``vical audit
run RUN …``) asks an auditor model about every scored episode of the run and
prints Tables 3 and 4; ``vical audit RUN --report`` (or ``vical audit report
RUN…``) only prints the tables. ``sample``, ``label`` and ``agreement`` are the
human verification: a stratified blind sample, a local page to label it, and
the agreement statistics of Tables 11-14.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from vical.cli._api import API_OPTIONS, ApiOptions, api_options
from vical.cli._common import OptionError, agent_option, console, err, fail, interrupted, say


class _AuditGroup(TyperGroup):
    """``vical audit RUN …`` is ``vical audit run RUN …``: a first word that names no
    command and is not an option is the run folder of the default command."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


audit_app = typer.Typer(
    cls=_AuditGroup,
    help="Trajectory audits (paper Section 4.3): vical audit RUN --backend … --model …; "
    "then report, sample, label, agreement.",
    no_args_is_help=True,
)


def _print_tables(runs: list[Path], out: Path | None) -> None:
    from vical.audit.tables import render_markdown, run_audit

    try:
        audits = [run_audit(r) for r in runs]
    except FileNotFoundError as e:
        fail(str(e))
    text = render_markdown(audits)
    say(text)
    if out is not None:
        from vical.run.results import atomic_write_bytes, atomic_write_json

        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "audit_tables.json", {"runs": [a.as_json() for a in audits]})
        atomic_write_bytes(out / "audit_tables.md", text.encode())
        say(f"tables written to {out / 'audit_tables.json'} and {out / 'audit_tables.md'}")


@audit_app.command("run")
@api_options("API base URL of the auditor.", "Auditor model name at the endpoint.")
def run_cmd(
    run: Path = typer.Argument(..., help="Run folder to audit (runs/<id>)."),
    backend: str = agent_option(
        None, help="Auditor backend: openai-chat, openai-responses, gemini, openrouter."
    ),
    api: ApiOptions = API_OPTIONS,
    request_timeout: float = typer.Option(
        600.0, "--request-timeout", min=0.1, help="Seconds to wait for one auditor reply."
    ),
    max_retry_after: float = typer.Option(
        120.0, "--max-retry-after", min=0.0, help="Longest Retry-After (seconds) honoured."
    ),
    transport_retries: int = typer.Option(
        3, "--transport-retries", min=0, help="Resends after a connection error, 429 or 5xx."
    ),
    verdict_retries: int = typer.Option(
        2,
        "--verdict-retries",
        min=0,
        help="Times the auditor is asked again after a reply that is not a valid verdict; "
        "then the criterion is recorded as invalid.",
    ),
    max_consecutive_errors: int = typer.Option(
        5, "--max-consecutive-errors", min=1, help="Stop after this many failing episodes."
    ),
    preflight: bool = typer.Option(
        True, "--preflight/--no-preflight", help="Check the auditor with one small request."
    ),
    workers: int = typer.Option(
        1, "--concurrency", "-j", min=1, help="Episodes audited at once (one client each)."
    ),
    report: bool = typer.Option(
        False, "--report", help="Only print the tables of the audits already made."
    ),
    out: Path = typer.Option(
        None, "--out", "-o", help="Also write audit_tables.json/.md to this folder."
    ),
) -> None:
    """Audit every scored episode of RUN (results in RUN/audit/<episode>.json), then print
    Tables 3 and 4 and Figure 4's cells. Running it again audits only what is missing
    (and asks again where the endpoint failed)."""
    if report:
        _print_tables([run], out)
        return
    if backend is None:
        raise OptionError("--backend is required to audit (or pass --report for the tables)")
    kwargs = api.agent_kwargs(backend)
    from vical.audit.runner import API_ERROR, audit_run
    from vical.run.pool import Interrupted

    def shown(name: str, record: dict[str, Any]) -> None:
        said = ", ".join(f"{c}: {v['status']}" for c, v in record["criteria"].items())
        say(f"{name}: {said}")

    try:
        s = audit_run(
            run,
            backend,
            kwargs,
            verdict_retries=verdict_retries,
            max_consecutive_errors=max_consecutive_errors,
            preflight=preflight,
            workers=workers,
            progress=shown,
        )
    except (Interrupted, KeyboardInterrupt):
        interrupted(f"finished audits are kept in {run / 'audit'}; run the same command to resume")
    except FileNotFoundError as e:
        fail(str(e))
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items())) or "nothing new"
    refused = ", ".join(f"{k} {v}" for k, v in sorted(s.refused.items())) or "none"
    say(
        f"{s.audited} episode(s) audited, {s.skipped} already done, of {s.episodes}; "
        f"criteria: {statuses}; refused replies: {refused}; "
        f"{s.verdict_retries} verdict retr{'y' if s.verdict_retries == 1 else 'ies'}"
    )
    _print_tables([run], out)
    if s.stopped_by_breaker:
        err.print(f"stopped after {max_consecutive_errors} failing episodes in a row")
    if s.statuses.get(API_ERROR) or s.stopped_by_breaker:
        err.print("some audits failed on the endpoint; run the same command again to retry them")
        raise typer.Exit(1)


@audit_app.command("report")
def report_cmd(
    runs: list[Path] = typer.Argument(..., help="Audited run folders, side by side."),
    out: Path = typer.Option(
        None, "--out", "-o", help="Also write audit_tables.json/.md to this folder."
    ),
) -> None:
    """Tables 3 and 4, Figure 4's cells and Table 15 for audited runs side by side."""
    _print_tables(list(runs), out)


def _json_out(obj: Any, path: Path | None) -> None:
    if path is None:
        console.print_json(json.dumps(obj))
        return
    from vical.run.results import atomic_write_json

    atomic_write_json(path, obj)
    say(f"written to {path}")


@audit_app.command("sample")
def sample_cmd(
    runs: list[Path] = typer.Argument(..., help="Audited run folders (one per model)."),
    out: Path = typer.Option(..., "--out", "-o", help="Sample file to write (JSON)."),
    per_env: int = typer.Option(3, "--per-env", min=1, help="Task configurations per environment."),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw."),
) -> None:
    """Draw the stratified blind sample for human verification: the same PER_ENV random
    tasks of every environment in every run, cases shuffled under opaque ids."""
    from vical.audit.sample import stratified_sample
    from vical.run.results import atomic_write_json

    try:
        sample = stratified_sample(list(runs), per_env=per_env, seed=seed)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    atomic_write_json(out, sample)
    envs = len({c["env"] for c in sample["cases"]})
    say(f"{len(sample['cases'])} cases from {envs} environment(s) written to {out}")


@audit_app.command("label")
def label_cmd(
    sample: Path = typer.Argument(..., help="Sample file (vical audit sample)."),
    labels: Path = typer.Option(..., "--labels", help="Labels file to write (JSON)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(8766, "--port", help="TCP port (0: any free port)."),
) -> None:
    """Serve the labelling page: each sampled trajectory without the auditor's verdicts,
    and a form whose answers are saved to LABELS as you go."""
    from vical.audit.label import LabelServer

    server = LabelServer(sample, labels, host=host, port=port)
    say(f"labelling page on {server.url} (Ctrl-C to stop; labels are saved to {labels})")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
        interrupted(f"labels so far are in {labels}")


@audit_app.command("agreement")
def agreement_cmd(
    sample: Path = typer.Argument(..., help="Sample file (vical audit sample)."),
    labels: Path = typer.Argument(..., help="Labels file (vical audit label)."),
    resamples: int = typer.Option(10_000, "--resamples", min=1, help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    json_out: Path = typer.Option(None, "--json", help="Also write the tables as JSON here."),
) -> None:
    """Agreement between the auditor and the person's labels (Tables 11-14): exact
    agreement with environment-clustered 95% bootstrap intervals and Cohen's kappa."""
    from vical.audit.agreement import agreement_report, load_pairs, render_markdown

    try:
        report = agreement_report(load_pairs(sample, labels), resamples=resamples, seed=seed)
    except ValueError as e:
        fail(str(e))
    say(render_markdown(report))
    if json_out is not None:
        _json_out(report, json_out)
