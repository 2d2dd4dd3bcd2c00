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
   the claims. The verdict's results are rebuilt from the replay and this
   vical's task data (:func:`verified_result`): the leaderboard reads those,
   never a field the submitter wrote.

Each task's episodes are replayed by one worker with one simulator, whose start
state is saved once and restored for the others (:func:`_replay_task`; an
episode that disagrees with its claims is replayed again from replayed starts
before its verdict). Replay runs through :func:`vical.run.pool.run_pool`: Ctrl-C (SIGINT) or
SIGTERM raises :class:`vical.run.pool.Interrupted` within a few seconds with
no replay worker left running. Verification only reads the bundle, so an
interrupted check leaves nothing behind and can simply be run again.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vical.outcomes import (
    AGENT_FAILURES,
    INFRASTRUCTURE_FAILURES,
    episode_failure,
    episode_name,
    short_tasks,
)
from vical.run.pool import run_pool
from vical.run.results import EvalResult, RunManifest
from vical.run.shard import Shard, select_results
from vical.spec import all_tasks, tasks_digest
from vical.submit.bundle import run_condition
from vical.submit.keys import DEFAULT_KEYRING as DEFAULT_KEYRING  # re-exported: the keyring
from vical.submit.keys import key_id, load_public
from vical.submit.kinds import agent_kind, bundle_kind, world_model_kind
from vical.submit.logcheck import check_log
from vical.submit.unpack import VerifyError as VerifyError  # re-exported: what verify raises
from vical.submit.unpack import safe_extract as safe_extract  # re-exported for tools and tests
from vical.submit.unpack import unpack_bundle

if TYPE_CHECKING:
    from vical.wm.couple import CheckedRollout


@dataclass
class EpisodeVerdict:
    episode: str
    ok: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    ok: bool
    manifest: dict[str, Any]
    episodes: list[EpisodeVerdict]
    partial: bool
    signer: str
    results: list[EvalResult] = field(default_factory=list)
    # the ablation condition the run declares and its logs were checked against:
    # {"rules": "basic" | "detailed", "demos": bool}
    condition: dict[str, Any] | None = None
    # the run's agent (a kind of vical.submit.kinds.AGENT_KINDS; None for a world-model
    # bundle) and whether its runs can ever be ranked (the references never are)
    agent: str | None = None
    rankable: bool = False
    # set when an episode's replay disagrees with its claims: the submitter's machine
    # (from the bundle's fingerprint, None when it has none) and this one's, each with
    # its self-check, so both sides can see whether the machines explain it
    machines: dict[str, Any] | None = None

    @property
    def mismatches(self) -> list[EpisodeVerdict]:
        return [e for e in self.episodes if not e.ok]


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
# what only the agent can end an episode with (infrastructure failures are not results)
AGENT_ENDINGS = AGENT_FAILURES - INFRASTRUCTURE_FAILURES


def read_run_manifest(root: Path) -> RunManifest:
    """The bundle's run manifest, within the bounds any honest run has, naming an agent
    and world model of a declared kind (:mod:`vical.submit.kinds`)."""
    try:
        run = RunManifest.model_validate_json((root / "run" / "manifest.json").read_bytes())
    except (OSError, ValueError, RecursionError) as e:  # ValidationError, bad UTF-8
        raise VerifyError("schema", f"run/manifest.json: {_first_line(e)}") from None
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
            raise VerifyError("schema", f"{rel}/eval_result.json: {_first_line(e)}") from None
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


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return " ".join(text[:3])[:300] if text else type(e).__name__


