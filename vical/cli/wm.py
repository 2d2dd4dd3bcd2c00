"""``vical wm``: build world-model cases, evaluate a world model on them, report."""

from __future__ import annotations

from pathlib import Path

import typer

from vical.cli._api import API_OPTIONS, ApiOptions, api_options
from vical.cli._common import agent_option, console, fail, interrupted, say, stop_signals

wm_app = typer.Typer(help="The world-model track.", no_args_is_help=True)


WORKERS_HELP = "Worker processes (default: one per core); the output is the same for any number."


def _workers(workers: int | None) -> int:
    import os

    return max(1, workers or os.cpu_count() or 1)


@wm_app.command("build")
def wm_build(
    out: Path = typer.Option(Path("build/wm"), "--out", "-o", help="Case folder."),
    scenarios: str = typer.Option(
        None, "--scenarios", "-s", help="Comma-separated scenario names (default: all eight)."
    ),
    contexts: int = typer.Option(10, "--contexts", min=1, help="Contexts per scenario."),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help=WORKERS_HELP),
    private_seed: str = typer.Option(
        None,
        "--private-seed",
        help="Build held-out cases from context states this seed draws (keep it secret; "
        "the folder is never published). Ranked results come from held-out cases only.",
    ),
) -> None:
    """Build the cases (context, intervention, true frames, specification) into a folder."""
    from vical.run.pool import Interrupted, run_pool
    from vical.wm.cases import BRANCHES, build

    names = [s.strip() for s in scenarios.split(",") if s.strip()] if scenarios else None
    try:
        # SIGTERM (a container's stop, `kill`) stops the build as Ctrl-C does
        with stop_signals():
            cases = build(
                out,
                names,
                contexts=contexts,
                workers=_workers(workers),
                pool=run_pool,
                private_seed=private_seed,
            )
    except KeyError as e:
        fail(str(e.args[0]))
    except (KeyboardInterrupt, Interrupted):
        interrupted(f"nothing written ({out} is as it was); run the same command again")
    kind = "held-out cases" if private_seed is not None else "cases"
    console.print(f"{len(cases)} {kind} ({BRANCHES} branches per context) written to {out}")


