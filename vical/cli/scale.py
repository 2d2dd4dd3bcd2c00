"""Running one evaluation over several machines: ``--shard I/N`` and ``vical merge``.

``vical eval --shard I/N`` and ``vical verify --shard I/N`` each do slice ``I``
of ``N`` of the work (:mod:`vical.run.shard`); ``vical merge`` puts the
pieces back together: shard run folders into one run folder
(:mod:`vical.run.merge`), or shard verdict files into one verdict
(:mod:`vical.submit.shards`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vical.cli._common import OptionError, console, fail, interrupted, print_verdict

if TYPE_CHECKING:
    from vical.run.shard import Shard


def shard_option(text: str | None, flag: str = "--shard") -> Shard | None:
    """The ``--shard I/N`` value, parsed (None when the option was not given)."""
    if text is None:
        return None
    from vical.run.shard import Shard

    try:
        return Shard.parse(text)
    except ValueError as e:
        raise OptionError(f"{flag}: {e}") from None


def merge_cmd(
    shards: list[Path] = typer.Argument(
        ...,
        metavar="SHARD...",
        help="All N shards: the run folders `vical eval --shard I/N` wrote, or the verdict "
        "files `vical verify --shard I/N --out FILE` wrote.",
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="The merged run folder (new, or an empty folder), or the merged verdict file.",
    ),
) -> None:
    """Merge the N shards of one sharded evaluation, or of one sharded verification.

    Run folders: they must share task data, agent, agent settings, seed and episode
    set, and together hold every episode exactly once, each finished and whole. The
    merged folder is an ordinary run: `vical report`, `vical submit` and `vical
    verify` treat it like a run made on one machine.

    Verdict files: they must be of one bundle (same sha256) and together have
    replayed each of its episodes exactly once. The merged verdict is printed as
    `vical verify` prints one and written to --out; exit 1 when the bundle fails.
    """
    missing = [p for p in shards if not p.exists()]
    if missing:
        fail(f"{missing[0]}: no such shard folder or verdict file", code=2)
    kinds = {p.is_dir() for p in shards}
    if len(kinds) > 1:
        fail("give either shard run folders or verdict files, not both", code=2)
    if kinds == {False}:
        _merge_verdicts(shards, out)
        return
    from vical.run.merge import MergeError, merge_runs
    from vical.run.pool import Interrupted

    try:
        merged = merge_runs(shards, out)
    except MergeError as e:
        fail(str(e), code=1)
    except (Interrupted, KeyboardInterrupt):
        interrupted(
            f"the merge was stopped and nothing was written to {out} (the shards are "
            "unchanged); run the same command again"
        )
    console.print(
        f"merged {merged.shards} shard(s), {merged.episodes} episodes, into {merged.out}",
        soft_wrap=True,
    )
    console.print(f"next: vical report {merged.out}, then vical submit {merged.out} --key KEY")


def _merge_verdicts(files: list[Path], out: Path) -> None:
    from vical.submit.shards import VerdictMergeError, merge_verdicts, write_verdict

    try:
        verdict, digest = merge_verdicts(files)
    except VerdictMergeError as e:
        fail(str(e), code=1)
    write_verdict(out, verdict, digest, None)
    console.print(f"merged {len(files)} verdict shard(s) into {out}", soft_wrap=True)
    print_verdict(verdict)
    if not verdict.ok:
        raise typer.Exit(1)


def check_executor(executor: str, ray_address: str | None) -> None:
    """``--executor`` and ``--ray-address`` as a command line gives them (OptionError if bad)."""
    import importlib.util
    import os

    if executor not in ("local", "ray"):
        raise OptionError(f"--executor {executor!r} is not one of: local, ray")
    if executor == "local":
        if ray_address:
            raise OptionError("--ray-address is for --executor ray; add --executor ray")
        return
    if importlib.util.find_spec("ray") is None:
        raise OptionError(
            "--executor ray needs the Python package 'ray', which is not installed; install "
            "it with: pip install 'vical[ray]'"
        )
    if not (ray_address or os.environ.get("RAY_ADDRESS")):
        raise OptionError(
            "--executor ray needs the cluster's address: pass --ray-address HOST:PORT (or "
            "`local` for a private cluster on this machine), or set RAY_ADDRESS"
        )
