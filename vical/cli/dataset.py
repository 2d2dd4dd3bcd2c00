"""``vical dataset``: build, verify, describe and upload the Hugging Face dataset folder."""

from __future__ import annotations

from pathlib import Path

import typer

from vical.cli._common import console, err, fail, interrupted, say, select

dataset_app = typer.Typer(help="The Hugging Face dataset folder.", no_args_is_help=True)


@dataset_app.command("build")
def dataset_build(
    out: Path = typer.Option(Path("build/dataset"), "--out", "-o", help="Dataset folder."),
    tasks: str = typer.Option(None, "--tasks", "-t", help="Task globs (default: every task)."),
    wm_cases: Path = typer.Option(
        None,
        "--wm-cases",
        help="A world-model case folder (vical wm build) to publish as the configuration 'wm'.",
    ),
    workers: int = typer.Option(
        None, "--workers", "-j", min=1, help="Tasks rendered at once (default: one per core)."
    ),
) -> None:
    """Build the dataset folder (parquet rows, MP4 demos, card) loadable by datasets."""

    from vical.dataset import build_dataset, verify_dataset
    from vical.run.pool import Interrupted

    if wm_cases is not None and not (wm_cases / "cases.jsonl").is_file():
        fail(f"--wm-cases {wm_cases}: no cases.jsonl there; build one with `vical wm build`")
    if wm_cases is not None:
        from vical.wm.cases import is_held_out

        if is_held_out(wm_cases):
            fail(
                f"--wm-cases {wm_cases}: these are held-out cases (built with --private-seed) "
                "and are never published; pass a folder built without it"
            )
    try:
        root = build_dataset(out, tasks, wm_cases=wm_cases, workers=workers)
    except (Interrupted, KeyboardInterrupt):
        interrupted(
            f"the partial build was removed and {out} was left as it was; "
            "run the same command again to build it"
        )
    problems = verify_dataset(root)
    if problems:
        fail("; ".join(problems), code=1)
    console.print(
        f"dataset written to {root}; load it with datasets.load_dataset('{root}', split='test')"
    )


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

    print_stats(select(tasks))


@dataset_app.command("push")
def dataset_push(
    root: Path = typer.Argument(..., help="Dataset folder."),
    repo: str = typer.Option(..., "--repo", help="Hub dataset repository, e.g. org/name."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="List the files that would be uploaded; upload nothing."
    ),
) -> None:
    """Upload a verified dataset folder to the Hugging Face Hub."""
    from vical.dataset import push_dataset

    try:
        files = push_dataset(root, repo, dry_run=dry_run)
    except ValueError as e:
        fail(str(e), code=1)
    if dry_run:
        for f in files:  # one path a line, relative to the folder: what the Hub would hold
            say(f)
    console.print(f"{len(files)} files {'would be ' if dry_run else ''}uploaded to {repo}")
