"""``vical eval`` and ``vical baseline random|expert``: one evaluation run, then its report.

Both commands gather their options in an :class:`EvalOptions`, whose construction
is the command line's one check of the agent name, ``--frames`` and the API
options; :func:`run_and_report` then runs the episodes, prints the closing
summary and writes the report.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vical.cli._api import API_OPTIONS, ApiOptions, api_options
from vical.cli._common import (
    OptionError,
    agent_option,
    console,
    err,
    fail,
    interrupted,
    say,
    select,
)
from vical.cli.report import ReportOptions, write_report

if TYPE_CHECKING:
    from vical.run.runner import RunSummary
    from vical.run.shard import Shard

baseline_app = typer.Typer(
    help="Reference runs (the random and expert baselines).", no_args_is_help=True
)
# the reference agents: no model, no requests, so no API options and no self-check
REFERENCE_AGENTS = ("random", "plan")


@dataclass(frozen=True)
class EvalOptions:
    """One evaluation run as a command asks for it.

    Construction checks, in this order, the agent name, ``frames`` (one of
    ``vical.run.runner.FRAME_MODES``) and, for an API backend, ``api`` (it must
    name a model; ``extra_body`` must be JSON), raising :class:`OptionError`;
    ``agent_kwargs`` is then what the agent is built with (the ``plan`` agent: its
    ``plans`` file, by default the packaged expert plans). Task globs are
    resolved later, by :func:`run_and_report`.
    """

    tasks: str | None  # comma-separated id globs; None: every task
    out: Path
    runs: int
    seed: int
    workers: int | None
    frames: str
    agent: str = "random"
    api: ApiOptions | None = None  # every agent but the references (REFERENCE_AGENTS) needs one
    demos: bool = True
    report: bool = True
    prices: Path | None = None
    preflight: bool = True
    retry_errors: bool = True
    max_consecutive_errors: int = 5
    shard: Shard | None = None  # play only this slice of the episodes (vical.run.shard)
    executor: str = "local"  # how episodes fan out: local processes or a Ray cluster
    ray_address: str | None = None  # --executor ray: the cluster (default $RAY_ADDRESS)
    rules: str = "basic"  # the rules text of the prompt: basic or detailed (ablation)
    doctor: bool = True  # an API backend: the quick self-check before the first request
    world_model: Any = None  # vical wm couple: the vical.wm.couple.Coupling of a coupled run
    plans: Path | None = None  # the plan agent's plan file (default: the packaged expert plans)
    agent_kwargs: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from vical.agent.base import agent_names
        from vical.run.runner import FRAME_MODES

        if self.agent not in agent_names():
            raise OptionError(
                f"unknown agent {self.agent!r}; available: {', '.join(agent_names())}"
            )
        if self.frames not in FRAME_MODES:
            raise OptionError(f"--frames {self.frames!r} is not one of: {', '.join(FRAME_MODES)}")
        if self.rules not in ("basic", "detailed"):
            raise OptionError(f"--rules {self.rules!r} is not one of: basic, detailed")
        from vical.cli.scale import check_executor

        check_executor(self.executor, self.ray_address)
        kwargs: dict[str, Any] = {"seed": self.seed}
        if self.agent == "plan":
            from vical.agent.plans import DEFAULT_PLANS

            kwargs["plans"] = str(Path(self.plans or DEFAULT_PLANS).resolve())
        elif self.agent not in REFERENCE_AGENTS:
            if self.api is None:
                raise OptionError(f"--model is required for the {self.agent} backend")
            kwargs.update(self.api.agent_kwargs(self.agent))
        object.__setattr__(self, "agent_kwargs", kwargs)


def default_out(agent: str) -> Path:
    return Path("runs") / f"{agent}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def resume_command(out: Path) -> str:
    """The command line that resumes this run (credentials redacted, --out added)."""
    from vical.agent.redact import redact_argv

    args = redact_argv(list(sys.argv[1:]))
    if not any(a in ("--out", "-o") or a.startswith("--out=") for a in args):
        args += ["--out", str(out)]
    return " ".join(shlex.quote(a) for a in ["vical", *args])


def _agent_settings(opts: EvalOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """Build the agent once up front, so a bad option, a missing key or (with preflight)
    an unreachable model fails here and not in every episode; its settings, and the
    self-check's manifest entry (:func:`_self_check`, run before the first request)."""
    from vical.agent import get_agent

    try:
        probe = get_agent(opts.agent, **opts.agent_kwargs)
    except (ValueError, RuntimeError) as e:
        fail(f"{opts.agent}: {e}")
    settings = probe.settings()
    try:
        doctor = _self_check(opts)  # before the first request, the preflight's
        try:
            if opts.preflight:
                probe.preflight()
        except RuntimeError as e:
            fail(f"preflight failed: {e}")
    finally:
        probe.close()
    return settings, doctor


