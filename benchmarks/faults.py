"""Fault figures: ``kill -9`` at random moments, and an endpoint that fails 30% of requests.

Two experiments, each a check as well as a report (the script exits 1 when an
invariant fails):

1. **kill -9.** ``vical eval`` (random agent, a few dozen fast episodes,
   ``-j 2``) is started in its own session and SIGKILLed at a moment drawn by a
   seeded RNG, alternately the whole process group and the main process alone,
   then resumed by the same command; a run that finishes before its kill
   lands closes that run folder and the next kill starts a fresh one. The last
   folder is then run to completion. Counted: *lost* episodes (a finished
   result that later vanished or changed bytes), *duplicated* ones (two folders
   for one episode, or a final set other than the expected one), *truncated*
   ones (a folder in ``episodes/`` that fails ``episode_problems``) and
   processes of the killed command still alive after the kill (orphans).
   Expected: 0 / 0 / 0 / 0.
2. **Injected faults.** An in-process ``BaselineServer`` answers a share of
   the episode requests (default 30%) with HTTP 429, HTTP 500 or a hang;
   ``vical eval --backend openai-chat --model first --request-timeout 2`` runs
   against it. Counted: episodes completed as results, episodes that ended in
   an infrastructure failure (``api_error``); the exit status must be non-zero
   exactly when there was one and the console must say how many. Then the
   server's fault rate is set to 0 and the same command re-run: it must re-run
   exactly the failed episodes, exit 0 and leave every episode a result.

    python benchmarks/faults.py                   # 20 kills, 30% faults
    python benchmarks/faults.py --quick           # a smoke run in well under a minute
    python benchmarks/faults.py --only kills --kills 50 --seed 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

from vical.run.results import EvalResult
from vical.run.runner import episode_name, episode_problems
from vical.serve import BaselineServer, parse_fault_kinds
from vical.spec import select_tasks

ENV = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
KILL_TASKS = "taxi/*,cliffwalking/*,cartpole/*"
FAULT_TASKS = "cliffwalking/*,taxi/*"
ORPHAN_WAIT = 2.0  # seconds a killed command's processes get to disappear


def _vical(*args: str) -> list[str]:
    return [sys.executable, "-m", "vical.cli", *args]


def _expected(pattern: str, runs: int) -> set[str]:
    return {episode_name(t.id, k) for t in select_tasks(pattern) for k in range(runs)}


# ---------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------
def _live_processes(session: int, out: Path) -> list[int]:
    """Live (non-zombie) processes in ``session`` or whose command line names ``out``."""
    pids = []
    needle = str(out).encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, sid = fields[0], int(fields[3])
        if state not in ("Z", "X") and (sid == session or needle in cmd):
            pids.append(int(d.name))
    return pids


def _orphans_after_kill(proc: subprocess.Popen, out: Path) -> int:
    """How many processes of a killed command outlive it by ``ORPHAN_WAIT`` seconds;
    any found are then killed (they are this script's own descendants)."""
    deadline = time.monotonic() + ORPHAN_WAIT
    alive = _live_processes(proc.pid, out)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = _live_processes(proc.pid, out)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(alive)


# ---------------------------------------------------------------------------
# 1. kill -9 at random moments
# ---------------------------------------------------------------------------
@dataclass
class KillFigures:
    episodes: int = 0
    clean_wall: float = 0.0
    kills: Counter = field(default_factory=Counter)  # variant -> count
    folders: int = 0
    lost: set[str] = field(default_factory=set)
    duplicated: set[str] = field(default_factory=set)
    truncated: set[str] = field(default_factory=set)
    orphans: int = 0
    bad_exits: list[str] = field(default_factory=list)
    partial_at_kill: int = 0  # kills that cut a new episode short (left in .partial/)
    idle_at_kill: int = 0  # kills before the run had written anything new
    finished_at_kill: list[int] = field(default_factory=list)
    moments: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.truncated or self.orphans or self.bad_exits
        )


def _inspect(out: Path, tag: str, seen: dict[str, bytes], figs: KillFigures) -> set[str]:
    """Check a run folder after a kill or a finished run; returns the whole episodes."""
    whole: set[str] = set()
    owner: dict[tuple[str, int], str] = {}
    eps = out / "episodes"
    for d in sorted(eps.iterdir()) if eps.is_dir() else ():
        key = f"{tag}/{d.name}"
        if episode_problems(d):
            figs.truncated.add(key)
            continue
        data = (d / "eval_result.json").read_bytes()
        r = EvalResult.model_validate_json(data)
        ident = (r.task_id, r.run_index)
        if ident in owner:
            figs.duplicated.add(key)
        owner[ident] = d.name
        if seen.setdefault(d.name, data) != data:
            figs.lost.add(key)  # a finished result was redone
        whole.add(d.name)
    for name in seen:
        if name not in whole:
            figs.lost.add(f"{tag}/{name}")
    for aside in ("damaged", "failed-attempts"):  # nothing of a random run belongs there
        for d in (out / aside).iterdir() if (out / aside).is_dir() else ():
            figs.truncated.add(f"{tag}/{aside}/{d.name}")
    return whole


