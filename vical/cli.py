"""The ``vical`` command line. Each command is a thin call into a subpackage."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

# Plain help text: typer's boxed help cuts option names into ellipses in an 80-column
# terminal (set TYPER_USE_RICH=1 for the boxes). Read by typer when it is imported.
os.environ.setdefault("TYPER_USE_RICH", "0")

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from vical import __version__
from vical.errors import VicalError

if TYPE_CHECKING:
    from vical.spec import EnvSpec

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


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


app = typer.Typer(
    cls=_RootGroup,
    help="vical: evaluate multimodal agents on the V-ICAL benchmark (342 tasks, 37 games).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tasks_app = typer.Typer(help="Browse the benchmark's tasks.", no_args_is_help=True)
baseline_app = typer.Typer(help="Reference runs (the random baseline).", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
app.add_typer(baseline_app, name="baseline")

console = Console()
err = Console(stderr=True)


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print one error (never re-wrapped, so it pastes whole) and exit with ``code``."""
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(msg)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def interrupted(msg: str) -> NoReturn:
    """Leave after an interrupt whose cleanup is done: print ``msg``, exit 130.

    Further SIGINT/SIGTERM are ignored from here on: Python restores the default
    handlers while it exits, and a second Ctrl-C landing then would turn status
    130 into death by signal.
    """
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    err.print(f"\ninterrupted: {msg}", soft_wrap=True, highlight=False, markup=False)
    raise typer.Exit(130)


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


# ---------------------------------------------------------------------------
# tasks
# ---------------------------------------------------------------------------
def _envs() -> dict[str, EnvSpec]:
    """Every environment's spec (a bad task file is a TaskSpecError: one error line)."""
    from vical.spec import load_envs

    return load_envs()


def _select(patterns: str | None):
    """The tasks the globs select (no match is a TaskSpecError: one error line)."""
    from vical.spec import select_tasks

    return select_tasks(patterns)


