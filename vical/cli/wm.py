"""``vical wm``: build world-model cases, evaluate a world model on them, report."""

from __future__ import annotations

from pathlib import Path

import typer

from vical.cli._common import console, fail, interrupted, say, stop_signals

wm_app = typer.Typer(help="The world-model track.", no_args_is_help=True)


@wm_app.command("build")
def wm_build(
    out: Path = typer.Option(Path("build/wm"), "--out", "-o", help="Case folder."),
    scenarios: str = typer.Option(
        None, "--scenarios", "-s", help="Comma-separated scenario names (default: all eight)."
    ),
    contexts: int = typer.Option(10, "--contexts", min=1, help="Contexts per scenario."),
) -> None:
    """Build the cases (context, intervention, true frames, specification) into a folder."""
    from vical.wm.cases import BRANCHES, build

    names = [s.strip() for s in scenarios.split(",") if s.strip()] if scenarios else None
    try:
        cases = build(out, names, contexts=contexts)
    except KeyError as e:
        fail(str(e.args[0]))
    console.print(f"{len(cases)} cases ({BRANCHES} branches per context) written to {out}")


@wm_app.command("eval")
def wm_eval(
    wm: str = typer.Option(
        ...,
        "--wm",
        help="World model: http, a control model (copy-last, branch-swap, simulator) or "
        "package.module:Class (a vical.wm.models.WorldModel subclass).",
    ),
    control: str = typer.Option(
        "own",
        "--control",
        help="Intervention the model is given: own (the case's), noop (the NOOP action, "
        "scored against the simulator's NOOP frames) or shuffled (the case's actions in a "
        "seeded other order, scored against the simulator's frames for that order).",
    ),
    cases: Path = typer.Option(Path("build/wm"), "--cases", "-c", help="Case folder."),
    out: Path = typer.Option(..., "--out", "-o", help="Run folder for predictions and scores."),
    endpoint: str = typer.Option(None, "--endpoint", help="Endpoint URL of an http world model."),
    scenarios: str = typer.Option(None, "--scenarios", "-s", help="Comma-separated scenarios."),
) -> None:
    """Run a world model on the cases, store its predictions and score them."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

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

            summary = evaluate(model, cases, out, names, progress=advance, control=control)
    except (ValueError, KeyError, FileNotFoundError, ProtocolError) as e:
        fail(str(e))
    except KeyboardInterrupt:
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
        f"{summary['model']} ({control} intervention): SSIM skill {num('ssim_skill')}, "
        f"PSNR skill {num('psnr_skill')}, counterfactual {num('counterfactual')} over "
        f"{summary['cases']} cases"
        + (f" ({skipped} without a {control} target)" if skipped else "")
        + f"; results in {out}"
    )


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
) -> None:
    """Re-derive the truth from the simulator and re-score the stored predictions."""
    if target.is_file():
        from vical.submit.verify import VerifyError, verify_bundle

        try:
            v = verify_bundle(target, pubkeys=pubkey or None, wm_cases=cases, accept_wm=True)
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
        problems = rescore(target, cases or Path("build/wm"))
    except FileNotFoundError as e:
        fail(str(e))
    for p in problems:
        say(p)
    if problems:
        raise typer.Exit(1)
    console.print(f"{target}: every score re-derives from the simulator")
