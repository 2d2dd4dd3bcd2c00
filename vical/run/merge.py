"""``vical merge``: the shard folders of one run put together into one run folder.

The shards written by ``vical eval --shard I/N`` are checked before anything is
written:

* each is a run folder whose manifest records a shard, given once (the same
  folder twice, by any name, is an overlap), and no other process is writing it
  (its lock is taken for the duration);
* they share the task data (which must be this vical's, so the slices can be
  recomputed), the agent, every result-changing agent setting, the run seed,
  the runs per task, demonstrations on or off, the vical version, any other
  manifest setting, and the whole episode set;
* no gap and no overlap: every index 0..N-1 once, each folder holding exactly
  the episodes of its slice, every one whole (its files match the hashes in its
  ``eval_result.json``) and a result (not an infrastructure failure).

The merged folder then holds every episode folder, copied byte for byte, and
a manifest that is the first shard's with the shard record removed, the run id
of the new folder, the earliest start time, the merge's command line, and the
shards listed under ``merged_from`` (each one's run id, shard, start time,
command, image and versions). Report, bundle and verification read a merged
run exactly as a run made on one machine. The folder is built beside its
destination and renamed into place at the end, so an interrupted merge leaves
nothing half-made: SIGINT or SIGTERM removes the folder being built and raises
:class:`vical.run.pool.Interrupted` (a second signal removes it and exits at
once).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vical.errors import RunFolderError
from vical.outcomes import episode_name
from vical.run.results import EvalResult, RunManifest, atomic_write_json, read_manifest
from vical.run.runner import NON_RESULT_SETTINGS, episode_problems, lock_run_folder
from vical.run.shard import MergedShard, Shard, ShardInfo, episode_set, select_shard
from vical.spec import get_task, tasks_digest

# manifest fields that are each shard's own: they may differ and are kept as provenance
PER_SHARD_FIELDS = frozenset(
    {"run_id", "created_at", "command", "image", "versions", "shard", "merged_from"}
)
SHOWN = 5  # episode names listed in one message


class MergeError(RunFolderError):
    """The folders are not the shards of one finished run; the message says why and the fix."""


@dataclass(frozen=True)
class MergedRun:
    """What a merge wrote."""

    out: Path
    shards: int
    episodes: int


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _load(folder: Path) -> tuple[RunManifest, ShardInfo]:
    try:
        m = read_manifest(folder, "give the folders `vical eval --shard` wrote")
    except RunFolderError as e:
        raise MergeError(str(e)) from None
    if m.shard is None:
        raise MergeError(
            f"{folder} is not a shard (its manifest records no --shard); only folders written "
            "by `vical eval --shard I/N` are merged"
        )
    return m, m.shard


def _result_settings(m: RunManifest) -> dict[str, Any]:
    return {k: v for k, v in m.agent_settings.items() if k not in NON_RESULT_SETTINGS}


def _shared_fields(m: RunManifest) -> dict[str, Any]:
    """What every shard of one run must agree on, by manifest field."""
    d = m.model_dump(exclude=set(PER_SHARD_FIELDS))
    d["agent_settings"] = _result_settings(m)
    d["tasks"] = sorted(m.tasks)
    d["vical"] = m.versions.get("vical")
    return d


def check_agreement(folders: Sequence[Path], manifests: Sequence[RunManifest]) -> None:
    """The shards must be of one run: same settings, task data, seed, episode set."""
    first, ref = folders[0], _shared_fields(manifests[0])
    for folder, m in zip(folders[1:], manifests[1:], strict=True):
        here = _shared_fields(m)
        diffs = sorted(k for k in set(ref) | set(here) if ref.get(k) != here.get(k))
        if not diffs:
            continue
        parts = []
        for k in diffs:
            if k == "agent_settings":
                a, b = ref[k], here[k]
                keys = sorted(x for x in set(a) | set(b) if a.get(x) != b.get(x))
                parts.append(f"agent settings ({', '.join(keys)})")
            elif k == "tasks":
                parts.append("the task list")
            else:
                parts.append(f"{k} ({ref.get(k)!r} vs {here.get(k)!r})")
        raise MergeError(
            f"{folder} and {first} are not shards of one run: they differ in "
            + "; ".join(parts)
            + ". Every shard must be run with the same vical, --tasks, --runs, --seed and agent "
            "options"
        )


def check_coverage(folders: Sequence[Path], infos: Sequence[ShardInfo]) -> None:
    """Every index 0..N-1 exactly once, all of one episode set."""
    counts = {i.count for i in infos}
    if len(counts) > 1:
        raise MergeError(
            "the shards were cut into different numbers of pieces ("
            + ", ".join(f"{f}: {i.index}/{i.count}" for f, i in zip(folders, infos, strict=True))
            + "); merge the shards of one --shard I/N series"
        )
    digests = {i.episodes_digest for i in infos}
    if len(digests) > 1:
        raise MergeError(
            "the shards cover different episode sets (other --tasks or --runs); merge the "
            "shards of one run"
        )
    n = infos[0].count
    seen: dict[int, Path] = {}
    for folder, info in zip(folders, infos, strict=True):
        if info.index in seen:
            raise MergeError(
                f"overlap: shard {info.index}/{n} is given twice ({seen[info.index]} and "
                f"{folder}); give each shard once"
            )
        seen[info.index] = folder
    missing = [f"{i}/{n}" for i in range(n) if i not in seen]
    if missing:
        raise MergeError(
            f"gap: shard(s) {', '.join(missing)} missing; run `vical eval --shard I/N` for "
            "them with the same options, then merge all of them"
        )


def check_shard_episodes(folder: Path, info: ShardInfo, wanted: set[str]) -> list[Path]:
    """The episode folders of one shard: exactly its slice, each whole and a result."""
    eps = folder / "episodes"
    present = {p.name: p for p in sorted(eps.iterdir()) if p.is_dir()} if eps.is_dir() else {}
    shard = Shard(info.index, info.count)
    foreign = sorted(set(present) - wanted)
    if foreign:
        raise MergeError(
            f"overlap: {folder} (shard {shard}) holds episode(s) outside its slice: "
            f"{_names(foreign)}; it is not a folder `vical eval --shard {shard}` wrote alone"
        )
    missing = sorted(wanted - set(present))
    if missing:
        raise MergeError(
            f"gap: {folder} (shard {shard}) lacks {len(missing)} of its {len(wanted)} "
            f"episode(s) ({_names(missing)}); resume it with the same `vical eval --shard "
            f"{shard} --out {folder}` command, then merge"
        )
    for p in present.values():
        problems = episode_problems(p)
        if problems:
            raise MergeError(
                f"{p} is damaged ({'; '.join(problems)}); resume shard {shard} with the same "
                f"`vical eval --out {folder}` command, which re-runs it, then merge"
            )
        r = EvalResult.model_validate_json((p / "eval_result.json").read_bytes())
        if r.infrastructure_failure:
            raise MergeError(
                f"gap: {p} ended in an infrastructure failure, which is not a result; resume "
                f"shard {shard} with the same `vical eval --out {folder}` command, then merge"
            )
    return [present[n] for n in sorted(present)]


def check_distinct(folders: Sequence[Path]) -> None:
    """No folder given twice, under the same name or another (a symlink, ``./``, a
    bind mount): each would hold the same episodes, and the second lock would
    wait on the first."""
    seen: dict[tuple[int, int], Path] = {}
    for f in folders:
        st = f.stat()
        key = (st.st_dev, st.st_ino)
        if key in seen:
            same = "" if str(seen[key]) == str(f) else f" (as {seen[key]} and {f})"
            raise MergeError(
                f"overlap: the shard folder {f} is given twice{same}, so its episodes would "
                "be merged twice; give each shard folder once"
            )
        seen[key] = f


@contextlib.contextmanager
def _locked(folders: Sequence[Path]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for f in folders:
            stack.enter_context(lock_run_folder(f))
        yield


def merged_manifest(out: Path, manifests: Sequence[RunManifest]) -> RunManifest:
    """The merged run's manifest: shard 0's, without the shard, with provenance."""
    from vical.agent.redact import redact_argv

    ordered = sorted(manifests, key=lambda m: m.shard.index if m.shard else 0)
    provenance = [
        MergedShard(
            shard=f"{m.shard.index}/{m.shard.count}" if m.shard else "",
            run_id=m.run_id,
            created_at=m.created_at,
            command=m.command,
            image=m.image,
            versions=m.versions,
            doctor=m.doctor,
            machine=m.machine,
        )
        for m in ordered
    ]
    # the self-check that speaks for the merged run: the first shard's that was not ok
    checks = [m.doctor for m in ordered if m.doctor is not None]
    doctor = next((d for d in checks if d.get("status") != "ok"), checks[0] if checks else None)
    return ordered[0].model_copy(
        update={
            "doctor": doctor,
            "run_id": out.name,
            "created_at": min(m.created_at for m in ordered),
            "command": redact_argv(list(sys.argv)),
            "shard": None,
            "merged_from": provenance,
        }
    )


def merge_runs(shards: Sequence[Path], out: Path) -> MergedRun:
    """Check that ``shards`` are the whole of one sharded run and write it to ``out``.

    Raises :class:`MergeError` (nothing written) when they are not; ``out`` must not
    exist or be an empty folder.
    """
    folders = [Path(s) for s in shards]
    if not folders:
        raise MergeError("no shard folders given")
    out = Path(out)
    for f in folders:
        if not f.is_dir():
            raise MergeError(f"{f}: no such run folder")
        if f.resolve() == out.resolve():
            raise MergeError(f"--out {out} is one of the shards; write the merge to a new folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MergeError(f"--out {out} exists and is not empty; choose a new folder")
    check_distinct(folders)
    with _locked(folders):
        loaded = [_load(f) for f in folders]
        manifests = [m for m, _ in loaded]
        infos = [i for _, i in loaded]
        check_coverage(folders, infos)
        check_agreement(folders, manifests)
        m0 = manifests[0]
        if m0.tasks_digest != tasks_digest():
            raise MergeError(
                f"the shards ran on task data {m0.tasks_digest[:12]}, this vical has "
                f"{tasks_digest()[:12]}; merge with the vical version that ran them"
            )
        tasks = [get_task(t) for t in m0.tasks]
        if len(episode_set(tasks, m0.runs_per_task)) != infos[0].episodes:
            raise MergeError(
                f"{folders[0]}: the manifest's tasks and runs make "
                f"{len(episode_set(tasks, m0.runs_per_task))} episodes, its shard record says "
                f"{infos[0].episodes}; the folder was edited"
            )
        sources: list[Path] = []
        for folder, info in zip(folders, infos, strict=True):
            mine, again = select_shard(tasks, m0.runs_per_task, info.shard)
            if again != info:
                raise MergeError(
                    f"{folder}: its shard record does not match its manifest's tasks and runs "
                    "(the folder was edited); run the shard again"
                )
            wanted = {episode_name(tid, k) for tid, k in mine}
            sources += check_shard_episodes(folder, info, wanted)
        manifest = merged_manifest(out, manifests)
        tmp = out.parent / f".{out.name}.merge-{uuid.uuid4().hex[:8]}"
        from vical.run.pool import Interrupted, SignalScope

        def remove_tmp() -> None:
            shutil.rmtree(tmp, ignore_errors=True)

        # first SIGINT/SIGTERM: KeyboardInterrupt in the copy, tmp removed, then
        # Interrupted; a second: tmp removed and exit at once; never in the rename
        with SignalScope(remove_tmp) as stop:
            try:
                (tmp / "episodes").mkdir(parents=True)
                for src in sorted(sources, key=lambda p: p.name):
                    shutil.copytree(src, tmp / "episodes" / src.name)
                atomic_write_json(tmp / "manifest.json", manifest)
                with stop.deferred():
                    if out.exists():
                        out.rmdir()  # empty (checked above)
                    os.rename(tmp, out)
            except KeyboardInterrupt:
                remove_tmp()
                if stop.received is None:
                    raise
                raise Interrupted(stop.received) from None
            except BaseException:
                remove_tmp()
                raise
    return MergedRun(out=out, shards=len(folders), episodes=len(sources))