def _self_check(opts: EvalOptions) -> dict[str, Any]:
    """``vical doctor --quick`` for an API backend (its manifest entry); a divergence
    stops the run before its first request, unless ``--skip-doctor``."""
    from vical.run.doctor import run_doctor, skipped_entry
    from vical.run.pool import Interrupted

    if opts.agent in REFERENCE_AGENTS:
        return skipped_entry(f"not run for the {opts.agent} agent (it sends no requests)")
    if not opts.doctor:
        return skipped_entry("--skip-doctor")
    try:
        report = run_doctor(quick=True, cached=True)
    except (Interrupted, KeyboardInterrupt):
        interrupted("stopped during the self-check, before any episode; nothing was written")
    if report.status == "diverged":
        fail(
            f"the reproducibility self-check (vical doctor --quick) failed: "
            f"{report.summary()}. This machine does not reproduce the recorded simulator "
            "results, so episodes played here would fail verification. Run `vical doctor` "
            "for the details (README: When a run goes wrong); to evaluate anyway, pass "
            "--skip-doctor (the run manifest records it)"
        )
    if not report.ok:  # stale or missing record: nothing to hold the machine to
        err.print(f"note: self-check not run: {report.summary()}", markup=False, highlight=False)
    else:
        console.print(f"self-check: {report.summary()}", markup=False, highlight=False)
    return report.manifest_entry()


def _price(opts: EvalOptions, settings: dict[str, Any]) -> dict[str, float] | None:
    """The model's price from the table (None, with a note, when the table lacks it)."""
    from vical.agent.costs import load_prices, price_for

    try:
        price = price_for(settings, load_prices(opts.prices))
    except ValueError as e:
        fail(str(e))
    if opts.agent not in REFERENCE_AGENTS and price is None:
        err.print(
            f"note: no price for model {settings.get('model')!r} in the price table; "
            "costs are not computed (see --prices)"
        )
    return price


def run_and_report(opts: EvalOptions) -> None:
    """Run the episodes not yet in ``opts.out``, summarise, report, and say what next.

    Exits 1 when an episode crashed, ended in an infrastructure failure, or the
    breaker stopped the run; 130 on an interrupt (finished episodes are kept).
    """
    from vical.run import RunOptions, run_eval
    from vical.run.pool import Interrupted

    tasks = select(opts.tasks)
    out = opts.out
    resume = resume_command(out)
    console.print(
        f"[bold]vical eval[/]: {len(tasks)} tasks x {opts.runs} run(s), agent {opts.agent}, "
        + (f"shard {opts.shard}, " if opts.shard else "")
        + f"output {out}"
    )
    settings, doctor = _agent_settings(opts)
    price = _price(opts, settings)
    try:
        summary = run_eval(
            tasks,
            out,
            agent=opts.agent,
            agent_kwargs=opts.agent_kwargs,
            agent_settings=settings,
            options=RunOptions(
                runs=opts.runs,
                run_seed=opts.seed,
                workers=opts.workers,
                frames=opts.frames,
                demos=opts.demos,
                price=price,
                retry_errors=opts.retry_errors,
                max_consecutive_errors=opts.max_consecutive_errors,
                shard=opts.shard,
                rules=opts.rules,
                executor=opts.executor,
                ray_address=opts.ray_address,
                doctor=doctor,
                world_model=opts.world_model,
            ),
        )
    except (Interrupted, KeyboardInterrupt):
        interrupted(f"finished episodes are kept in {out}; to resume, run {resume}")
    except ValueError as e:
        fail(str(e))
    except Exception as e:
        from vical.run.ray_executor import RayClusterLost

        if not isinstance(e, RayClusterLost):
            raise
        fail(
            f"{e}; finished episodes are kept in {out}; once the cluster is back (or with "
            f"another --ray-address), resume with {resume}",
            e.exit_code,
        )
    _closing_summary(summary, out)
    if opts.report and (summary.finished - len(summary.infra) > 0 or summary.skipped):
        write_report(ReportOptions(runs=(out,), out=out))
    if not (summary.failed or summary.infra or summary.stopped_by_breaker):
        nxt = f"vical submit {out} --key <private key from vical keygen>"
        if opts.agent in REFERENCE_AGENTS:  # a reference is compared with, not submitted
            flag = "--random" if opts.agent == "random" else "--expert"
            nxt = f"compare a model's run with this reference: vical report RUN {flag} {out}"
        elif not opts.report:
            nxt = f"vical report {out}, then {nxt}"
        if opts.shard:
            nxt = f"once all {opts.shard.count} shards are done, vical merge SHARD... --out RUN"
        say(f"next: {nxt}")
    problems = []
    if summary.failed:
        problems.append(f"{len(summary.failed)} episode(s) crashed")
    if summary.infra:
        problems.append(f"{len(summary.infra)} episode(s) ended in an infrastructure failure")
    if summary.stopped_by_breaker:
        problems.append(
            f"the run stopped after {opts.max_consecutive_errors} infrastructure failures in "
            f"a row ({summary.not_run} episode(s) not started)"
        )
    if problems:
        fail("; ".join(problems) + f". Fix the cause, then run: {resume}", code=1)


def _closing_summary(summary: RunSummary, out: Path) -> None:
    """Counts by outcome and failure mode, then the episodes that went wrong."""
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


