"""The reflex screen over every task: per-environment table and the time it took.

Runs ``vical tasks screen`` over the selected tasks (all by default) on the worker
pool, or reads the JSON a previous ``vical tasks screen --json`` printed, and prints
one row per environment: tasks, how many pass the screen, how many pass by a
recorded exception (with its quote), how many fail; the best screen-blind score and
random play's mean score against the expert's, averaged over the environment's
tasks. ``--write`` puts the table between ``<!-- reflex-screen:begin -->`` and
``<!-- reflex-screen:end -->`` of benchmarks/README.md. Usage::

    python benchmarks/reflex_screen.py -j 2 --json screen.json --write
    python benchmarks/reflex_screen.py --from screen.json --write
    python benchmarks/reflex_screen.py -j 2 --rows rows.jsonl   # resumable, row by row

With ``--rows`` every screened task is appended to a JSON Lines file as it ends, keyed
by the task's own data (a task whose file changed is screened again), so an
interrupted sweep resumes where it stopped; the time reported is then the sum of the
sittings' times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- reflex-screen:begin -->", "<!-- reflex-screen:end -->"


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def table(doc: dict) -> str:
    """The Markdown table of a screen document (``vical tasks screen --json``)."""
    by_env: dict[str, list[dict]] = defaultdict(list)
    for row in doc["tasks"]:
        by_env[row["env"]].append(row)
    lines = [
        "| env | tasks | ok | exception | fail | best blind score | random mean | expert |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for env in sorted(by_env):
        rows = by_env[env]
        n = {s: sum(r["status"] == s for r in rows) for s in ("ok", "exception", "fail")}
        blind = _mean([r["best_reflex_score"] for r in rows])
        rand = _mean([s for r in rows for s in r["random_scores"]])
        experts = [r["expert_score"] for r in rows if r["expert_score"] is not None]
        expert = f"{_mean(experts):.1f}" if experts else "-"
        lines.append(
            f"| {env} | {len(rows)} | {n['ok']} | {n['exception']} | {n['fail']} | "
            f"{blind:.1f} | {rand:.1f} | {expert} |"
        )
    c = doc["counts"]
    lines.append(
        f"| **all** | {sum(c.values())} | {c['ok']} | {c['exception']} | {c['fail']} | | | |"
    )
    return "\n".join(lines)


def failures(doc: dict) -> list[str]:
    return [
        f"- `{r['task']}`: " + "; ".join(r["failures"])
        for r in doc["tasks"]
        if r["status"] == "fail"
    ]


def write(text: str) -> None:
    body = README.read_text(encoding="utf-8")
    if BEGIN not in body or END not in body:
        raise SystemExit(f"{README}: add the markers {BEGIN} and {END} first")
    head, rest = body.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def _key(task: object) -> str:
    import hashlib

    from vical.spec import SIMULATOR_VERSION

    blob = task.model_dump_json() + f"/{SIMULATOR_VERSION}"  # type: ignore[attr-defined]
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def sweep_rows(patterns: str | None, workers: int, rows: Path) -> dict:
    """Screen the tasks not yet in ``rows`` (appending each as it ends); the whole doc."""
    from vical.run.screen import MARGIN, run_screen
    from vical.spec import select_tasks, tasks_digest

    tasks = select_tasks(patterns)
    keys = {t.id: _key(t) for t in tasks}
    kept: dict[str, dict] = {}
    if rows.exists():
        for line in rows.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                if keys.get(r["task"]) == r.get("key"):
                    kept[r["task"]] = r
    todo = [t for t in tasks if t.id not in kept]
    print(f"{len(kept)} task(s) kept from {rows}, {len(todo)} to screen", file=sys.stderr)
    with rows.open("a", encoding="utf-8") as out:

        def keep(ts: object, t0: list[float] = [time.perf_counter()]) -> None:  # noqa: B006
            now = time.perf_counter()
            row = {**ts.to_json(), "key": keys[ts.task], "seconds": round(now - t0[0], 2)}  # type: ignore[attr-defined]
            t0[0] = now
            out.write(json.dumps(row) + "\n")
            out.flush()
            kept[row["task"]] = row

        if todo:
            run_screen(todo, workers=workers, on_task=keep)
    ordered = [kept[t.id] for t in tasks]
    counts = {s: sum(r["status"] == s for r in ordered) for s in ("ok", "exception", "fail")}
    return {
        "margin": MARGIN,
        "counts": counts,
        "tasks": ordered,
        "seconds": round(sum(r.get("seconds", 0.0) for r in ordered), 1),
        "workers": workers,
        "tasks_digest": tasks_digest(),
        "episodes": sum(r["policies"] for r in ordered),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=None, help="comma-separated id globs (all if omitted)")
    ap.add_argument("-j", "--workers", type=int, default=2)
    ap.add_argument("--from", dest="src", type=Path, help="read a screen JSON instead of playing")
    ap.add_argument("--json", type=Path, help="also write the screen JSON here")
    ap.add_argument("--write", action="store_true", help="put the table into benchmarks/README.md")
    ap.add_argument("--rows", type=Path, help="resumable JSON Lines of screened tasks")
    args = ap.parse_args(argv)
    if args.rows and not args.src:
        doc = sweep_rows(args.tasks, args.workers, args.rows)
        seconds = doc["seconds"]
    elif args.src:
        doc = json.loads(args.src.read_text(encoding="utf-8"))
        seconds = doc.get("seconds")
    else:
        from vical.run.screen import MARGIN, run_screen, summary
        from vical.spec import select_tasks, tasks_digest

        tasks = select_tasks(args.tasks)
        t0 = time.perf_counter()
        results, note = run_screen(tasks, workers=args.workers)
        seconds = time.perf_counter() - t0
        doc = {
            "margin": MARGIN,
            "note": note,
            "counts": summary(results),
            "tasks": [r.to_json() for r in results],
            "seconds": round(seconds, 1),
            "workers": args.workers,
            "tasks_digest": tasks_digest(),
            "episodes": sum(r.policies for r in results),
        }
        if args.json:
            args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    text = table(doc)
    if doc.get("seconds") is not None:
        text += (
            f"\n\n{doc.get('episodes', '?')} screen episodes (plus one expert replay per task) "
            f"in {doc['seconds']:.0f} s on {doc.get('workers', '?')} workers, task data "
            f"`{str(doc.get('tasks_digest', '?'))[:12]}…`."
        )
    fails = failures(doc)
    if fails:
        text += "\n\nFailing tasks:\n\n" + "\n".join(fails)
    print(text)
    if args.write:
        write(text)
    print(f"seconds: {seconds}", file=sys.stderr)
    return 1 if doc["counts"]["fail"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
