"""Keys, bundles, verification and the leaderboard: ``vical keygen``, ``vical submit``,
``vical verify``, ``vical leaderboard add|build``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import typer

from vical.cli._common import (
    console,
    endpoint_option,
    fail,
    interrupted,
    model_option,
    print_verdict,
)

leaderboard_app = typer.Typer(
    help="Maintain the leaderboard of verified bundles.", no_args_is_help=True
)


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


@dataclass(frozen=True)
class ImageRun:
    """``vical submit --endpoint``: evaluate an endpoint in the pinned image first."""

    endpoint: str
    model: str
    backend: str
    api_key_env: str | None
    dataset: Path | None  # local dataset folder; None: the pinned Hub revision
    image: str | None  # None: the image of this version
    tasks: str | None
    workdir: Path  # the run folder goes to workdir/submit-<time>/


def evaluate_in_image(job: ImageRun, key: Path) -> Path:
    """Run the evaluation in the image; the run folder it wrote (exit 130 on an interrupt).

    The private key is loaded first: a bad key fails before hours of evaluation.
    """
    from vical.run.pool import Interrupted
    from vical.submit import container
    from vical.submit.keys import KeyError_, load_private

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    workout = job.workdir / f"submit-{stamp}"
    try:
        load_private(key)
        ds = container.fetch_dataset(job.dataset)
        return container.run_in_image(
            endpoint=job.endpoint,
            model=job.model,
            backend=job.backend,
            out=workout,
            dataset=ds,
            image=job.image or container.DEFAULT_IMAGE,
            tasks=job.tasks,
            api_key_env=job.api_key_env,
            on_line=lambda line: console.print(line, markup=False, highlight=False),
        )
    except (Interrupted, KeyboardInterrupt):
        kept = f"; episodes it finished are in {workout / 'run'}" if workout.exists() else ""
        interrupted(
            f"the evaluation container was stopped and removed{kept}; no bundle was written"
        )
    except (container.ContainerError, KeyError_) as e:
        fail(str(e))


def submit_cmd(
    run: Path = typer.Argument(
        None,
        help="Run folder written by `vical eval`. Omit it and give --endpoint to run the "
        "pinned image against your endpoint first.",
    ),
    key: Path = typer.Option(..., "--key", help="Private key from `vical keygen`."),
    out: Path = typer.Option(Path("bundle.tar.gz"), "--out", "-o", help="Bundle file to write."),
    team: str = typer.Option(None, "--team", help="Team name (default: $USER)."),
    model: str = model_option("Model name (at the endpoint)."),
    partial: bool = typer.Option(
        False, "--partial", help="Bundle a run that does not cover every task."
    ),
    endpoint: str = endpoint_option("Model API base URL: run the evaluation in the pinned image."),
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
    to: str = typer.Option(
        None, "--to", help="A hub's URL: upload the bundle there and follow its verification."
    ),
    no_wait: bool = typer.Option(
        False, "--no-wait", help="With --to: return once the hub has stored the bundle."
    ),
) -> None:
    """Pack a run into a signed bundle, or with --endpoint, run the pinned image first;
    with --to, upload it to a hub and follow it to the verdict (exit 1 unless accepted)."""
    from vical.submit.bundle import BundleError, make_bundle
    from vical.submit.keys import KeyError_

    if to:  # before hours of work: the upload's package is there
        from vical.cli.hub import need_hub

        need_hub("vical submit --to", "httpx")
    if run is None:
        if not endpoint or not model:
            fail("give a RUN folder, or --endpoint and --model to evaluate in the pinned image")
        job = ImageRun(
            endpoint=endpoint,
            model=model,
            backend=backend,
            api_key_env=api_key_env,
            dataset=dataset,
            image=image,
            tasks=tasks,
            workdir=workdir,
        )
        run = evaluate_in_image(job, key)
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
    if to:
        send_to_hub(to, out, key, wait=not no_wait)


def send_to_hub(url: str, bundle: Path, key: Path, wait: bool) -> None:
    """Upload ``bundle`` to the hub at ``url``; with ``wait``, follow it to its verdict."""
    from vical.hub.client import follow, upload

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    s = upload(url, bundle, key, on_retry=say)
    say(
        f"uploaded: submission {s['id']} ({s['state']}); status page {url.rstrip('/')}"
        f"{s['links']['page']}"
    )
    if not wait:
        return
    final = follow(url, s["id"], say)
    if final["state"] != "accepted":
        raise typer.Exit(1)


def verify_cmd(
    bundle: Path = typer.Argument(..., help="Bundle (.tar.gz) to verify."),
    pubkey: list[Path] = typer.Option(
        None, "--pubkey", help="Trusted public key(s); default: submissions/keys/*.pub"
    ),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Parallel replays."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print every episode verdict."),
    shard: str = typer.Option(
        None,
        "--shard",
        metavar="I/N",
        help="Replay only slice I (from 0) of N of the episodes (every other check covers "
        "the whole bundle); needs --out. `vical merge` joins the N verdict files.",
    ),
    verdict_out: Path = typer.Option(
        None, "--out", "-o", help="Also write the verdict to this JSON file."
    ),
) -> None:
    """Check a bundle: signature first, then a bounded unpack of only what the signed
    manifest lists, schema, task data, coverage, consistency, and a replay of every
    episode in the simulator.

    Exit status: 0 the bundle verifies; 1 it is rejected (the line says which check
    and which member); 2 verification could not run (no such bundle file, no trusted
    public key, a bad option); 130 interrupted.
    """

    from vical.cli.scale import shard_option
    from vical.run.pool import Interrupted
    from vical.submit.verify import VerifyError, verify_bundle

    part = shard_option(shard)
    if part is not None and verdict_out is None:
        fail(f"--shard {part} needs --out FILE: the verdict file `vical merge` joins", code=2)
    check_inputs(bundle, pubkey)
    try:
        # a world-model bundle is re-scored against truth rebuilt from the simulators
        v = verify_bundle(
            bundle, pubkeys=pubkey or None, workers=workers, shard=part, accept_wm=part is None
        )
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
    if verdict_out is not None:
        from vical.run.results import file_sha256
        from vical.submit.shards import write_verdict

        write_verdict(verdict_out, v, file_sha256(bundle), part)
    if part is not None:
        console.print(f"shard {part} of the replay; verdict written to {verdict_out}")
    print_verdict(v)
    if not v.ok:
        raise typer.Exit(1)


def check_inputs(bundle: Path, pubkey: list[Path] | None) -> None:
    """What ``verify`` and ``leaderboard add`` need before they can judge a bundle: the
    bundle file and a trusted key; without them, one error line and status 2 (the
    check could not run), the same for both commands."""
    from vical.submit.verify import DEFAULT_KEYRING

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


@leaderboard_app.command("add")
def leaderboard_add(
    bundle: Path = typer.Argument(..., help="Bundle to verify and add."),
    pubkey: list[Path] = typer.Option(None, "--pubkey", help="Trusted public key(s)."),
    submissions: Path = typer.Option(
        Path("submissions"), "--submissions", help="Folder of verified summaries."
    ),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Parallel replays."),
) -> None:
    """Verify a bundle and, only if it passes, store its summary under submissions/.

    Exit status as `vical verify`: 0 added; 1 the bundle is rejected; 2 the check could
    not run (no such bundle file, no trusted public key).
    """
    from vical.submit.leaderboard import LeaderboardError, add
    from vical.submit.verify import VerifyError

    check_inputs(bundle, pubkey)
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

    skipped: list[str] = []
    index = build(out, submissions, skipped)
    for line in skipped:
        console.print(f"left out: {line}", markup=False, highlight=False)
    console.print(f"leaderboard written to {index}")