# -- 6. replay ---------------------------------------------------------------
def replay_one(
    result_json: str, starts: str = "replayed", jpegs: dict[int, str] | None = None
) -> tuple[str, list[str], dict[str, Any]]:
    """Replay one episode's actions.

    Returns (episode name, problems, what the simulator says: score, passed,
    outcome, failure_mode, steps, frame_hashes). Only that third part, with
    this vical's task data, reaches the leaderboard. ``starts`` is how the
    environment reaches its start state (:func:`vical.envs.make_env`); the
    default replays it, the slow path that needs no snapshot at all. ``jpegs``: the
    sha256 of the JPEG each logged request showed for the frame of a step
    (:func:`vical.submit.logcheck.check_log`); each must be the protocol's JPEG of
    the replayed frame.
    """
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    from vical.envs import make_env
    from vical.envs.core import frame_sha256

    r = EvalResult.model_validate_json(result_json)
    name = episode_name(r.task_id, r.run_index)
    problems = []
    env = make_env(r.task_id, starts=starts)
    jpegs = jpegs or {}
    shown: list[str] = []

    def check_jpeg(step: int, frame: Any) -> None:
        want = jpegs.get(step)
        if want is not None and not shown:
            from vical.agent.protocol import encode_jpeg, sha256_hex

            if sha256_hex(encode_jpeg(frame)) != want:
                shown.append(f"the request of step {step} showed another frame than the replay's")

    try:
        start_frame = env.reset()
        hashes = [frame_sha256(start_frame)]
        check_jpeg(0, start_frame)
        played = 0
        for i, a in enumerate(r.actions):
            if env.done:
                problems.append(f"episode ended before logged action {i + 1}")
                break
            try:
                s = env.step(a)
                hashes.append(s.frame_sha256)
                if i + 1 in jpegs:
                    check_jpeg(i + 1, s.frame)
            except ValueError as e:
                problems.append(f"action {i + 1} {a!r} rejected: {e}")
                break
            played += 1
        problems += shown
        if hashes != r.frame_hashes:
            first = next(
                (i for i, (x, y) in enumerate(zip(hashes, r.frame_hashes, strict=False)) if x != y),
                min(len(hashes), len(r.frame_hashes)),
            )
            problems.append(f"frame hashes differ from frame {first}")
        score, passed, outcome = env.score(), env.passed(), env.outcome
        if score != r.score:
            problems.append(f"score claimed {r.score}, replay gives {score}")
        if passed != r.passed:
            problems.append(f"pass claimed {r.passed}, replay gives {passed}")
        if env.done:
            failure = episode_failure(outcome, passed)
            if outcome != r.outcome:
                problems.append(f"outcome claimed {r.outcome}, replay gives {outcome}")
            if r.failure_mode in AGENT_ENDINGS:
                problems.append(f"failure {r.failure_mode} claimed, but the episode ended itself")
        else:
            # only the agent may end an episode before the simulator does
            failure = r.failure_mode if r.failure_mode in AGENT_ENDINGS else None
            if failure is None:
                problems.append(
                    f"the episode stops after {played} actions without ending and without an "
                    "agent failure"
                )
        if failure != r.failure_mode:
            problems.append(f"failure mode claimed {r.failure_mode}, replay gives {failure}")
        if r.steps != len(r.actions):
            problems.append(f"steps {r.steps} but {len(r.actions)} actions logged")
        facts = {
            "score": score,
            "passed": passed,
            "outcome": outcome,
            "failure_mode": failure,
            "steps": played,
            "frame_hashes": hashes,
        }
    finally:
        env.close()
    return name, problems, facts


def verified_result(claimed: EvalResult, facts: dict[str, Any]) -> EvalResult:
    """The result the leaderboard may use: ids and actions from the bundle, every
    scored field (score, pass, outcome, failure mode, steps, tags, budget) from the
    replay and this vical's task data."""
    from vical.spec import get_task

    task = get_task(claimed.task_id)
    return claimed.model_copy(
        update={
            **facts,
            "env": task.env.env,
            "variant": task.variant.variant,
            "tags": task.env.tags.model_dump(),
            "max_steps": task.max_steps,
            "actions": claimed.actions[: facts["steps"]],
        }
    )


_Replayed = tuple[int, str, list[str], dict[str, Any]]


def _replay_task(job: list[tuple[Any, ...]]) -> list[_Replayed]:
    """Replay the numbered episodes of one task, in one process and one simulator.

    The task's start state is saved at its first reset and restored for the
    others without the snapshot check (``starts="trusted"``); an episode whose
    replay disagrees with its claims is replayed again from replayed starts, and
    only that second replay decides its verdict. A bundle that matches costs one
    replayed start per task; a mismatch costs one more, never a wrong verdict.
    """
    out = []
    for index, result_json, *rest in job:
        jpegs = rest[0] if rest else None
        name, problems, facts = replay_one(result_json, starts="trusted", jpegs=jpegs)
        if problems:
            name, problems, facts = replay_one(result_json, starts="replayed", jpegs=jpegs)
        out.append((index, name, problems, facts))
    return out


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
            f"{type(e).__name__}{where}: {_first_line(e)[:200]}; the bundle is refused "
            "(this is a bug in vical's checks: please report it)",
        )
        self.original = e


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
    """Run every check (:func:`check_bundle`); any exception the checks did not turn
    into a verdict becomes a refusal (:class:`UnexpectedError`), never a traceback."""
    from vical.run.pool import Interrupted

    try:
        return check_bundle(
            bundle, pubkeys, keyring, workers, progress, shard, wm_cases, accept_wm, on_progress
        )
    except (VerifyError, Interrupted, MemoryError):  # memory: the machine's, not a verdict
        raise
    except Exception as e:  # RecursionError included
        raise UnexpectedError(e) from e


