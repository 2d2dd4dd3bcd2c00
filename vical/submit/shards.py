"""Verifying one bundle on several machines: verdict files and their merge.

``vical verify BUNDLE --shard I/N --out V_I.json`` runs every check of
:func:`vical.submit.verify.verify_bundle` on the whole bundle (signature, bounded
unpack, schema, task data, consistency, coverage) and replays only slice ``I`` of
``N`` of its episodes; the verdict, with the bundle's sha256 and the shard, goes to
a JSON *verdict file*. ``vical merge V_0.json ... V_N-1.json --out V.json`` checks
that the files are the N slices of one bundle's verification (same bundle bytes,
same signed manifest and signer, every index once, the episodes they replayed
together exactly the bundle's, none twice) and writes the verdict an unsharded
``vical verify`` gives: the same episode verdicts in the same order, the same
verified results.

A verdict file is written by the maintainer's own machines and read back only by
them: it is a record of work done, not something a submitter hands in.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vical.errors import VicalError
from vical.outcomes import episode_name
from vical.run.results import EvalResult, atomic_write_json
from vical.run.shard import Shard
from vical.submit.verdict import EpisodeVerdict, Verdict

VERDICT_FORMAT = "vical-verdict/1"
_EPISODE_FILE = "/eval_result.json"
# what each slice reports about the whole bundle, so what every slice must agree on
_SHARED = tuple(
    f.name
    for f in dataclasses.fields(Verdict)
    if f.name not in ("ok", "episodes", "results", "machines")  # machines: set by a mismatch
)


class VerdictMergeError(VicalError):
    """The verdict files are not the slices of one verification; the message says why."""

    exit_code = 1


def bundle_episodes(manifest: dict[str, Any]) -> list[str]:
    """The episode folders a signed bundle manifest lists, in verification order."""
    prefix = "run/episodes/"
    names = {
        p[len(prefix) : -len(_EPISODE_FILE)]
        for p in manifest.get("files", {})
        if p.startswith(prefix) and p.endswith(_EPISODE_FILE)
    }
    return sorted(names)


def verdict_json(verdict: Verdict, bundle_digest: str, shard: Shard | None) -> dict[str, Any]:
    """A verdict as the JSON object a verdict file holds."""
    out: dict[str, Any] = {
        "format": VERDICT_FORMAT,
        "bundle_sha256": bundle_digest,
        "shard": str(shard) if shard else None,
    }
    for f in dataclasses.fields(verdict):
        value = getattr(verdict, f.name)
        if f.name == "episodes":
            value = [dataclasses.asdict(e) for e in value]
        elif f.name == "results":
            value = [r.model_dump(mode="json") for r in value]
        out[f.name] = value
    return out


def write_verdict(path: Path, verdict: Verdict, bundle_digest: str, shard: Shard | None) -> None:
    atomic_write_json(Path(path), verdict_json(verdict, bundle_digest, shard))


def read_verdict(path: Path) -> tuple[Verdict, str, Shard | None]:
    """(verdict, bundle sha256, shard) of a verdict file."""
    try:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or data.get("format") != VERDICT_FORMAT:
            raise ValueError(f"not a {VERDICT_FORMAT} file")
        shard = Shard.parse(data["shard"]) if data.get("shard") else None
        kwargs = {f.name: data[f.name] for f in dataclasses.fields(Verdict) if f.name in data}
        kwargs["episodes"] = [EpisodeVerdict(**e) for e in data["episodes"]]
        kwargs["results"] = [EvalResult.model_validate(r) for r in data["results"]]
        return Verdict(**kwargs), str(data["bundle_sha256"]), shard
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise VerdictMergeError(
            f"{path}: not a verdict file written by `vical verify --shard I/N --out FILE` "
            f"({type(e).__name__}: {e})"
        ) from None


def merge_verdicts(paths: Sequence[Path]) -> tuple[Verdict, str]:
    """The whole bundle's verdict from the verdict files of its N slices, and its sha256."""
    if not paths:
        raise VerdictMergeError("no verdict files given")
    read = [(Path(p), *read_verdict(Path(p))) for p in paths]
    first, v0, digest, _ = read[0]
    by_index: dict[int, Path] = {}
    counts: set[int] = set()
    for path, v, d, shard in read:
        if shard is None:
            raise VerdictMergeError(
                f"{path} is the verdict of a whole bundle, not of a shard; merge only the "
                "files `vical verify --shard I/N` wrote"
            )
        if d != digest:
            raise VerdictMergeError(
                f"{path} verified another bundle than {first} (sha256 {d[:12]} vs "
                f"{digest[:12]}); merge the verdicts of one bundle"
            )
        for name in _SHARED:
            if getattr(v, name) != getattr(v0, name):
                raise VerdictMergeError(
                    f"{path} and {first} disagree on the bundle's {name}; merge the verdicts of "
                    "one bundle made by one vical"
                )
        counts.add(shard.count)
        if shard.index in by_index:
            raise VerdictMergeError(
                f"overlap: shard {shard} is given twice ({by_index[shard.index]} and {path})"
            )
        by_index[shard.index] = path
    if len(counts) > 1:
        raise VerdictMergeError(
            f"the verdicts were cut into different numbers of shards ({sorted(counts)}); "
            "merge the shards of one --shard I/N series"
        )
    n = counts.pop()
    missing = [f"{i}/{n}" for i in range(n) if i not in by_index]
    if missing:
        raise VerdictMergeError(
            f"gap: verdict(s) of shard(s) {', '.join(missing)} missing; run `vical verify "
            "BUNDLE --shard I/N --out FILE` for them"
        )
    episodes: dict[str, EpisodeVerdict] = {}
    results: dict[str, EvalResult] = {}
    for _, v, _, _ in read:
        for e in v.episodes:
            if e.episode in episodes:
                raise VerdictMergeError(f"overlap: episode {e.episode} was replayed twice")
            episodes[e.episode] = e
        for r in v.results:
            results[episode_name(r.task_id, r.run_index)] = r
    expected = bundle_episodes(v0.manifest)
    if sorted(episodes) != expected:
        lost = sorted(set(expected) - set(episodes))
        extra = sorted(set(episodes) - set(expected))
        raise VerdictMergeError(
            "the verdicts do not cover the bundle's episodes exactly"
            + (f"; not replayed: {', '.join(lost[:5])}" if lost else "")
            + (f"; not in the bundle: {', '.join(extra[:5])}" if extra else "")
        )
    ordered = [episodes[name] for name in expected]
    ok = all(v.ok for _, v, _, _ in read) and all(e.ok for e in ordered)
    merged = dataclasses.replace(
        v0,
        ok=ok,
        episodes=ordered,
        results=[results[name] for name in expected] if ok else [],
        # both machines, from the first slice that found a mismatch (None when none did)
        machines=next((v.machines for _, v, _, _ in read if v.machines), None),
    )
    return merged, digest