def _partial_entries(out: Path) -> set[str]:
    partial = out / ".partial"
    return {p.name for p in partial.iterdir()} if partial.is_dir() else set()


def run_kills(args: argparse.Namespace, tmp: Path) -> KillFigures:
    expected = _expected(args.kill_tasks, args.kill_runs)
    figs = KillFigures(episodes=len(expected))

    def command(out: Path) -> list[str]:
        return _vical(
            "eval", "--tasks", args.kill_tasks, "--runs", str(args.kill_runs),
            "--out", str(out), "-j", str(args.workers), "--no-report",
        )  # fmt: skip

    # an uninterrupted run: the time window the kill moments are drawn from
    t0 = time.perf_counter()
    clean = subprocess.run(
        command(tmp / "clean"), env=ENV, capture_output=True, text=True, timeout=600
    )
    figs.clean_wall = time.perf_counter() - t0
    if clean.returncode != 0:
        figs.bad_exits.append(f"uninterrupted run exited {clean.returncode}")
    if _inspect(tmp / "clean", "clean", {}, figs) != expected:
        figs.duplicated.add("clean: episode set differs from the expected one")

    rng = random.Random(args.seed)
    seen: dict[str, bytes] = {}
    out = tmp / "k0"
    attempts = 0
    while sum(figs.kills.values()) < args.kills:
        attempts += 1
        if attempts > 20 * args.kills:
            figs.bad_exits.append("the runs kept finishing before their kill; gave up")
            break
        variant = "process group" if sum(figs.kills.values()) % 2 == 0 else "main process"
        moment = rng.uniform(0.05, figs.clean_wall)
        partial_before = _partial_entries(out)
        # stderr goes to a file, not a pipe: an orphaned worker holding a pipe open
        # would block this script instead of being counted
        log = tmp / f"{out.name}.stderr"
        with open(log, "ab") as stderr:
            proc = subprocess.Popen(
                command(out), env=ENV, stdout=subprocess.DEVNULL, stderr=stderr,
                start_new_session=True,
            )  # fmt: skip
        try:
            proc.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            pass
        else:  # finished before the kill: close this folder, the next kill starts a new one
            if proc.returncode != 0:
                figs.bad_exits.append(f"{out.name}: resume exited {proc.returncode} (see {log})")
            if _inspect(out, out.name, seen, figs) != expected:
                figs.duplicated.add(f"{out.name}: final episode set differs from the expected one")
            figs.folders += 1
            out, seen = tmp / f"k{figs.folders}", {}
            continue
        if variant == "process group":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait()
        figs.kills[variant] += 1
        figs.moments.append(moment)
        figs.orphans += _orphans_after_kill(proc, out)
        cut = bool(_partial_entries(out) - partial_before)
        n_before = len(seen)
        figs.finished_at_kill.append(len(_inspect(out, out.name, seen, figs)))
        figs.partial_at_kill += int(cut)
        figs.idle_at_kill += int(not cut and len(seen) == n_before)
    done = subprocess.run(command(out), env=ENV, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        figs.bad_exits.append(f"{out.name}: final resume exited {done.returncode}")
    if _inspect(out, out.name, seen, figs) != expected:
        figs.duplicated.add(f"{out.name}: final episode set differs from the expected one")
    partial = out / ".partial"
    if partial.is_dir() and any(partial.iterdir()):
        figs.truncated.add(f"{out.name}: .partial/ not empty after the final run")
    figs.folders += 1
    return figs


def print_kills(args: argparse.Namespace, f: KillFigures) -> None:
    n = sum(f.kills.values())
    print(
        f"\n## kill -9 at random moments (seed {args.seed})\n\n"
        f"{n} kills ({f.kills['process group']} of the process group, "
        f"{f.kills['main process']} of the main process alone), each followed by a resume; "
        f"{f.folders} run folder(s) of {f.episodes} episodes ({args.kill_tasks} x "
        f"{args.kill_runs}, -j {args.workers}), each run to completion at the end."
    )
    if f.moments:
        print(
            f"uninterrupted run {f.clean_wall:.1f} s; kill moments {min(f.moments):.2f}-"
            f"{max(f.moments):.2f} s after start; whole episodes in the folder at a kill "
            f"{min(f.finished_at_kill)}-{max(f.finished_at_kill)}; "
            f"{f.partial_at_kill} kill(s) cut an episode short (left in .partial/, "
            f"cleared by the resume), {f.idle_at_kill} landed before the run had written "
            "anything (start-up, resume scan)"
        )
    print("\n| figure | measured | expected |\n|---|---:|---:|")
    rows = [
        ("lost episodes", len(f.lost)),
        ("duplicated episodes", len(f.duplicated)),
        ("truncated episodes", len(f.truncated)),
        ("orphaned processes after a kill", f.orphans),
        ("resumes that failed", len(f.bad_exits)),
    ]
    for label, value in rows:
        print(f"| {label} | {value} | 0 |")
    for what, items in (
        ("lost", f.lost),
        ("duplicated", f.duplicated),
        ("truncated", f.truncated),
        ("exit", f.bad_exits),
    ):
        for item in sorted(items):
            print(f"  {what}: {item}")


# ---------------------------------------------------------------------------
# 2. injected faults
# ---------------------------------------------------------------------------
@dataclass
class FaultFigures:
    episodes: int = 0
    completed_first: int = 0
    infra_first: int = 0
    exit_first: int = 0
    wall_first: float = 0.0
    retried: int = 0
    completed_after: int = 0
    unaccounted: int = 0
    exit_rerun: int = 0
    wall_rerun: float = 0.0
    requests: int = 0
    faults: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _results(out: Path) -> dict[str, tuple[bytes, EvalResult]]:
    found = {}
    for p in sorted((out / "episodes").glob("*/eval_result.json")):
        data = p.read_bytes()
        found[p.parent.name] = (data, EvalResult.model_validate_json(data))
    return found


def run_faults(args: argparse.Namespace, tmp: Path) -> FaultFigures:
    expected = _expected(args.fault_tasks, args.fault_runs)
    figs = FaultFigures(episodes=len(expected))
    out = tmp / "faults"
    server = BaselineServer(
        seed=args.seed,
        fault_rate=args.fault_rate,
        fault_kinds=parse_fault_kinds(args.fault_kinds),
        retry_after=args.retry_after,
    )
    with server:
        cmd = _vical(
            "eval", "--backend", "openai-chat", "--endpoint", server.openai_base_url,
            "--model", "first", "--request-timeout", str(args.request_timeout),
            "--tasks", args.fault_tasks, "--runs", str(args.fault_runs), "--out", str(out),
            "-j", str(args.workers), "--no-report", "--max-consecutive-errors", "0",
        )  # fmt: skip
        t0 = time.perf_counter()
        first = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=3600)
        figs.wall_first = time.perf_counter() - t0
        figs.exit_first = first.returncode
        with server.lock:
            figs.requests = len(server.requests)
            figs.faults = Counter(e["fault"] for e in server.requests if e.get("fault"))
        before = _results(out)
        infra = {n for n, (_, r) in before.items() if r.infrastructure_failure}
        completed = {n for n, (_, r) in before.items() if not r.infrastructure_failure}
        figs.infra_first, figs.completed_first = len(infra), len(completed)
        if set(before) != expected:
            figs.problems.append(
                f"first pass: {len(expected - set(before))} episode(s) without a folder, "
                f"{len(set(before) - expected)} unexpected"
            )
        if (first.returncode != 0) != bool(infra):
            figs.problems.append(
                f"first pass exited {first.returncode} with {len(infra)} infrastructure failure(s)"
            )
        said = f"{len(infra)} episode(s) ended in an infrastructure failure"
        if infra and said not in first.stderr:
            figs.problems.append(f"first pass: the console does not say {said!r}")
        if not infra and "infrastructure failure" in first.stderr:
            figs.problems.append("first pass: the console reports a failure that did not happen")
        shown = set(re.findall(r"infrastructure failure (\S+):", first.stderr))
        if not shown <= infra or (infra and not shown):
            figs.problems.append(
                "first pass: the console names other episodes than the failed ones"
            )

        server.fault_rate = 0.0
        t0 = time.perf_counter()
        rerun = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=3600)
        figs.wall_rerun = time.perf_counter() - t0
        figs.exit_rerun = rerun.returncode
    after = _results(out)
    redone = {n for n, (data, _) in after.items() if before.get(n, (None,))[0] != data}
    figs.retried = len(redone)
    results = {n for n, (_, r) in after.items() if not r.infrastructure_failure}
    figs.completed_after = len(results & expected)
    figs.unaccounted = len(expected - results)
    if redone != infra:
        figs.problems.append(
            f"re-run redid {sorted(redone - infra)} beyond, and missed {sorted(infra - redone)} "
            "of, the infrastructure failures"
        )
    aside = {p.name.rsplit(".", 1)[0] for p in (out / "failed-attempts").glob("*")}
    if aside != infra:
        figs.problems.append(f"failed-attempts/ holds {sorted(aside)}, not the failed episodes")
    if rerun.returncode != 0:
        figs.problems.append(f"re-run exited {rerun.returncode}: {rerun.stderr[-300:]}")
    if figs.unaccounted or set(after) != expected:
        figs.problems.append(f"after the re-run {figs.unaccounted} episode(s) are not results")
    if f"{len(infra)} episodes run" not in rerun.stdout:
        figs.problems.append(f"re-run: the console does not say {len(infra)} episodes run")
    if infra and f"retried {len(infra)} episode(s)" not in rerun.stderr:
        figs.problems.append(f"re-run: the console does not say retried {len(infra)} episode(s)")
    for name in expected:
        problems = episode_problems(out / "episodes" / name)
        if problems:
            figs.problems.append(f"{name}: {'; '.join(problems)}")
    return figs


