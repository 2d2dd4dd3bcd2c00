"""``vical verify``: trust a bundle's numbers without re-running the model.

Checks, in order, stopping at the first stage that fails:

1. manifest and signature (:mod:`vical.submit.unpack`): ``bundle/manifest.json``
   and ``manifest.sig`` are read from the archive stream (size-capped, nothing
   extracted), their JSON shapes checked, and the Ed25519 signature checked
   against the trusted keyring — before anything else is trusted;
2. bounded unpack: only the members the signed manifest lists are written,
   each checked against its declared size and sha256 while it streams; links,
   devices, duplicates, unlisted members and unsafe paths are verdicts, and
   the manifest's paths are never opened on the host;
3. schema of every run file, and the task-data version (the bundle's digest
   must be this vical's);
4. consistency: every episode carries its log and the log's actions are the
   result's; tags, budget and ids are this task data's; every episode comes
   from the run's agent with the run's result-changing settings; each task
   present has exactly the runs the run declares; no infrastructure failure
   poses as a result;
5. coverage (every task present, unless the bundle says it is partial);
6. replay: every episode's actions are replayed in the simulator, in
   parallel; frame hashes, score, pass, outcome and failure mode must equal
   the claims (:mod:`vical.submit.replay`). The verdict's results are rebuilt
   from the replay and this vical's task data
   (:func:`vical.submit.replay.verified_result`): the leaderboard reads those,
   never a field the submitter wrote.

A world-model bundle is checked instead by :mod:`vical.submit.wmcheck`.

Each task's episodes are replayed by one worker with one simulator, whose start
state is saved once and restored for the others
(:func:`vical.submit.replay.replay_task`; an episode that disagrees with its claims
is replayed again from replayed starts before its verdict). Replay runs through
:func:`vical.run.pool.run_pool`: Ctrl-C (SIGINT) or SIGTERM raises :class:`vical.run.pool.Interrupted` within a few seconds with
no replay worker left running. Verification only reads the bundle, so an
interrupted check leaves nothing behind and can simply be run again.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from vical.outcomes import episode_name, short_tasks
from vical.run.pool import Interrupted, run_pool
from vical.run.results import EvalResult, RunManifest
from vical.run.shard import Shard, select_results
from vical.spec import all_tasks, tasks_digest
from vical.submit.bundle import run_condition
from vical.submit.keys import DEFAULT_KEYRING as DEFAULT_KEYRING  # re-exported: the keyring
from vical.submit.keys import key_id, load_public
from vical.submit.kinds import agent_kind, bundle_kind, world_model_kind
from vical.submit.logcheck import check_log
from vical.submit.replay import Replayed, replay_task, verified_result
from vical.submit.unpack import unpack_bundle
from vical.submit.verdict import EpisodeVerdict, Verdict, first_line
from vical.submit.verdict import VerifyError as VerifyError  # re-exported: what verify raises
from vical.submit.wmcheck import verify_wm

if TYPE_CHECKING:
    from vical.wm.couple import CheckedRollout

P = ParamSpec("P")
T = TypeVar("T")


# -- 2. manifest and signature ---------------------------------------------
def load_keyring(pubkeys: list[Path] | None, keyring: Path | None) -> dict[str, Any]:
    keys = {}
    paths = list(pubkeys or [])
    if not paths and keyring is not None and keyring.is_dir():
        paths = sorted(keyring.glob("*.pub"))
    for p in paths:
        try:
            k = load_public(Path(p).read_bytes(), str(p))
        except OSError as e:
            raise VerifyError("signature", f"cannot read public key {p}: {e}") from None
        keys[key_id(k)] = k
    return keys


# -- 3-5. schema, dataset version, coverage, consistency ----------------------


def read_run_manifest(root: Path) -> RunManifest:
    """The bundle's run manifest, within the bounds any honest run has, naming an agent
    and world model of a declared kind (:mod:`vical.submit.kinds`)."""
    try:
        run = RunManifest.model_validate_json((root / "run" / "manifest.json").read_bytes())
    except (OSError, ValueError, RecursionError) as e:  # ValidationError, bad UTF-8
        raise VerifyError("schema", f"run/manifest.json: {first_line(e)}") from None
    if not 1 <= run.runs_per_task <= MAX_RUNS_PER_TASK:
        raise VerifyError(
            "schema",
            f"run/manifest.json: runs_per_task {str(run.runs_per_task)[:20]} is not "
            f"between 1 and {MAX_RUNS_PER_TASK}",
        )
    agent_kind(run.agent)  # default-deny: an agent no kind declares is refused here
    if run.world_model is not None:
        name = run.world_model.get("name") if isinstance(run.world_model, dict) else None
        world_model_kind(name)
    return run


def _result_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The agent settings that can change a result (what must agree across episodes)."""
    from vical.run.runner import NON_RESULT_SETTINGS

    return {k: v for k, v in settings.items() if k not in NON_RESULT_SETTINGS}