@tasks_app.command("list")
def tasks_list(
    pattern: str = typer.Option(
        None, "--tasks", "-t", help="Comma-separated id globs, e.g. 'taxi/*,pong'."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List tasks, one per line, the task id first."""
    tasks = _select(pattern)
    rows = [
        {
            "id": t.id,
            "env": t.env.env,
            "kind": t.variant.kind,
            "seed": t.variant.seed,
            "max_steps": t.max_steps,
            "actions": len(t.action_names),
            "types": t.env.tags.types,
            "memory": t.env.tags.memory,
            "dynamics": t.env.tags.dynamics,
        }
        for t in tasks
    ]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    for r in rows:
        sys.stdout.write(
            f"{r['id']}\t{r['kind']}\tseed={r['seed']}\tmax_steps={r['max_steps']}\t"
            f"actions={r['actions']}\t{'/'.join(r['types'])}\t{r['memory']}\t{r['dynamics']}\n"
        )


@tasks_app.command("digest")
def tasks_digest_cmd() -> None:
    """Print the task-data version: sha256 over every task file.

    Run manifests and bundles record it; resuming, bundling and verification
    refuse to mix results made on different task data.
    """
    from vical.spec import TASKS_DIR, tasks_digest

    sys.stdout.write(f"{tasks_digest()}  {TASKS_DIR}\n")


@tasks_app.command("show")
def tasks_show(
    task_id: str = typer.Argument(..., help="Task id, e.g. taxi/state1."),
    png: Path = typer.Option(None, "--png", help="Write the start frame to this PNG file."),
) -> None:
    """Show one task's settings, rules and actions; optionally save its start frame."""
    from vical.envs import make_env
    from vical.spec import get_task

    t = get_task(task_id)
    spec = t.env
    console.print(f"[bold]{t.id}[/] ({spec.name}, paper id {spec.paper_id}, {t.variant.kind})")
    console.print(
        f"seed {t.variant.seed}, initial skip {t.variant.initial_skip}, "
        f"human-init actions {len(t.variant.init_actions)}, max steps {t.max_steps}, "
        f"frame skip {spec.frame_skip} (action held {spec.action_steps})"
    )
    console.print(f"tags: {', '.join(spec.tags.types)}; {spec.tags.memory}; {spec.tags.dynamics}")
    console.print(f"actions: {', '.join(t.action_names)}")
    console.print(f"scoring ({spec.scoring.family}): {spec.scoring.description}")
    console.print(f"pass: {spec.pass_rule.description}")
    console.print(f"[bold]basic rules[/]: {spec.rules.basic}")
    console.print(f"[bold]detailed rules[/]: {spec.rules.detailed}")
    console.print(f"demo clips: {len(t.variant.demos)}")
    _print_sources(t)
    if png:
        from PIL import Image

        env = make_env(t)
        try:
            frame = env.reset()
        finally:
            env.close()
        png.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(frame).save(png)
        console.print(f"start frame ({frame.shape[1]}x{frame.shape[0]}) written to {png}")


def _fmt_number(x) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {_fmt_number(v)}" for k, v in x.items()) + "}"
    return str(x)


def _paper_sets(values) -> str:
    return ", ".join(str(v) for v in sorted(values))


def number_sources(t) -> list[tuple[str, str]]:
    """(number, where it comes from) for every number `vical tasks show` prints."""
    from vical.paper import ENVS
    from vical.spec import _numeric_keys

    spec, v = t.env, t.variant
    pe = ENVS.get(spec.env)
    rows: list[tuple[str, str]] = []

    def table(name: str, value, ok: bool, label: str, listed) -> None:
        if pe is None:
            rows.append((f"{name} {value}", "not checked: no paper entry for this environment"))
        elif ok:
            rows.append((f"{name} {value}", f"paper: {label} ({pe.paper_id})"))
        else:
            rows.append(
                (
                    f"{name} {value}",
                    f"ours: not among {label}'s values for {pe.paper_id} "
                    f"({_paper_sets(listed) or 'none'})",
                )
            )

    table("seed", v.seed, pe is not None and v.seed in pe.seeds, "Table 8", pe.seeds if pe else ())
    skips = pe.initial_skips if pe else frozenset()
    if pe is not None and v.initial_skip == 0:
        note = (
            f"none stored; Table 8 lists {_paper_sets(skips)} for other {pe.paper_id} tasks"
            if skips
            else f"paper: Table 8 (a dash: no initial skip for {pe.paper_id})"
        )
        rows.append(("initial skip 0", note))
    else:
        table("initial skip", v.initial_skip, v.initial_skip in skips, "Table 8", skips)
    # Table 7: the budget is one of a set of values, frame skip and action steps one value
    for name, value, listed in (
        ("max steps", t.max_steps, pe.max_steps if pe else ()),
        ("frame skip", spec.frame_skip, [pe.frame_skip] if pe else ()),
        ("action steps", spec.action_steps, [pe.action_steps] if pe else ()),
    ):
        table(name, value, value in listed, "Table 7", listed)
    own = v.targets
    for name, target in t.targets.items():
        where = "task target" if name in own else "scoring target"
        rows.append((f"{where} {name} = {_fmt_number(target.value)}", target.provenance))
    for rule_name, rule in (("scoring", spec.scoring), ("pass_rule", spec.pass_rule)):
        for key in _numeric_keys(rule.params):
            rows.append(
                (
                    f"{rule_name}.{key} = {_fmt_number(rule.params[key])}",
                    rule.provenance.get(key, "MISSING"),
                )
            )
    for key in _numeric_keys(v.params):
        rows.append(
            (f"task param {key} = {_fmt_number(v.params[key])}", v.provenance.get(key, "MISSING"))
        )
    return rows


def _print_sources(t) -> None:
    """Where every printed number, the tags and the start sequence come from (80 columns)."""
    import textwrap

    def say(head: str, text: str) -> None:
        lines = textwrap.wrap(
            f"{head}: {' '.join(text.split())}",
            width=80,
            initial_indent="  ",
            subsequent_indent="      ",
            break_on_hyphens=False,
        )
        for line in lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)

    console.print("[bold]where the numbers come from[/]:")
    for head, text in number_sources(t):
        say(head, text)
    say("tags", t.env.tags.provenance or "no provenance recorded yet")
    if t.variant.init_actions:
        say(f"init sequence ({len(t.variant.init_actions)} actions)", t.variant.init_source or "")
    else:
        say("init sequence", "none (the task starts at reset after the initial skip)")


@tasks_app.command("sheet")
def tasks_sheet(
    env: str = typer.Option(..., "--env", help="Environment key, e.g. seaquest."),
    out: Path = typer.Option(..., "--out", help="PNG file to write."),
) -> None:
    """Draw a contact sheet of every start frame of an environment's tasks, for review."""
    from vical.authoring.sheet import start_sheet

    tasks = _select(env)
    start_sheet(tasks, out)
    console.print(f"{len(tasks)} start frames written to {out}")


@tasks_app.command("make-init")
def tasks_make_init(
    env: str = typer.Option(..., "--env", help="Environment key with an init generator."),
    check: bool = typer.Option(
        False, "--check", help="Exit 1 if the stored sequences differ from a fresh run."
    ),
) -> None:
    """Re-run an environment's human-init generator and print (or check) its sequences."""
    from vical.authoring import init_generator

    envs = _envs()
    if env not in envs:
        fail(f"unknown environment {env!r}; known: {', '.join(envs)}")
    gen = init_generator(envs[env])
    if gen is None:
        fail(f"{env} has no generate_init_actions(); its sequences are scripted in the YAML")
    fresh = gen(envs[env])
    # sequences the paper spells out (init_source 'paper: ...') are data, not generator output
    stored = {
        t.variant: list(t.init_actions)
        for t in envs[env].tasks
        if t.init_actions and not (t.init_source or "").startswith("paper:")
    }
    if check:
        if fresh != stored:
            diff = sorted(k for k in set(fresh) | set(stored) if fresh.get(k) != stored.get(k))
            fail(f"{env}: stored sequences differ from the generator for {diff}", code=1)
        console.print(f"{env}: {len(stored)} stored sequences match the generator")
        return
    sys.stdout.write(json.dumps(fresh, indent=1) + "\n")