def print_faults(args: argparse.Namespace, f: FaultFigures) -> None:
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(f.faults.items())) or "none"
    print(
        f"\n## injected faults ({args.fault_rate:.0%} of episode requests: {args.fault_kinds}; "
        f"Retry-After {args.retry_after:g} s, --request-timeout {args.request_timeout:g} s)\n\n"
        f"{args.fault_tasks} x {args.fault_runs}, model 'first', -j {args.workers}, "
        f"--max-consecutive-errors 0; first pass: {f.requests} requests, faults injected: "
        f"{kinds}; exit status {f.exit_first} then {f.exit_rerun} on the re-run"
    )
    rows = [
        ("episodes", f.episodes),
        ("completed, first pass", f.completed_first),
        ("infrastructure failures, first pass", f.infra_first),
        ("retried on the re-run (fault rate 0)", f.retried),
        ("completed after the re-run", f.completed_after),
        ("unaccounted", f.unaccounted),
        ("wall time, first pass", f"{f.wall_first:.1f} s"),
        ("wall time, re-run", f"{f.wall_rerun:.1f} s"),
    ]
    print("\n| figure | measured |\n|---|---:|")
    for label, value in rows:
        print(f"| {label} | {value} |")
    for p in f.problems:
        print(f"  problem: {p}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("kills", "faults"), help="run one experiment only")
    ap.add_argument("--quick", action="store_true", help="few kills and tasks (a smoke run)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments and faults")
    ap.add_argument("--workers", "-j", type=int, default=2, help="episodes in flight")
    ap.add_argument("--kills", type=int, help="SIGKILLs to deliver (default 20; quick 3)")
    ap.add_argument("--kill-tasks", help=f"task globs of the kill runs (default {KILL_TASKS})")
    ap.add_argument("--kill-runs", type=int, help="runs per task of the kill runs (default 3)")
    ap.add_argument("--fault-tasks", help=f"task globs of the fault run (default {FAULT_TASKS})")
    ap.add_argument("--fault-runs", type=int, help="runs per task of the fault run (default 2)")
    ap.add_argument("--fault-rate", type=float, default=0.3, help="share of requests failed")
    ap.add_argument("--fault-kinds", default="429,500,hang", help="fault kinds to draw from")
    ap.add_argument("--retry-after", type=float, default=0.2, help="Retry-After of a 429 (s)")
    ap.add_argument(
        "--request-timeout", type=float, help="--request-timeout (default 2 s; quick 1)"
    )
    ap.add_argument("--keep", type=Path, help="keep the run folders under this directory")
    args = ap.parse_args(argv)
    quick = args.quick
    args.kills = args.kills if args.kills is not None else (3 if quick else 20)
    args.kill_tasks = args.kill_tasks or ("taxi/*,cliffwalking/*" if quick else KILL_TASKS)
    args.kill_runs = args.kill_runs or (1 if quick else 3)
    args.fault_tasks = args.fault_tasks or ("cliffwalking/base,cliffwalking/ledge-3" if quick
                                            else FAULT_TASKS)  # fmt: skip
    args.fault_runs = args.fault_runs or (1 if quick else 2)
    args.request_timeout = args.request_timeout or (1.0 if quick else 2.0)

    if args.keep and args.keep.exists() and any(args.keep.iterdir()):
        ap.error(f"--keep {args.keep} is not empty; the runs must start from nothing")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"# vical fault benchmark, {time.strftime('%Y-%m-%d %H:%M')}, "
        f"{os.cpu_count()} cores, load average {load}"
    )
    ok = True
    with tempfile.TemporaryDirectory(prefix="vical-faults-") as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        if args.only in (None, "kills"):
            kills = run_kills(args, tmp / "kills")
            print_kills(args, kills)
            ok &= kills.ok
        if args.only in (None, "faults"):
            faults = run_faults(args, tmp)
            print_faults(args, faults)
            ok &= faults.ok
    print(f"\n{'all invariants hold' if ok else 'INVARIANT FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