MAX_RUNS_PER_TASK = 100  # more runs of one task than any protocol asks for


@dataclass(frozen=True)
class _Coupled:
    """An episode coupled with the simulator as world model, to re-simulate."""

    rel: str
    task_id: str
    actions: tuple[str, ...]
    imagined: dict[int, list[CheckedRollout]]


def _resimulate(job: _Coupled) -> list[str]:
    from vical.spec import get_task
    from vical.wm.couple import resimulate

    return resimulate(get_task(job.task_id), list(job.actions), job.imagined)


def resimulate_coupled(jobs: list[_Coupled], workers: int) -> None:
    """Play every coupled episode's imagined rollouts again (on ``workers`` processes);
    the first episode, in bundle order, whose logged frames are not the simulator's
    raises :class:`VerifyError`."""
    wrong: dict[int, list[str]] = {}
    index = {id(j): k for k, j in enumerate(jobs)}

    def on_result(job: _Coupled, value: list[str] | None, error: BaseException | None) -> bool:
        if error is not None:
            value = [f"re-simulating its imagined frames crashed: {type(error).__name__}: {error}"]
        if value:
            wrong[index[id(job)]] = value
        return True

    run_pool(_resimulate, jobs, max(1, min(workers, len(jobs))), on_result)
    if wrong:
        first = min(wrong)
        raise VerifyError("log", f"{jobs[first].rel}: {wrong[first][0]}")


def check_contents(
    root: Path,
    manifest: dict[str, Any],
    jpegs: dict[str, dict[int, str]] | None = None,
    coupled: list[_Coupled] | None = None,
) -> list[EvalResult]:
    """Schema, task-data version, coverage and consistency of the run files.

    Nothing the submitter wrote is taken on trust: every episode needs its log,
    the log's actions must be the result's, the tags, budget and ids must be
    this task data's, every episode must come from the run's agent with the
    run's result-changing settings, and each task present must have exactly
    the runs the run manifest declares (runs 0..R-1). Every log is checked record
    by record and its requests rebuilt (:func:`vical.submit.logcheck.check_log`);
    ``jpegs``, when given, receives each episode's frame JPEG digests by step, for
    the replay to check. The imagined frames of a run coupled with the ``simulator``
    world model are played again (:func:`vical.wm.couple.resimulate`) here, or, with
    ``coupled`` given, collected into it for :func:`resimulate_coupled` to do on the
    worker pool.
    """
    jpegs = {} if jpegs is None else jpegs
    run = read_run_manifest(root)
    if run.shard is not None:
        raise VerifyError(
            "coverage",
            f"the run is shard {run.shard.index}/{run.shard.count} of a sharded evaluation; "
            "merge all its shards (vical merge) and submit the merged run",
        )
    digest = manifest.get("fingerprint", {}).get("tasks_digest")
    if digest != tasks_digest() or run.tasks_digest != tasks_digest():
        raise VerifyError(
            "dataset",
            f"task data {str(digest)[:12]} is not this vical's "
            f"({tasks_digest()[:12]}); verify with the matching vical",
        )
    tasks = {t.id: t for t in all_tasks()}
    wanted = _result_settings(run.agent_settings)
    results = []
    episodes = root / "run" / "episodes"
    folders = sorted(p for p in episodes.iterdir()) if episodes.is_dir() else []
    for folder in folders:
        rel = f"run/episodes/{folder.name}"
        rpath, lpath = folder / "eval_result.json", folder / "log.jsonl"
        if not rpath.is_file():
            raise VerifyError("schema", f"{rel}: no eval_result.json")
        try:
            r = EvalResult.model_validate_json(rpath.read_bytes())
        except (ValueError, RecursionError) as e:  # ValidationError, bad UTF-8
            raise VerifyError("schema", f"{rel}/eval_result.json: {first_line(e)}") from None
        expected = episode_name(f"{r.env}/{r.variant}", r.run_index)
        if folder.name != expected or r.task_id != f"{r.env}/{r.variant}":
            raise VerifyError("schema", f"{rel}: folder and ids disagree")
        task = tasks.get(r.task_id)
        if task is None:
            raise VerifyError("coverage", f"{rel}: result for unknown task {r.task_id!r}")
        if r.infrastructure_failure:
            raise VerifyError(
                "results",
                f"{rel}: ended in an infrastructure failure ({r.failure_mode}), which is not a "
                "result; re-run it (vical eval on the same --out) before submitting",
            )
        if r.tags != task.env.tags.model_dump():
            raise VerifyError(
                "task data", f"{rel}: tags differ from this task data's (edited after the run)"
            )
        if r.max_steps != task.max_steps:
            raise VerifyError(
                "task data",
                f"{rel}: max_steps {r.max_steps}, but the task's budget is {task.max_steps}",
            )
        if r.agent != run.agent:
            raise VerifyError(
                "consistency", f"{rel}: played by agent {r.agent!r}, the run's is {run.agent!r}"
            )
        if not 0 <= r.run_index < run.runs_per_task:
            raise VerifyError(
                "consistency",
                f"{rel}: run index {r.run_index} outside the run's {run.runs_per_task} run(s)",
            )
        if not lpath.is_file():
            raise VerifyError("log", f"{rel}: no log.jsonl (every episode must carry its log)")
        facts = check_log(folder, rel, task, run, r, wanted, _result_settings)
        if facts.actions != r.actions:
            first = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(facts.actions, r.actions, strict=False))
                    if a != b
                ),
                min(len(facts.actions), len(r.actions)),
            )
            raise VerifyError(
                "log",
                f"{rel}: the log's actions differ from eval_result.json's from step {first + 1}",
            )
        if run.world_model is not None and run.world_model.get("name") == "simulator":
            # a perfect world model's imagined frames are re-derived, not taken on trust
            job = _Coupled(rel, r.task_id, tuple(r.actions), facts.imagined)
            if coupled is None:
                resimulate_coupled([job], 1)
            else:
                coupled.append(job)
        jpegs[episode_name(r.task_id, r.run_index)] = facts.frame_jpegs
        results.append(r)
    short = short_tasks(results, run.runs_per_task)
    if short:
        raise VerifyError(
            "coverage",
            f"{len(short)} task(s) without all {run.runs_per_task} run(s) the run declares: "
            f"{short[:5]}",
        )
    missing = sorted(set(tasks) - {r.task_id for r in results})
    if missing and not manifest.get("partial"):
        raise VerifyError(
            "coverage",
            f"{len(missing)} task(s) missing while the bundle claims "
            f"to be complete: {missing[:10]}",
        )
    if sorted(manifest.get("missing_tasks", [])) != missing:
        raise VerifyError(
            "coverage", "the manifest's missing-task list does not match the episodes present"
        )
    return results