# ---------------------------------------------------------------------------
# eval / baseline / report
# ---------------------------------------------------------------------------
def _default_out(agent: str) -> Path:
    return Path("runs") / f"{agent}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def _run(
    tasks,
    out: Path,
    agent: str,
    agent_kwargs: dict,
    runs: int,
    seed: int,
    workers: int | None,
    frames: str,
    demos: bool,
    report: bool,
    prices: Path | None = None,
    preflight: bool = True,
    retry_errors: bool = True,
    max_consecutive_errors: int = 5,
    command: str | None = None,
) -> None:
    from vical.agent.costs import load_prices, price_for
    from vical.run import run_eval
    from vical.run.pool import Interrupted

    console.print(
        f"[bold]vical eval[/]: {len(tasks)} tasks x {runs} run(s), agent {agent}, output {out}"
    )
    from vical.agent import get_agent

    try:  # build the agent once up front: a bad option or a missing key fails here, not per episode
        probe = get_agent(agent, **agent_kwargs)
    except (ValueError, RuntimeError) as e:
        fail(f"{agent}: {e}")
    settings = probe.settings()
    try:
        if preflight:
            probe.preflight()
    except RuntimeError as e:
        fail(f"preflight failed: {e}")
    finally:
        probe.close()
    try:
        price = price_for(settings, load_prices(prices))
    except ValueError as e:
        fail(str(e))
    if agent != "random" and price is None:
        err.print(
            f"note: no price for model {settings.get('model')!r} in the price table; "
            "costs are not computed (see --prices)"
        )
    resume = command or f"the same command with --out {out}"
    try:
        summary = run_eval(
            tasks,
            out,
            agent=agent,
            agent_kwargs=agent_kwargs,
            agent_settings=settings,
            runs=runs,
            run_seed=seed,
            workers=workers,
            frames=frames,
            demos=demos,
            price=price,
            retry_errors=retry_errors,
            max_consecutive_errors=max_consecutive_errors,
        )
    except (Interrupted, KeyboardInterrupt):
        interrupted(f"finished episodes are kept in {out}; to resume, run {resume}")
    except ValueError as e:
        fail(str(e))
    _closing_summary(summary, out, resume)
    if report and (summary.finished - len(summary.infra) > 0 or summary.skipped):
        _report([out], out)
    problems = []
    if not (summary.failed or summary.infra or summary.stopped_by_breaker):
        nxt = f"vical submit {out} --key <private key from vical keygen>"
        if not report:
            nxt = f"vical report {out}, then {nxt}"
        console.print(f"next: {nxt}", soft_wrap=True, highlight=False, markup=False)
    if summary.failed:
        problems.append(f"{len(summary.failed)} episode(s) crashed")
    if summary.infra:
        problems.append(f"{len(summary.infra)} episode(s) ended in an infrastructure failure")
    if summary.stopped_by_breaker:
        problems.append(
            f"the run stopped after {max_consecutive_errors} infrastructure failures in a row "
            f"({summary.not_run} episode(s) not started)"
        )
    if problems:
        fail("; ".join(problems) + f". Fix the cause, then run: {resume}", code=1)


def _closing_summary(summary, out: Path, resume: str) -> None:
    """Counts by outcome and failure mode, then what to run next."""
    for line in summary.repaired:
        err.print(f"[yellow]re-ran damaged episode[/] {line}")
    if summary.retried:
        err.print(
            f"retried {summary.retried} episode(s) that had ended in an infrastructure "
            f"failure (earlier attempts kept in {out / 'failed-attempts'})"
        )
    counts = ", ".join(f"{n} {k}" for k, n in sorted(summary.outcomes.items()))
    console.print(
        f"{summary.finished} episodes run ({counts or 'none'}), {summary.skipped} already finished",
        soft_wrap=True,
    )
    for name, why in summary.failed:
        err.print(f"[red]episode {name} crashed:[/] {why}")
    shown = summary.infra[:5]
    for name, why in shown:
        err.print(f"[red]infrastructure failure[/] {name}: {why}", markup=True, highlight=False)
    if len(summary.infra) > len(shown):
        err.print(f"... and {len(summary.infra) - len(shown)} more infrastructure failure(s)")


def _resume_command(out: Path) -> str:
    """The command line that resumes this run (credentials redacted, --out added)."""
    import shlex

    from vical.agent.redact import redact_argv

    args = redact_argv(list(sys.argv[1:]))
    if not any(a in ("--out", "-o") or a.startswith("--out=") for a in args):
        args += ["--out", str(out)]
    return " ".join(shlex.quote(a) for a in ["vical", *args])