@wm_app.command("eval")
def wm_eval(
    wm: str = typer.Option(
        ...,
        "--wm",
        help="World model: http, a reference model (controls: copy-last, simulator, "
        "branch-swap; adversarial: fixed-action, all-action-average, other-case, "
        "context-mean, blurred-copy-last, blurred-truth) or package.module:Class (a "
        "vical.wm.models.WorldModel subclass).",
    ),
    control: str = typer.Option(
        "own",
        "--control",
        help="Intervention the model is given: own (the case's), noop (no decision, one "
        "request a context, scored against the simulator left alone) or shuffled (the "
        "case's actions in a seeded other order, scored against the simulator's frames "
        "for that order). A control run also predicts the own interventions and flags a "
        "model whose predictions do not change.",
    ),
    cases: Path = typer.Option(Path("build/wm"), "--cases", "-c", help="Case folder."),
    out: Path = typer.Option(..., "--out", "-o", help="Run folder for predictions and scores."),
    endpoint: str = typer.Option(None, "--endpoint", help="Endpoint URL of an http world model."),
    scenarios: str = typer.Option(None, "--scenarios", "-s", help="Comma-separated scenarios."),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help=WORKERS_HELP),
) -> None:
    """Run a world model on the cases, store its predictions and score them."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from vical.run.pool import Interrupted, run_pool
    from vical.wm.cases import load_cases
    from vical.wm.evaluate import evaluate, select
    from vical.wm.models import WorldModel, get_wm, wm_names
    from vical.wm.protocol import ProtocolError

    if wm not in wm_names() and ":" not in wm:
        fail(
            f"--wm {wm!r} is not a world model; choose one of {', '.join(wm_names())} "
            "or give package.module:Class"
        )
    from vical.wm.controls import INTERVENTIONS

    if control not in INTERVENTIONS:
        fail(f"--control {control!r} is not one of {', '.join(INTERVENTIONS)}")
    if wm == "http" and not endpoint:
        fail("--wm http needs --endpoint URL (for example http://127.0.0.1:8000)")
    names = [s.strip() for s in scenarios.split(",") if s.strip()] if scenarios else None
    done = [0, 0]  # cases predicted, cases chosen
    try:
        # the cases are read and the model is built before the bar is drawn, so that an
        # error there is one line with no empty bar above it
        done[1] = len(select(load_cases(cases), names))
        model: WorldModel | str = wm  # a control, which evaluate builds for the cases
        if wm == "http":
            model = get_wm("http", endpoint=endpoint)
        elif ":" in wm:  # a class outside vical, imported here
            model = get_wm(wm)
        # SIGTERM (a container's stop, `kill`) stops the run as Ctrl-C does
        with (
            stop_signals() as stop,
            Progress(
                TextColumn("[bold]predict[/]"), BarColumn(), MofNCompleteColumn(), console=console
            ) as bar,
        ):
            task = bar.add_task("", total=None)

            def advance(n: int, total: int, case: str) -> None:
                done[0] = n
                bar.update(task, completed=n, total=total)
                stop.check()  # a signal whose KeyboardInterrupt a library swallowed

            summary = evaluate(
                model,
                cases,
                out,
                names,
                progress=advance,
                control=control,
                workers=_workers(workers),
                pool=run_pool,
            )
    except (ValueError, KeyError, FileNotFoundError, ProtocolError) as e:
        fail(str(e))
    except (KeyboardInterrupt, Interrupted):
        interrupted(
            f"{done[0]} of {done[1]} cases predicted, not scored (no summary.json in "
            f"{out}); run the same command again"
        )
    idx = summary["index"]

    def num(part: str) -> str:
        v = idx[part]["mean"]
        return "n/a" if v is None else f"{v:.1f}"

    skipped = sum(u["cases"] for u in summary["unavailable"].values())
    say(
        f"{summary['model']} ({control} intervention): WM index (action skill) "
        f"{num('action_skill')}, MSE skill {num('mse_skill')}, responds "
        f"{num('response')}% over {summary['cases']} cases"
        + (f" ({skipped} without a {control} target)" if skipped else "")
        + f"; results in {out}"
    )
    if summary.get("flag"):
        say(f"FLAGGED: {summary['model']} {summary['flag']}")


@wm_app.command("couple")
@api_options(reasoning_effort=False)
def wm_couple(
    tasks: str = typer.Option(
        ..., "--tasks", "-t", help="Comma-separated task id globs (for example 'taxi/*')."
    ),
    wm: str = typer.Option(
        "simulator,copy-last",
        "--wm",
        help="Comma-separated world models, one run each: simulator (perfect), copy-last "
        "(persistence), http (a model under test at --wm-endpoint).",
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder; each world model's run goes to OUT/<world model>."
    ),
    wm_endpoint: str = typer.Option(
        None, "--wm-endpoint", help="Endpoint URL of the http world model (vical-wm/1)."
    ),
    horizon: int = typer.Option(
        1, "--horizon", help="Imagined frames per candidate: the action played this many times."
    ),
    candidates: int = typer.Option(
        None,
        "--candidates",
        min=1,
        help="Candidate actions per decision (default: every legal action; fewer are drawn "
        "per step from the episode seed).",
    ),
    agent: str = agent_option(
        "random", help="Agent backend (random, openai-chat, openai-responses, ...)."
    ),
    api: ApiOptions = API_OPTIONS,
    runs: int = typer.Option(1, "--runs", min=1, help="Episodes per task."),
    seed: int = typer.Option(0, "--seed", help="Run seed; each episode's seed derives from it."),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Parallel episodes."),
    demos: bool = typer.Option(True, "--demos/--no-demos", help="Show the demonstrations."),
    rules: str = typer.Option("basic", "--rules", help="Rules text: basic or detailed."),
    request_timeout: float = typer.Option(120.0, "--request-timeout", help="Seconds per request."),
    preflight: bool = typer.Option(True, "--preflight/--no-preflight", help="Check the model."),
    skip_doctor: bool = typer.Option(False, "--skip-doctor", help="Skip the self-check."),
) -> None:
    """Play tasks with an agent that sees a world model's imagined rollouts of its candidate
    actions before each move; one ordinary run folder per world model (submit and verify
    them like any run), then a table of task score and pass rate per world model."""
    from vical.cli._common import OptionError
    from vical.cli.eval import EvalOptions, run_and_report
    from vical.wm.couple import WORLD_MODELS, Coupling

    names = [w.strip() for w in wm.split(",") if w.strip()]
    bad = [w for w in names if w not in WORLD_MODELS]
    if not names or bad:
        fail(f"--wm {wm!r}: choose from {', '.join(WORLD_MODELS)} (comma-separated)")
    if len(set(names)) != len(names):
        fail(f"--wm {wm!r} names a world model twice; list each once")
    if wm_endpoint and "http" not in names:
        fail("--wm-endpoint is only used with --wm http; add http to --wm or drop it")
    try:
        couplings = [
            Coupling(w, horizon, candidates, wm_endpoint if w == "http" else None) for w in names
        ]
    except ValueError as e:
        fail(str(e))
    if wm_endpoint:  # a world model that is down fails here, not in every episode
        from vical.cli._common import select
        from vical.wm.couple import preflight as check_endpoint
        from vical.wm.protocol import ProtocolError

        chosen = select(tasks)
        try:
            check_endpoint(next(c for c in couplings if c.world_model == "http"), chosen[0])
        except ProtocolError as e:
            from vical.agent.redact import redact_text, redact_url, url_secrets

            said = redact_text(str(e), url_secrets(wm_endpoint))
            fail(
                f"--wm-endpoint {redact_url(wm_endpoint)}: the world model did not answer a "
                f"first request ({said}); is its server running?"
            )
    folders = []
    for coupling in couplings:
        folder = out / coupling.world_model
        try:
            opts = EvalOptions(
                tasks=tasks,
                out=folder,
                runs=runs,
                seed=seed,
                workers=workers,
                frames="none",
                agent=agent,
                api=None if agent == "random" else api,
                demos=demos,
                report=True,
                preflight=preflight,
                rules=rules,
                doctor=not skip_doctor,
                world_model=coupling,
            )
        except OptionError as e:
            fail(str(e))
        console.print(f"[bold]world model {coupling.world_model}[/]")
        run_and_report(opts)
        folders.append(folder)
    say(couple_table(folders))


@wm_app.command("couple-table")
def wm_couple_table(
    runs: list[Path] = typer.Argument(..., help="Coupled run folders (vical wm couple)."),
) -> None:
    """The Markdown table of coupled runs: task score and pass rate per world model."""
    from vical.errors import RunFolderError

    try:
        say(couple_table(runs))
    except RunFolderError as e:
        fail(str(e))


def couple_table(runs: list[Path]) -> str:
    """Mean task score and pass rate of each coupled run, over the episodes every run
    finished, and each run's score difference from the ``simulator`` run (when one is
    given), paired by episode, with a 95% interval from 10,000 bootstrap resamples of
    environments."""
    from vical.errors import RunFolderError
    from vical.report.stats import cluster_bootstrap
    from vical.run.results import load_results, read_manifest

    rows = []
    for run in runs:
        manifest = read_manifest(run, "pass a folder that `vical wm couple` wrote")
        if manifest.world_model is None:
            raise RunFolderError(f"{run} is not a coupled run (its manifest has no world_model)")
        results = load_results(run)  # infrastructure failures are not results
        rows.append((manifest, {(r.task_id, r.run_index): r for r in results}))
    agents = {(m.agent, m.agent_settings.get("model")) for m, _ in rows}
    if len(agents) > 1:
        raise RunFolderError(
            f"the runs were played by different agents {sorted(map(str, agents))}; "
            "compare runs of one agent"
        )
    common = sorted(set.intersection(*(set(res) for _, res in rows))) if rows else []
    ceiling = next(
        (res for m, res in rows if (m.world_model or {}).get("name") == "simulator"), None
    )
    agent, model = next(iter(agents)) if agents else ("-", None)
    lines = [
        f"{len(common)} episodes common to every run; agent {agent}"
        + (f", model {model}" if model else ""),
        "",
        "| world model | episodes | task score | pass rate (%) | score vs simulator [95% CI] |",
        "|---|---:|---:|---:|---:|",
    ]
    for manifest, res in rows:
        chosen = [res[k] for k in common]
        n = len(chosen)
        score = sum(r.score for r in chosen) / n if n else float("nan")
        passed = 100 * sum(r.passed for r in chosen) / n if n else float("nan")
        wm = manifest.world_model or {}
        label = str(wm.get("name")) + (f" ({wm['endpoint']})" if wm.get("endpoint") else "")
        gap = ""
        if ceiling is not None and n:
            diff = [res[k].score - ceiling[k].score for k in common]
            iv = cluster_bootstrap(diff, [k[0].split("/")[0] for k in common], "mean")
            gap = f"{iv.estimate:+.1f}"
            if wm.get("name") != "simulator" and iv.low == iv.low:  # not NaN
                gap += f" [{iv.low:+.1f}, {iv.high:+.1f}]"
        lines.append(f"| {label} | {n} | {score:.1f} | {passed:.1f} | {gap} |")
    return "\n".join(lines)


@wm_app.command("report")
def wm_report(
    runs: list[Path] = typer.Argument(..., help="World-model run folders (models and controls)."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the Markdown here (default: print)."),
) -> None:
    """A table per scenario and the index, one row per run."""
    from vical.wm.report import report_markdown

    try:
        text = report_markdown(runs)
    except FileNotFoundError as e:
        fail(str(e))
    if out is None:
        say(text)
    else:
        out.write_text(text, encoding="utf-8")
        console.print(f"report written to {out}")


@wm_app.command("submit")
def wm_submit(
    run: Path = typer.Argument(..., help="Scored world-model run folder (vical wm eval)."),
    key: Path = typer.Option(..., "--key", help="Private key from `vical keygen`."),
    out: Path = typer.Option(Path("wm-bundle.tar.gz"), "--out", "-o", help="Bundle file."),
    team: str = typer.Option(None, "--team", help="Team name (default: $USER)."),
    model: str = typer.Option(None, "--model", help="Model name (default: the run's)."),
) -> None:
    """Pack a world-model run (predictions, scores, summary) into a signed bundle."""
    import os

    from vical.submit.bundle import BundleError, make_wm_bundle

    if not key.is_file():
        fail(f"--key {key}: no such private key file (make one with `vical keygen`)")
    try:
        m = make_wm_bundle(run, key, out, team or os.environ.get("USER", "anonymous"), model)
    except BundleError as e:
        fail(str(e))
    console.print(
        f"bundle written to {out} ({len(m['files'])} files, model {m['submitter']['model']})"
    )


@wm_app.command("verify")
def wm_verify(
    target: Path = typer.Argument(..., help="World-model run folder, or a bundle (.tar.gz)."),
    cases: Path = typer.Option(
        None,
        "--cases",
        "-c",
        help="Case folder to check against (default for a run: build/wm; for a bundle: "
        "the cases are rebuilt from the simulators).",
    ),
    pubkey: list[Path] = typer.Option(
        None, "--pubkey", help="Trusted public key(s) for a bundle; default: submissions/keys/*.pub"
    ),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help=WORKERS_HELP),
) -> None:
    """Re-derive the truth from the simulator and re-score the stored predictions."""
    from vical.run.pool import run_pool

    if target.is_file():
        from vical.submit.verify import VerifyError, verify_bundle

        try:
            v = verify_bundle(
                target,
                pubkeys=pubkey or None,
                workers=_workers(workers),
                wm_cases=cases,
                accept_wm=True,
            )
        except VerifyError as e:
            fail(f"{target}: {e}", code=1)
        for ep in v.episodes:
            for p in ep.problems:
                say(p)
        if not v.ok:
            raise typer.Exit(1)
        console.print(f"PASS: {len(v.episodes)} cases re-score exactly; signer {v.signer}")
        return
    from vical.wm.evaluate import rescore

    try:
        problems = rescore(target, cases or Path("build/wm"), _workers(workers), run_pool)
    except FileNotFoundError as e:
        fail(str(e))
    for p in problems:
        say(p)
    if problems:
        raise typer.Exit(1)
    console.print(f"{target}: every score re-derives from the simulator")