class UnexpectedError(VerifyError):
    """The last resort: a check failed in a way vical did not foresee. The bundle is
    refused with one line naming the exception and where it was raised; it is a bug
    in vical all the same (tests treat it as one)."""

    def __init__(self, e: BaseException):
        import traceback

        frames = traceback.extract_tb(e.__traceback__)
        where = f" in {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        super().__init__(
            "unexpected",
            f"{type(e).__name__}{where}: {first_line(e)[:200]}; the bundle is refused "
            "(this is a bug in vical's checks: please report it)",
        )
        self.original = e


def last_resort(check: Callable[P, T]) -> Callable[P, T]:
    """``check`` under the last resort: any exception it did not turn into a verdict
    becomes a refusal (:class:`UnexpectedError`), never a traceback. A
    :class:`VerifyError`, :class:`vical.run.pool.Interrupted` and ``MemoryError`` (the
    machine's, not a verdict) pass through."""

    @functools.wraps(check)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return check(*args, **kwargs)
        except (VerifyError, Interrupted, MemoryError):
            raise
        except Exception as e:  # RecursionError included
            raise UnexpectedError(e) from e

    return guarded


@last_resort
def verify_bundle(
    bundle: Path,
    pubkeys: list[Path] | None = None,
    keyring: Path | None = DEFAULT_KEYRING,
    workers: int | None = None,
    progress: bool = True,
    shard: Shard | None = None,
    wm_cases: Path | None = None,
    accept_wm: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> Verdict:
    """Run every check; raise :class:`VerifyError` for a failed stage before replay, and
    :class:`UnexpectedError` for any exception the checks did not turn into a verdict
    (:func:`last_resort`), never a traceback.

    A world-model bundle (``kind: "wm"``) is refused unless ``accept_wm`` (its verdict
    carries no agent results, so the leaderboard must not take it for a run); with it,
    the bundle is checked by :func:`vical.submit.wmcheck.verify_wm` against ``wm_cases``
    (a case folder) or cases rebuilt from the simulators.

    With ``shard`` every check but the replay covers the whole bundle, and only that
    slice of the episodes is replayed (:func:`vical.run.shard.select_results`); the
    verdict then speaks for that slice (:mod:`vical.submit.shards` merges them).

    Episode verdicts come back in the order of the bundle's episode folders
    whatever the number of workers. ``on_progress(done, total)`` is called as replayed
    episodes come back (``vical hub``'s workers report it). A replay that crashes counts as a
    mismatch. Raises :class:`vical.run.pool.Interrupted` on SIGINT/SIGTERM
    during replay (``KeyboardInterrupt`` before it); the temporary unpack
    folder is removed either way.
    """

    with tempfile.TemporaryDirectory(prefix="vical-verify-") as tmp:
        trusted = load_keyring(pubkeys, keyring)
        # signature first, then only the files the signed manifest lists (vical.submit.unpack)
        root, manifest, signer = unpack_bundle(Path(bundle), Path(tmp), trusted)
        if bundle_kind(manifest) == "wm":
            if not accept_wm:
                raise VerifyError(
                    "manifest",
                    "this is a world-model bundle: verify it with `vical wm verify BUNDLE`",
                )
            cores = max(1, workers or os.cpu_count() or 1)
            return verify_wm(root, manifest, signer, wm_cases, Path(tmp) / "wm-cases", cores)
        jpegs: dict[str, dict[int, str]] = {}
        coupled: list[_Coupled] = []
        results = check_contents(root, manifest, jpegs, coupled)
        if coupled:
            resimulate_coupled(coupled, max(1, workers or os.cpu_count() or 1))
        if shard is not None:
            results = select_results(results, shard)
        run = read_run_manifest(root)
        condition = run_condition(run)
        declared = manifest.get("condition")
        if declared is not None and declared != condition:
            raise VerifyError(
                "consistency",
                f"the bundle declares condition {declared}, its run manifest {condition}",
            )
        payloads = [r.model_dump_json() for r in results]
        frame_jpegs = [jpegs.get(episode_name(r.task_id, r.run_index), {}) for r in results]
    names = [episode_name(r.task_id, r.run_index) for r in results]
    found: dict[int, EpisodeVerdict] = {}
    # one job per task (its episodes in bundle order), tasks in order of first appearance
    by_task: dict[str, list[tuple[int, str, dict[int, str]]]] = {}
    for index, (r, payload) in enumerate(zip(results, payloads, strict=True)):
        by_task.setdefault(r.task_id, []).append((index, payload, frame_jpegs[index]))
    workers = max(1, min(workers or os.cpu_count() or 1, len(by_task) or 1))
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(
        TextColumn("[bold]replay[/]"), BarColumn(), MofNCompleteColumn(), disable=not progress
    )

    verified: dict[int, EvalResult] = {}

    def on_result(
        job: list[tuple[int, str, dict[int, str]]],
        value: list[Replayed] | None,
        error: BaseException | None,
    ) -> bool:
        if error is not None:
            problems = [f"replay crashed: {type(error).__name__}: {error}"]
            for index, *_ in job:
                found[index] = EpisodeVerdict(names[index], False, problems)
        else:
            assert value is not None
            for index, name, problems, facts in value:
                found[index] = EpisodeVerdict(name, not problems, problems)
                verified[index] = verified_result(results[index], facts)
        bar.advance(pid, len(job))
        if on_progress is not None:
            on_progress(len(found), len(payloads))
        return True

    from vical.envs import preload
    from vical.spec import get_task

    preload([get_task(t) for t in by_task])  # check_contents made sure each task exists
    with bar:
        pid = bar.add_task("", total=len(payloads))
        if on_progress is not None:
            on_progress(0, len(payloads))
        run_pool(replay_task, list(by_task.values()), workers, on_result)
    verdicts = [found[i] for i in sorted(found)]
    ok = len(verdicts) == len(payloads) and all(v.ok for v in verdicts)
    return Verdict(
        ok=ok,
        manifest=manifest,
        episodes=verdicts,
        partial=bool(manifest.get("partial")),
        signer=signer,
        condition=condition,
        agent=run.agent,
        rankable=agent_kind(run.agent).ranked,
        machines=None if ok else both_machines(manifest),
        # what the replay and this vical's task data say, never the bundle's own claims
        results=[verified[i] for i in sorted(verified)] if ok else [],
    )


def both_machines(manifest: dict[str, Any]) -> dict[str, Any]:
    """The submitter's machine as the bundle's fingerprint records it (None in bundles
    from before it did) and this machine, with a quick self-check run here now."""
    from vical.run.doctor import run_doctor
    from vical.run.machine import machine

    fp = manifest.get("fingerprint")
    submitter = fp.get("machine") if isinstance(fp, dict) else None
    try:
        doctor = run_doctor(quick=True, cached=True).manifest_entry()
    except Exception as e:  # the verdict stands without it
        doctor = {"status": "error", "summary": f"{type(e).__name__}: {e}"}
    return {
        "submitter": submitter if isinstance(submitter, dict) else None,
        "verifier": {**machine(), "doctor": doctor},
    }


def machines_lines(machines: dict[str, Any] | None) -> list[str]:
    """Both machines of :attr:`Verdict.machines` as text for an 80-column terminal."""
    from vical.run.machine import machine_lines

    if not machines:
        return []
    return [
        "the submitter's machine (from the bundle):",
        *machine_lines(machines.get("submitter")),
        "this machine:",
        *machine_lines(machines.get("verifier")),
    ]