@app.command("eval")
def eval_cmd(
    agent: str = typer.Option(
        "random",
        "--agent",
        "--backend",
        "-a",
        help="Agent backend: random, openai-chat, openai-responses, gemini, openrouter.",
    ),
    tasks: str = typer.Option(
        None, "--tasks", "-t", help="Comma-separated id globs (default: every task)."
    ),
    runs: int = typer.Option(1, "--runs", min=1, help="Episodes per task."),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="Run folder (default runs/<agent>-<time>). Re-use it to resume an interrupted run.",
    ),
    workers: int = typer.Option(
        None,
        "--concurrency",
        "--workers",
        "-j",
        min=1,
        help="Episodes in flight at once, one process each (default: one per core).",
    ),
    rate_limit: float = typer.Option(
        None,
        "--rate-limit",
        min=0.001,
        help="Most requests per minute to the endpoint, shared by all episodes in flight.",
    ),
    prices: Path = typer.Option(
        None,
        "--prices",
        help="Price table (YAML, USD per million tokens) for cost accounting; default: "
        "$VICAL_PRICES or the packaged vical/agent/prices.yaml.",
    ),
    seed: int = typer.Option(0, "--seed", help="Run seed; each episode's seed derives from it."),
    endpoint: str = typer.Option(None, "--endpoint", help="API base URL of the model server."),
    model: str = typer.Option(None, "--model", help="Model name at the endpoint."),
    api_key_env: str = typer.Option(
        None, "--api-key-env", help="Environment variable holding the API key."
    ),
    temperature: float = typer.Option(None, "--temperature", help="Sampling temperature."),
    max_output_tokens: int = typer.Option(
        None, "--max-output-tokens", help="Cap on tokens per reply."
    ),
    reasoning_effort: str = typer.Option(
        None, "--reasoning-effort", help="Reasoning effort where the provider has it."
    ),
    extra_body: str = typer.Option(
        None, "--extra-body", help="JSON object merged into each request body."
    ),
    frames: str = typer.Option(
        "none",
        "--frames",
        help="Frames saved as PNG per episode: none (default; trajectory.png is always "
        "written and every frame can be regenerated by replay), failed (only episodes "
        "that did not pass), all (about 1 MB per episode).",
    ),
    no_frames: bool = typer.Option(
        False, "--no-frames", hidden=True, help="Same as --frames none."
    ),
    demos: bool = typer.Option(
        True, "--demos/--no-demos", help="Send the demonstration videos (ablation: --no-demos)."
    ),
    report: bool = typer.Option(
        True, "--report/--no-report", help="Print and write the Table-1 report at the end."
    ),
    request_timeout: float = typer.Option(
        120.0, "--request-timeout", min=0.1, help="Seconds to wait for one model reply."
    ),
    max_retry_after: float = typer.Option(
        120.0,
        "--max-retry-after",
        min=0.0,
        help="Longest Retry-After (seconds) the run will honour; a longer one ends the "
        "decision as an infrastructure failure instead of waiting.",
    ),
    transport_retries: int = typer.Option(
        3,
        "--transport-retries",
        min=0,
        help="Times one request is resent after a connection error, timeout, 429 or 5xx "
        "(with backoff) before the episode ends as an infrastructure failure.",
    ),
    preflight: bool = typer.Option(
        True,
        "--preflight/--no-preflight",
        help="Check endpoint, model and key with one small request before the first episode.",
    ),
    retry_errors: bool = typer.Option(
        True,
        "--retry-errors/--no-retry-errors",
        help="On resume, re-run episodes that ended in an infrastructure failure.",
    ),
    max_consecutive_errors: int = typer.Option(
        5,
        "--max-consecutive-errors",
        min=0,
        help="Stop the run after this many infrastructure failures in a row (0: never).",
    ),
) -> None:
    """Evaluate an agent on tasks; writes one folder per episode and a run manifest.

    What a run writes, per episode (runs/<id>/episodes/<env>__<variant>__r<k>/):
    eval_result.json, log.jsonl (every request and reply), trajectory.png (one
    strip of the whole episode), media/ (the JPEGs sent to an API model, about
    10-40 kB each) and, with --frames, PNG frames. A random pass over all 342
    tasks writes about 35 MB; an API pass adds the media (roughly 0.5 GB).
    Ctrl-C stops the run within seconds, keeping finished episodes; the same
    command resumes it. Episodes that end because the endpoint failed are
    reported apart, make the command exit 1, and are re-run on resume.
    """
    from vical.agent.base import agent_names

    if agent not in agent_names():
        fail(f"unknown agent {agent!r}; available: {', '.join(agent_names())}")
    if no_frames:
        frames = "none"
    from vical.run.runner import FRAME_MODES

    if frames not in FRAME_MODES:
        fail(f"--frames {frames!r} is not one of: {', '.join(FRAME_MODES)}")
    kwargs: dict = {"seed": seed}
    if agent != "random":
        try:
            body = json.loads(extra_body) if extra_body else None
        except json.JSONDecodeError as e:
            fail(f"--extra-body is not valid JSON ({e}); example: '{{\"top_p\": 0.9}}'")
        if model is None:
            fail(f"--model is required for the {agent} backend")
        kwargs.update(
            endpoint=endpoint,
            model=model,
            api_key_env=api_key_env,
            temperature=temperature,
            max_output_tokens=max_output_tokens,
            reasoning_effort=reasoning_effort,
            extra_body=body,
            rate_limit=rate_limit,
            request_timeout=request_timeout,
            max_retry_after=max_retry_after,
            transport_retries=transport_retries,
        )
    out = out or _default_out(agent)
    _run(
        _select(tasks),
        out,
        agent,
        kwargs,
        runs,
        seed,
        workers,
        frames,
        demos,
        report,
        prices=prices,
        preflight=preflight,
        retry_errors=retry_errors,
        max_consecutive_errors=max_consecutive_errors,
        command=_resume_command(out),
    )


