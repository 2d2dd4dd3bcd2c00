"""Replay verification time of a random-reference bundle next to the run's own time.

Runs the random reference (3 runs per task by default) into a scratch folder,
bundles it, verifies it by replay, and prints both wall times and their ratio
(verify / run). Then, unless ``--no-floor``, it times the floor of any replay
check: the same decisions played again through the same simulators, one job
per task as verification does, with no frame drawn after the start, nothing
hashed and nothing compared. Both replays also report the CPU time their
decisions took with the start states left out (the start reached first, untimed):
divided by the workers, that is the least wall time any replay of the bundle could
take on this machine even if every start state cost nothing. Usage::

    python benchmarks/verify_speed.py [--tasks 'taxi,pong'] [--runs 3] [--workers 2]

Without ``--tasks`` it covers every task (the full random reference).

To compare two versions of the verifier on one bundle, make the bundle once and
time verification alone, e.g. alternating the two checkouts::

    python benchmarks/verify_speed.py --keep ref/        # run, bundle, keep ref/
    python benchmarks/verify_speed.py --bundle ref/      # verify ref/b.tar.gz only
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from vical.run import RunOptions, load_results, run_eval
from vical.run.pool import run_pool
from vical.spec import select_tasks
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.verify import verify_bundle


def simulate_task(job: list[tuple[str, list[str]]], drawn: bool = False) -> tuple[int, float]:
    """Play each episode's decisions from its start (trusted, as verification's).

    Without ``drawn`` no frame is drawn after the start and nothing is hashed;
    with it every decision's frame is drawn and hashed, as verification does.
    Returns the decisions played and the CPU seconds they took, starts excluded.
    """
    from vical.envs import make_env

    played, cpu = 0, 0.0
    for task_id, actions in job:
        env = make_env(task_id, starts="trusted")
        try:
            env.reset()
            t0 = time.process_time()
            for action in actions:
                played += 1
                if drawn:
                    _ = env.step(action).frame_sha256  # hashed on first read
                    if env.done:
                        break
                elif env.decide(action, record=False).ending is not None:
                    break
            cpu += time.process_time() - t0
        finally:
            env.close()
    return played, cpu


def verify_only(folder: Path, workers: int) -> None:
    """Verify the bundle a ``--keep`` run left in ``folder``; print the time and verdict."""
    t0 = time.perf_counter()
    v = verify_bundle(
        folder / "b.tar.gz", pubkeys=[folder / "key.pub"], workers=workers, progress=False
    )
    secs = time.perf_counter() - t0
    print(f"verify {folder / 'b.tar.gz'}: {secs:.1f} s, {'PASS' if v.ok else 'FAIL'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--no-floor", action="store_true", help="skip the simulation floor")
    ap.add_argument("--keep", type=Path, help="also keep the bundle and its key in this folder")
    ap.add_argument(
        "--bundle", type=Path, help="only verify the bundle kept in this folder by --keep"
    )
    args = ap.parse_args()
    if args.bundle is not None:
        verify_only(args.bundle, args.workers)
        return
    tasks = select_tasks(args.tasks)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        priv, pub = keygen(d / "key")
        t0 = time.perf_counter()
        run_eval(
            tasks,
            d / "run",
            options=RunOptions(
                runs=args.runs, workers=args.workers, frames="none", demos=False, progress=False
            ),
        )
        t_run = time.perf_counter() - t0
        make_bundle(d / "run", priv, d / "b.tar.gz", team="bench", partial=True)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(d / "b.tar.gz", args.keep / "b.tar.gz")
            shutil.copy(pub, args.keep / "key.pub")
        t0 = time.perf_counter()
        v = verify_bundle(d / "b.tar.gz", pubkeys=[pub], workers=args.workers, progress=False)
        t_verify = time.perf_counter() - t0
        t_floor = None
        cpu = {"floor": 0.0, "drawn": 0.0}
        if not args.no_floor:
            by_task: dict[str, list[tuple[str, list[str]]]] = {}
            for r in load_results(d / "run"):
                by_task.setdefault(r.task_id, []).append((r.task_id, list(r.actions)))
            failed: list[BaseException] = []

            def landed(kind: str) -> Callable[[object, Any, BaseException | None], bool]:
                def on_result(job: object, value: Any, error: BaseException | None) -> bool:
                    if error is not None:
                        failed.append(error)
                    else:
                        cpu[kind] += value[1]
                    return error is None

                return on_result

            t0 = time.perf_counter()
            run_pool(simulate_task, list(by_task.values()), args.workers, landed("floor"))
            t_floor = time.perf_counter() - t0
            run_pool(
                partial(simulate_task, drawn=True),
                list(by_task.values()),
                args.workers,
                landed("drawn"),
            )
            if failed:
                raise SystemExit(f"the floor replay failed: {failed[0]!r}")
    n = len(tasks) * args.runs
    print(f"episodes: {n} ({len(tasks)} tasks x {args.runs}), workers {args.workers}")
    print(f"run (random agent, no frames saved): {t_run:8.1f} s")
    print(
        f"verify (replay every episode):       {t_verify:8.1f} s  verdict "
        f"{'PASS' if v.ok else 'FAIL'}"
    )
    print(f"ratio verify / run:                  {t_verify / t_run:8.2f}")
    if t_floor is not None:
        print(f"floor (decisions simulated only):    {t_floor:8.1f} s")
        print(f"ratio floor / run:                   {t_floor / t_run:8.2f}")
        print(f"ratio verify / floor:                {t_verify / t_floor:8.2f}")
        w = args.workers
        for kind, label in (("floor", "not drawn"), ("drawn", "drawn + hashed")):
            least = cpu[kind] / w
            print(
                f"decisions only, {label + ':':16}{cpu[kind]:8.1f} CPU-s, / {w} workers "
                f"{least:6.1f} s = {least / t_run:.2f} x run"
            )


if __name__ == "__main__":
    main()