def check_bundle(
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
    """Run every check; raise :class:`VerifyError` for a failed stage before replay.

    A world-model bundle (``kind: "wm"``) is refused unless ``accept_wm`` (its verdict
    carries no agent results, so the leaderboard must not take it for a run); with it,
    the bundle is checked by :func:`verify_wm` against ``wm_cases`` (a case folder)
    or cases rebuilt from the simulators.

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
        value: list[_Replayed] | None,
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
        run_pool(_replay_task, list(by_task.values()), workers, on_result)
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
    from vical.run.doctor import machine, run_doctor

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
    from vical.run.doctor import machine_lines

    if not machines:
        return []
    return [
        "the submitter's machine (from the bundle):",
        *machine_lines(machines.get("submitter")),
        "this machine:",
        *machine_lines(machines.get("verifier")),
    ]


def wm_case_budget(ids: Any, rebuilt: bool) -> dict[str, list[int]]:
    """The case numbers of a world-model run's case ids, by scenario, checked before any
    work: each id is ``<scenario>/<number>``, none twice, and, when the cases are rebuilt
    from the simulators, of a published scenario and within the published case set
    (:data:`vical.wm.cases.CONTEXTS` contexts of :data:`vical.wm.cases.BRANCHES` cases
    per scenario), so the contexts rebuilt are at most the published ones."""
    import re

    from vical.wm.cases import BRANCHES, CONTEXTS, SCENARIOS

    known = {s.name for s in SCENARIOS}
    limit = CONTEXTS * BRANCHES
    if not ids or (rebuilt and len(ids) > len(known) * limit):
        raise VerifyError("schema", f"wm: {len(ids)} cases, not between 1 and {len(known) * limit}")
    out: dict[str, list[int]] = {}
    seen: set[str] = set()
    for cid in ids:
        m = re.fullmatch(r"([A-Za-z0-9_.-]{1,80})/(\d{1,6})", cid) if isinstance(cid, str) else None
        if m is None:
            raise VerifyError("schema", f"wm: case id {str(cid)[:40]!r} is not <scenario>/<number>")
        if rebuilt and m.group(1) not in known:  # (a case folder may hold other scenarios)
            raise VerifyError("schema", f"wm: case {cid}: unknown scenario {m.group(1)!r}")
        if cid in seen:
            raise VerifyError("schema", f"wm: case {cid} listed twice")
        seen.add(cid)
        number = int(m.group(2))
        if rebuilt and number >= limit:
            raise VerifyError(
                "budget",
                f"wm: case {cid} is beyond the published {limit} cases of its scenario; "
                "refused before rebuilding any context (pass the case folder it was made on)",
            )
        out.setdefault(m.group(1), []).append(number)
    return out


def verify_wm(
    root: Path,
    manifest: dict[str, Any],
    signer: str,
    cases_dir: Path | None,
    scratch: Path,
    workers: int = 1,
) -> Verdict:
    """Verify a world-model bundle: re-derive each case's truth and re-score the predictions.

    ``cases_dir``: the case folder to check against (each case must be the one the
    run was made on); without one, the run's scenarios are rebuilt from the
    simulators into ``scratch``, as far as the run's cases reach. One verdict per case; the signed summary must be
    the run's ``summary.json``, which must re-derive from the re-computed scores.
    """
    from vical.bounded import MemberError, parse_json
    from vical.wm.cases import BRANCHES, build
    from vical.wm.evaluate import MANIFEST, SUMMARY, rescore

    run = root / "wm"
    try:
        run_manifest = parse_json((run / MANIFEST).read_bytes())
        claimed = parse_json((run / SUMMARY).read_bytes())
    except OSError as e:
        raise VerifyError("schema", f"world-model run files unreadable: {e}") from None
    except MemberError as e:
        raise VerifyError("schema", f"wm/{MANIFEST} or wm/{SUMMARY}: {e}") from None
    if not isinstance(run_manifest, dict) or not isinstance(run_manifest.get("cases"), list):
        raise VerifyError("schema", f"wm/{MANIFEST}: no list of cases")
    ids = run_manifest["cases"]
    if manifest.get("summary") != claimed:
        raise VerifyError("consistency", f"the signed summary is not wm/{SUMMARY}")
    numbers = wm_case_budget(ids, rebuilt=cases_dir is None)
    if cases_dir is None:
        names = sorted(numbers)
        # only as many contexts as the run's cases reach (case number // branches), within
        # the published case set: the work is known before any of it is done
        contexts = 1 + max(n // BRANCHES for ns in numbers.values() for n in ns)
        try:
            build(scratch, names, contexts=contexts, workers=workers, pool=run_pool)
        except RuntimeError as e:
            raise VerifyError(
                "consistency", f"the cases cannot be rebuilt here: {_first_line(e)}"
            ) from None
        cases_dir = scratch
    try:
        problems = rescore(run, cases_dir, workers=workers, pool=run_pool)
    except (ValueError, OSError, KeyError, TypeError) as e:
        raise VerifyError("predictions", f"wm: {_first_line(e)}") from None
    episodes = []
    for cid in ids:
        mine = [p for p in problems if p.startswith(f"{cid}:")]
        episodes.append(EpisodeVerdict(cid, not mine, mine))
    general = [p for p in problems if not any(p.startswith(f"{c}:") for c in ids)]
    if general:
        episodes.append(EpisodeVerdict("wm", False, general))
    return Verdict(
        ok=not problems,
        manifest=manifest,
        episodes=episodes,
        partial=False,
        signer=signer,
    )