@baseline_app.command("random")
def baseline_random(
    out: Path = typer.Option(
        Path("runs/random-baseline"), "--out", "-o", help="Run folder (re-use it to resume)."
    ),
    tasks: str = typer.Option(None, "--tasks", "-t", help="Id globs (default: every task)."),
    runs: int = typer.Option(3, "--runs", min=1, help="Episodes per task (paper: 3)."),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Parallel episodes."),
    seed: int = typer.Option(0, "--seed", help="Run seed."),
    frames: str = typer.Option("none", "--frames", help="PNG frames to save: none, failed, all."),
) -> None:
    """The random reference: uniform legal actions, 3 runs per task, as a normal run folder."""
    from vical.run.runner import FRAME_MODES

    if frames not in FRAME_MODES:
        fail(f"--frames {frames!r} is not one of: {', '.join(FRAME_MODES)}")
    _run(
        _select(tasks),
        out,
        "random",
        {"seed": seed},
        runs,
        seed,
        workers,
        frames,
        False,
        True,
        command=_resume_command(out),
    )


def _report(
    run_dirs: list[Path],
    out: Path | None,
    random: Path | None = None,
    strip_task: str | None = None,
    html: bool = True,
) -> None:
    from vical.report.document import build_document, write_document

    try:
        doc = build_document(run_dirs, random_dir=random, strip_task=strip_task)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    target = out or (run_dirs[0] if len(run_dirs) == 1 else Path("report"))
    paths = write_document(doc, target, html=html)
    from vical.paper import TABLE1_COLUMNS

    reports = [*doc["runs"], *([doc["random"]] if doc["random"] is not None else [])]
    table = Table(title="V-ICAL results")
    table.add_column("column")
    for r in reports:
        label = f"{r.name} (random ref.)" if r is doc["random"] else r.name
        table.add_column(f"{label} S", justify="right")
        table.add_column("P%", justify="right")
    for c in TABLE1_COLUMNS:
        cells = []
        for r in reports:
            cell = r.columns[c]
            cells += (
                ["–", "–"] if cell.score is None else [f"{cell.score:.1f}", f"{cell.pass_rate:.0f}"]
            )
        table.add_row(c, *cells)
    console.print(table)
    console.print("S: score 0-100, P%: pass rate, by Table 1 column")
    console.print("report written to " + ", ".join(str(p) for p in paths.values()))


@app.command("report")
def report_cmd(
    runs: list[Path] = typer.Argument(..., help="One or more run folders, side by side."),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="Folder for report.json/report.md/report.html and figures/ (default: the run "
        "folder for one run, ./report for several).",
    ),
    random: Path = typer.Option(
        None,
        "--random",
        help="Run folder of the random reference (vical baseline random): adds its Table-1 "
        "row and the difficulty strata.",
    ),
    strip_task: str = typer.Option(
        None,
        "--strip-task",
        help="Task id for the same-start trajectory strips (default: one every run played).",
    ),
    html: bool = typer.Option(True, "--html/--no-html", help="Also write report.html."),
) -> None:
    """Table 1 for one or more runs side by side, the paper's analyses and figures."""
    _report(runs, out, random=random, strip_task=strip_task, html=html)


# ---------------------------------------------------------------------------
# keys, bundles, verification, leaderboard
# ---------------------------------------------------------------------------
leaderboard_app = typer.Typer(
    help="Maintain the leaderboard of verified bundles.", no_args_is_help=True
)
app.add_typer(leaderboard_app, name="leaderboard")


@app.command("keygen")
def keygen_cmd(
    out: Path = typer.Option(
        ..., "--out", help="Private key file; the public key goes to OUT.pub."
    ),
    force: bool = typer.Option(False, "--force", help="Replace existing key files."),
) -> None:
    """Create an Ed25519 signing key pair for results bundles (private key mode 0600)."""
    from vical.submit.keys import KeyError_, keygen

    try:
        priv, pub = keygen(out, overwrite=force)
    except KeyError_ as e:
        fail(str(e))
    console.print(
        f"private key: {priv} (keep it secret)\npublic key:  {pub} (send it to the "
        "maintainers with your first bundle)"
    )