@api_options()
def eval_cmd(
    agent: str = agent_option(
        "random", help="Agent backend: random, openai-chat, openai-responses, gemini, openrouter."
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
    api: ApiOptions = API_OPTIONS,
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
    rules: str = typer.Option(
        "basic",
        "--rules",
        metavar="basic|detailed",
        help="Rules text of the prompt: basic (the benchmark's setting) or detailed (adds "
        "each task's detailed rules; the ablation of paper Table 5, with --demos/--no-demos).",
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
    skip_doctor: bool = typer.Option(
        False,
        "--skip-doctor",
        help="Do not run the quick reproducibility self-check (vical doctor --quick) an API "
        "backend's run starts with; the run manifest records that it was skipped.",
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
    shard: str = typer.Option(
        None,
        "--shard",
        metavar="I/N",
        help="Play only slice I (from 0) of N of the episodes, e.g. one machine of a "
        "cluster; `vical merge` puts the N shard folders together into one run.",
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        metavar="local|ray",
        help="Where episodes run: local (worker processes on this machine) or ray (tasks "
        "on an existing Ray cluster; needs the ray extra and --ray-address or RAY_ADDRESS; "
        "--concurrency then defaults to the cluster's CPUs).",
    ),
    ray_address: str = typer.Option(
        None,
        "--ray-address",
        help="The Ray cluster for --executor ray: HOST:PORT of its head, ray://HOST:10001 "
        "(Ray Client), or `local` (a private cluster on this machine). Default: $RAY_ADDRESS.",
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
    from vical.cli.scale import shard_option

    opts = EvalOptions(
        tasks=tasks,
        out=out or default_out(agent),
        runs=runs,
        seed=seed,
        workers=workers,
        frames="none" if no_frames else frames,
        agent=agent,
        api=api,
        demos=demos,
        report=report,
        prices=prices,
        preflight=preflight,
        retry_errors=retry_errors,
        max_consecutive_errors=max_consecutive_errors,
        shard=shard_option(shard),
        rules=rules,
        executor=executor,
        ray_address=ray_address,
        doctor=not skip_doctor,
    )
    run_and_report(opts)


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
    shard: str = typer.Option(
        None, "--shard", metavar="I/N", help="Play only slice I (from 0) of N (see vical eval)."
    ),
) -> None:
    """The random reference: uniform legal actions, 3 runs per task, as a normal run folder."""
    from vical.cli.scale import shard_option

    run_and_report(
        EvalOptions(
            tasks=tasks,
            out=out,
            runs=runs,
            seed=seed,
            workers=workers,
            frames=frames,
            demos=False,
            shard=shard_option(shard),
        )
    )


@baseline_app.command("expert")
def baseline_expert(
    plans: Path = typer.Option(
        None,
        "--plans",
        help="Plan file (JSON, format vical-plans/1) of the expert's actions per task; "
        "default: vical/data/expert-plans.json, packaged with vical. Make one with: "
        "python benchmarks/policy_audit.py --policies expert --plans FILE.",
    ),
    out: Path = typer.Option(
        Path("runs/expert-baseline"), "--out", "-o", help="Run folder (re-use it to resume)."
    ),
    tasks: str = typer.Option(
        None, "--tasks", "-t", help="Id globs (default: every task); each needs a plan."
    ),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Parallel episodes."),
    frames: str = typer.Option("none", "--frames", help="PNG frames to save: none, failed, all."),
    shard: str = typer.Option(
        None, "--shard", metavar="I/N", help="Play only slice I (from 0) of N (see vical eval)."
    ),
) -> None:
    """The expert reference: each task's planned actions, replayed, as a normal run folder.

    The plans were made offline (search and scripted experts, never imported at run
    time) by players that read emulator or simulator state (save and restore, RAM,
    internal state), so the run is a privileged upper bound, not a human baseline.
    One run per task: the expert is deterministic. After a plan ends, the
    task's NOOP (else its first action) is played. Tasks without a plan are refused
    up front; choose planned tasks with --tasks.
    """
    from vical.agent.plans import DEFAULT_PLANS, MAKE_PLANS, load_plans
    from vical.cli.scale import shard_option

    path = plans or DEFAULT_PLANS
    if plans is None and not DEFAULT_PLANS.is_file():
        fail(
            f"no expert plans are packaged with this vical ({DEFAULT_PLANS} does not exist); "
            f"make a plan file with: {MAKE_PLANS}, then pass --plans FILE"
        )
    opts = EvalOptions(
        tasks=tasks,
        out=out,
        runs=1,
        seed=0,
        workers=workers,
        frames=frames,
        agent="plan",
        demos=False,
        shard=shard_option(shard),
        plans=path,
    )
    missing = load_plans(path).missing(select(tasks))
    if missing:
        shown = ", ".join(missing[:20]) + (
            f" and {len(missing) - 20} more" if len(missing) > 20 else ""
        )
        fail(
            f"{len(missing)} task(s) have no plan in {path}: {shown}; "
            "choose planned tasks with --tasks, or add their plans to the file"
        )
    run_and_report(opts)