@app.command("submit")
def submit_cmd(
    run: Path = typer.Argument(
        None,
        help="Run folder written by `vical eval`. Omit it and give --endpoint to run the "
        "pinned image against your endpoint first.",
    ),
    key: Path = typer.Option(..., "--key", help="Private key from `vical keygen`."),
    out: Path = typer.Option(Path("bundle.tar.gz"), "--out", "-o", help="Bundle file to write."),
    team: str = typer.Option(None, "--team", help="Team name (default: $USER)."),
    model: str = typer.Option(None, "--model", help="Model name (at the endpoint)."),
    partial: bool = typer.Option(
        False, "--partial", help="Bundle a run that does not cover every task."
    ),
    endpoint: str = typer.Option(
        None, "--endpoint", help="Model API base URL: run the evaluation in the pinned image."
    ),
    backend: str = typer.Option("openai-chat", "--backend", help="Backend used in the image."),
    api_key_env: str = typer.Option(
        None, "--api-key-env", help="Variable holding the API key (passed to the image)."
    ),
    dataset: Path = typer.Option(
        None, "--dataset", help="Local dataset folder (default: the pinned Hub revision)."
    ),
    image: str = typer.Option(None, "--image", help="Image to run (default: localhost/vical:VER)."),
    tasks: str = typer.Option(None, "--tasks", "-t", help="Task globs (implies --partial)."),
    workdir: Path = typer.Option(
        Path("runs"), "--workdir", help="Where the image writes its run folder."
    ),
) -> None:
    """Pack a run into a signed bundle, or with --endpoint, run the pinned image first."""
    from vical.submit.bundle import BundleError, make_bundle
    from vical.submit.keys import KeyError_, load_private

    if run is None:
        if not endpoint or not model:
            fail("give a RUN folder, or --endpoint and --model to evaluate in the pinned image")

        from vical.run.pool import Interrupted
        from vical.submit import container

        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        workout = workdir / f"submit-{stamp}"
        try:
            load_private(key)  # fail before hours of evaluation, not after
            ds = container.fetch_dataset(dataset)
            run = container.run_in_image(
                endpoint=endpoint,
                model=model,
                backend=backend,
                out=workout,
                dataset=ds,
                image=image or container.DEFAULT_IMAGE,
                tasks=tasks,
                api_key_env=api_key_env,
                on_line=lambda line: console.print(line, markup=False, highlight=False),
            )
        except (Interrupted, KeyboardInterrupt):
            kept = f"; episodes it finished are in {workout / 'run'}" if workout.exists() else ""
            interrupted(
                f"the evaluation container was stopped and removed{kept}; no bundle was written"
            )
        except (container.ContainerError, KeyError_) as e:
            fail(str(e))
        partial = partial or bool(tasks)
    try:
        m = make_bundle(
            run,
            key,
            out,
            team=team or os.environ.get("USER", "anonymous"),
            partial=partial,
            model=model,
        )
    except (BundleError, KeyError_, FileNotFoundError) as e:
        fail(str(e))
    console.print(
        f"bundle {out}: {len(m['files'])} files, "
        f"{'partial' if m['partial'] else 'complete'}, overall score "
        f"{m['summary']['columns']['All']['score']:.1f}"
    )


@app.command("serve-baseline")
def serve_baseline(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(8000, "--port", help="TCP port (0: any free port)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random policy."),
    delay: float = typer.Option(0.0, "--delay", help="Seconds to wait before each answer."),
    fault_rate: float = typer.Option(
        0.0,
        "--fault-rate",
        min=0.0,
        max=1.0,
        help="Probability that a request carrying an image (an episode turn) misbehaves. "
        "Text-only requests, such as the preflight check, are never hit.",
    ),
    fault_kinds: str = typer.Option(
        "malformed",
        "--fault-kinds",
        help="Comma-separated fault kinds drawn when --fault-rate hits (see below).",
    ),
    retry_after: float = typer.Option(
        1.0, "--retry-after", min=0.0, help="Retry-After seconds sent with an injected 429."
    ),
) -> None:
    """Serve the baseline model over OpenAI-compatible and Gemini HTTP APIs (models:
    random, first, expert) for trying vical end to end without a real model.

    Faults for testing, by model name fault-KIND[-once|-N|-always] (every request) or
    server-wide with --fault-rate/--fault-kinds (image-carrying turns only). The
    model's fault: malformed, illegal, conflict, empty, huge (5 MB reply). HTTP
    errors: 400, 429, 500, context-length, 401-echo (401 repeating the key it got).
    Broken 200 replies: not-json, html, binary, null, schemaless, empty-body.
    Time: slow (slow-MS by name), hang (never answers).
    """
    from vical.serve import main as server_main
    from vical.serve import parse_fault_kinds

    try:
        kinds = parse_fault_kinds(fault_kinds)
    except ValueError as e:
        fail(f"--fault-kinds: {e}")
    server_main(
        [
            "--host",
            host,
            "--port",
            str(port),
            "--seed",
            str(seed),
            "--delay",
            str(delay),
            "--fault-rate",
            str(fault_rate),
            "--fault-kinds",
            ",".join(kinds),
            "--retry-after",
            str(retry_after),
        ],
        prog="vical serve-baseline",
    )


def _print_verdict(v) -> None:
    for e in v.episodes:
        if not e.ok:
            err.print(f"[red]MISMATCH[/] {e.episode}: {'; '.join(e.problems)}")
    n_bad = len(v.mismatches)
    status = "[green]PASS[/]" if v.ok else "[red]FAIL[/]"
    console.print(
        f"{status}: {len(v.episodes) - n_bad}/{len(v.episodes)} episodes replay "
        f"exactly; signer {v.signer}; {'partial' if v.partial else 'complete'} "
        "coverage"
    )


@app.command("verify")
def verify_cmd(
    bundle: Path = typer.Argument(..., help="Bundle (.tar.gz) to verify."),
    pubkey: list[Path] = typer.Option(
        None, "--pubkey", help="Trusted public key(s); default: submissions/keys/*.pub"
    ),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Parallel replays."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print every episode verdict."),
) -> None:
    """Check a bundle: signature first, then a bounded unpack of only what the signed
    manifest lists, schema, task data, coverage, consistency, and a replay of every
    episode in the simulator.

    Exit status: 0 the bundle verifies; 1 it is rejected (the line says which check
    and which member); 2 verification could not run (no such bundle file, no trusted
    public key, a bad option); 130 interrupted.
    """

    from vical.run.pool import Interrupted
    from vical.submit.verify import DEFAULT_KEYRING, VerifyError, verify_bundle

    if not bundle.exists():
        fail(f"{bundle}: no such bundle file", code=2)
    for p in pubkey or []:
        if not p.is_file():
            fail(f"--pubkey {p}: no such public key file", code=2)
    if not pubkey and not sorted(DEFAULT_KEYRING.glob("*.pub")):
        fail(
            f"no trusted public key: pass --pubkey FILE or put the submitter's key in "
            f"{DEFAULT_KEYRING}/",
            code=2,
        )
    try:
        v = verify_bundle(bundle, pubkeys=pubkey or None, workers=workers)
    except (Interrupted, KeyboardInterrupt):
        interrupted(
            f"verification only reads {bundle}, so nothing was changed; "
            "run the same command again to verify it"
        )
    except VerifyError as e:
        fail(f"{bundle}: {e}", code=1)
    if verbose:
        for ep in v.episodes:
            console.print(f"{'ok' if ep.ok else 'MISMATCH'}\t{ep.episode}")
    _print_verdict(v)
    if not v.ok:
        raise typer.Exit(1)


@leaderboard_app.command("add")
def leaderboard_add(
    bundle: Path = typer.Argument(..., help="Bundle to verify and add."),
    pubkey: list[Path] = typer.Option(None, "--pubkey", help="Trusted public key(s)."),
    submissions: Path = typer.Option(
        Path("submissions"), "--submissions", help="Folder of verified summaries."
    ),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Parallel replays."),
) -> None:
    """Verify a bundle and, only if it passes, store its summary under submissions/."""
    from vical.submit.leaderboard import LeaderboardError, add
    from vical.submit.verify import VerifyError

    try:
        path = add(bundle, pubkeys=pubkey or None, submissions=submissions, workers=workers)
    except (VerifyError, LeaderboardError) as e:
        fail(str(e), code=1)
    console.print(f"verified and added: {path}")


@leaderboard_app.command("build")
def leaderboard_build(
    out: Path = typer.Option(Path("site"), "--out", "-o", help="Folder for the static site."),
    submissions: Path = typer.Option(
        Path("submissions"), "--submissions", help="Folder of verified summaries."
    ),
) -> None:
    """Generate leaderboard.json, leaderboard.md and a self-contained index.html."""
    from vical.submit.leaderboard import build

    index = build(out, submissions)
    console.print(f"leaderboard written to {index}")


# ---------------------------------------------------------------------------
# demonstrations and the dataset
# ---------------------------------------------------------------------------
demos_app = typer.Typer(
    help="Demonstration clips: make them with the expert tools.", no_args_is_help=True
)
dataset_app = typer.Typer(help="The Hugging Face dataset folder.", no_args_is_help=True)
app.add_typer(demos_app, name="demos")
app.add_typer(dataset_app, name="dataset")


@demos_app.command("make")
def demos_make(
    env: str = typer.Option(..., "--env", help="Environment key, e.g. taxi."),
    write: bool = typer.Option(
        True,
        "--write/--dry-run",
        help="Write the clips into the task YAML (default) or only print.",
    ),
) -> None:
    """Re-run the expert tools for an environment and store its demo clips as data."""
    from vical.authoring.make import make_demos
    from vical.authoring.yamlio import write_demos

    if env not in _envs():
        fail(f"unknown environment {env!r}; known: {', '.join(_envs())}")
    demos = make_demos(env)
    n = sum(len(v) for v in demos.values())
    console.print(f"{env}: {n} clip assignments over {len(demos)} tasks")
    if write:
        path = write_demos(env, demos)
        console.print(f"written to {path}")


@demos_app.command("pack")
def demos_pack(
    env: list[str] = typer.Option(
        None, "--env", help="Environment key (repeatable; default: every environment)."
    ),
    check: bool = typer.Option(
        False, "--check", help="Only report which task files packing would change (exit 1 if any)."
    ),
) -> None:
    """Pack the stored demo clips into the paper's package structure (idempotent).

    Applies vical.demos.packages.QUOTAS (clips per task, the shared pool of each
    environment) to the demos lists of vical/tasks/<env>.yaml.
    """
    from vical.authoring.yamlio import write_demos
    from vical.demos.packages import PackError, pack_stored

    known = list(_envs())
    envs = env or known
    unknown = [e for e in envs if e not in known]
    if unknown:
        fail(f"unknown environment(s) {', '.join(unknown)}; known: {', '.join(known)}")
    changed = []
    for e in envs:
        try:
            packed, differs = pack_stored(e)
        except PackError as ex:
            fail(str(ex), code=1)
        if not differs:
            console.print(f"{e}: unchanged")
            continue
        changed.append(e)
        if check:
            console.print(f"{e}: would change")
        else:
            write_demos(e, packed)
            n = sum(len(v) for v in packed.values())
            d = len({c.id for v in packed.values() for c in v})
            console.print(f"{e}: packed ({n} clip assignments, {d} distinct clips)")
    if check and changed:
        raise typer.Exit(1)


@demos_app.command("render")
def demos_render(
    task_id: str = typer.Argument(..., help="Task id."),
    out: Path = typer.Option(Path("demos"), "--out", "-o", help="Folder for MP4 and JPEG files."),
) -> None:
    """Render a task's demonstration package (MP4 per clip plus its JPEG frames)."""
    from vical.demos import load_demo_package

    videos = load_demo_package(task_id)
    out.mkdir(parents=True, exist_ok=True)
    for v in videos:
        (out / f"{v.clip_id}.mp4").write_bytes(v.mp4)
        for i, jpg in enumerate(v.frames_jpeg):
            (out / f"{v.clip_id}_{i:03d}.jpg").write_bytes(jpg)
        console.print(f"{v.clip_id}: {v.n_frames} frames, {v.label}")


@dataset_app.command("build")
def dataset_build(
    out: Path = typer.Option(Path("build/dataset"), "--out", "-o", help="Dataset folder."),
    tasks: str = typer.Option(None, "--tasks", "-t", help="Task globs (default: every task)."),
) -> None:
    """Build the dataset folder (parquet rows, MP4 demos, card) loadable by datasets."""

    from vical.dataset import build_dataset, verify_dataset
    from vical.run.pool import Interrupted

    try:
        root = build_dataset(out, tasks)
    except (Interrupted, KeyboardInterrupt):
        interrupted(
            f"the partial build was removed and {out} was left as it was; "
            "run the same command again to build it"
        )
    problems = verify_dataset(root)
    if problems:
        fail("; ".join(problems), code=1)
    console.print(f"dataset written to {root}; load it with datasets.load_dataset('{root}')")


@dataset_app.command("verify")
def dataset_verify(root: Path = typer.Argument(..., help="Dataset folder.")) -> None:
    """Check every file of a dataset folder against its manifest."""
    from vical.dataset import verify_dataset

    problems = verify_dataset(root)
    for p in problems:
        err.print(f"[red]{p}[/]")
    if problems:
        raise typer.Exit(1)
    console.print(f"{root}: intact")


@dataset_app.command("stats")
def dataset_stats(
    tasks: str = typer.Option(None, "--tasks", "-t", help="Task globs (default: every task)."),
) -> None:
    """Demo statistics (clips per task, frames per task, reuse, resolutions) vs the paper."""
    from vical.demos.stats import print_stats

    print_stats(_select(tasks))


@dataset_app.command("push")
def dataset_push(
    root: Path = typer.Argument(..., help="Dataset folder."),
    repo: str = typer.Option(..., "--repo", help="Hub dataset repository, e.g. org/name."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be uploaded."),
) -> None:
    """Upload a verified dataset folder to the Hugging Face Hub."""
    from vical.dataset import push_dataset

    try:
        files = push_dataset(root, repo, dry_run=dry_run)
    except ValueError as e:
        fail(str(e), code=1)
    console.print(f"{len(files)} files {'would be ' if dry_run else ''}uploaded to {repo}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
