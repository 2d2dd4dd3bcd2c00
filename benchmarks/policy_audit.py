"""Policy audit: what trivial policies and the experts achieve on every task.

Per environment, over all of its tasks, it plays

* the random reference three times per task (uniform over the legal actions, seeded
  per episode as ``vical baseline random`` seeds it: run seed 0, run indexes 0-2);
* every constant action (the same action at every decision), once per task;
* the environment's scripted or search expert where one exists (the policies the
  demo recipes and the baseline server use), once per task,

and records each episode's score, pass flag, length and ending. Early success and
early death are counted as Table 28 counts them: the pass holds (or not, for a death)
and the episode ended strictly before its decision budget.

Results go to a JSON file (every episode) and a Markdown table between the markers
``<!-- policy-audit:begin -->`` and ``<!-- policy-audit:end -->`` of
``docs/policy-audit.md``; the rest of that document (the decisions taken on what the
table shows) is written by hand and left alone. Usage::

    python benchmarks/policy_audit.py                      # every environment
    python benchmarks/policy_audit.py --envs battlezone,highway --policies trivial
    python benchmarks/policy_audit.py --policies expert --expert-timeout 120 --json e.json
    python benchmarks/policy_audit.py --merge t.json e.json   # the table from saved episodes

The full audit (about 4,000 episodes plus the experts) takes tens of minutes on
two cores; run it in the background.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "policy-audit.md"
BEGIN, END = "<!-- policy-audit:begin -->", "<!-- policy-audit:end -->"
RANDOM_RUNS = 3
RUN_SEED = 0  # ``vical baseline random``'s default run seed

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


@dataclass(frozen=True)
class Episode:
    env: str
    task: str
    policy: str  # "random", "const:<action>" or "expert"
    run: int
    steps: int
    budget: int
    outcome: str | None
    passed: bool
    score: float
    error: str | None = None
    actions: tuple[str, ...] = ()  # kept for the expert only (the expert reference run)
    variant: str = ""  # the expert's variant that played this episode

    @property
    def early_success(self) -> bool:
        return self.passed and self.steps < self.budget and self.outcome is not None

    @property
    def early_death(self) -> bool:
        return (
            not self.passed
            and self.steps < self.budget
            and self.outcome == "Terminated"
            and self.error is None
        )


# ---------------------------------------------------------------------------
# playing
# ---------------------------------------------------------------------------
def play(task, pick: Callable, label: str, run: int = 0) -> Episode:
    """Play ``pick(env, step_index)`` from the task's start to the end of the episode."""
    from vical.envs import make_env

    env = make_env(task)
    try:
        env.reset()
        step = None
        i = 0
        played: list[str] = []
        while not env.done:
            action = pick(env, i)
            played.append(action)
            step = env.step(action)
            i += 1
        assert step is not None
        return Episode(
            task.env.env,
            task.id,
            label,
            run,
            step.index,
            task.max_steps,
            step.outcome,
            bool(step.passed),
            float(step.score),
            actions=tuple(played) if label == "expert" else (),
        )
    finally:
        env.close()


def replay(task, actions: list[str], label: str) -> Episode:
    """Play a fixed action list; NOOP-fill after it if the episode is still running."""
    from vical.agent.plans import fill_action

    acts = list(actions)
    fill = fill_action(task)  # what the plan agent plays after a plan, too

    def pick(env, i: int) -> str:
        return acts[i] if i < len(acts) else fill

    return play(task, pick, label)


def random_episode(task, run: int) -> Episode:
    from vical.run.runner import episode_seed

    rng = random.Random(episode_seed(RUN_SEED, task.id, run))
    names = list(task.env.actions)
    return play(task, lambda env, i: rng.choice(names), "random", run)


def constant_episode(task, action: str) -> Episode:
    return play(task, lambda env, i: action, f"const:{action}")


# ---------------------------------------------------------------------------
# experts: an action list or a per-decision policy for a task, or None
# ---------------------------------------------------------------------------
def _policy_expert(fn: Callable) -> Callable:
    return lambda task: ("policy", fn)


Candidate = tuple[str, Callable]  # (variant name, expert(task) -> ("actions"|"policy", ...))


def _family_experts(family: str) -> tuple[str, list[Candidate]] | None:
    """The expert every game of a family shares (Toy Text: breadth-first search; MiniGrid:
    the planner's route), named, or None."""
    from vical.demos.experts import bfs_expert

    if family == "toytext":
        plan = ("bfs", lambda task: ("actions", getattr(bfs_expert(task), "actions", [])))
        return "breadth-first search, shortest passing plan", [plan]
    if family == "minigrid":
        from vical.authoring.experts import planner_route

        route = ("planner", lambda task: ("actions", planner_route(task)))
        return "MiniGrid planner, shortest route", [route]
    return None


def _own_experts(mod) -> list[Candidate]:
    """A recipe module's own audit players: ``AUDIT_POLICIES`` (variant, pick(env) ->
    action) then ``AUDIT_PLANS`` (variant, task -> actions)."""
    policies = [
        (name, _policy_expert(lambda env, i, pick=pick: pick(env)))
        for name, pick in getattr(mod, "AUDIT_POLICIES", [])
    ]
    plans = [
        (name, lambda task, plan=plan: ("actions", plan(task)))
        for name, plan in getattr(mod, "AUDIT_PLANS", [])
    ]
    return policies + plans


def _later_candidates(mod) -> list[Candidate]:
    """Players tried after the recipe's own expert: the recipe module's ``EXTRA_EXPERTS``
    (variant name, task -> actions), where it has them."""

    def actions(fn: Callable) -> Callable:
        return lambda task: ("actions", fn(task))

    return [(name, actions(fn)) for name, fn in getattr(mod, "EXTRA_EXPERTS", [])]


def _recipe_experts(mod) -> list[Candidate]:
    """The search expert of the recipe's family type (ALE search, look-ahead, Procgen beam)."""
    recipe = getattr(mod, "RECIPE", None)
    from vical.authoring.recipes._ale import AleRecipe, ale_expert
    from vical.authoring.recipes._lookahead import GameDemos
    from vical.authoring.recipes._procgen import ProcgenRecipe

    if isinstance(recipe, AleRecipe):

        def ale(seed: int) -> Callable:
            def run(task):
                res = ale_expert(task, lambda sim, k: recipe.win(sim, k, seed), task.max_steps)
                return ("actions", res.actions)

            return run

        return [(f"search seed {s}", ale(s)) for s in (1, 2, 3)] + _later_candidates(mod)
    if isinstance(recipe, GameDemos):

        def look(seed: int) -> Callable:
            return lambda task: ("actions", recipe.actions(task, task.max_steps, seed))

        return [(f"look-ahead seed {s}", look(s)) for s in recipe.seeds[:3]]
    if isinstance(recipe, ProcgenRecipe):
        from vical.authoring.search import procgen_beam

        def beam(width: int) -> Callable:
            return lambda task: ("actions", procgen_beam(task, width=width).actions)

        widths = (recipe.width, 2 * recipe.width)
        return [(f"beam width {w}", beam(w)) for w in widths] + _later_candidates(mod)
    return []


def expert_candidates(env_key: str) -> list[Candidate]:
    """The environment's expert as named variants, tried in order (see expert_episode).

    Search experts get a few seeds or widths; the scripted ones their parameter
    (Breakout's aim). Every variant is the same kind of player with another setting,
    never the random reference. Where they come from, first found: the game module's
    scripted ``controller``, its family's shared expert, the recipe module's own audit
    players, the search of its recipe's family type."""
    from vical.authoring import author_module
    from vical.demos.experts import controller_for
    from vical.spec import load_envs

    spec = load_envs()[env_key]
    ctrl = controller_for(spec)
    if ctrl is not None:
        return [("controller", _policy_expert(lambda env, i: ctrl(env)))]
    shared = _family_experts(spec.family)
    if shared is not None:
        return shared[1]
    mod = author_module(spec)
    if mod is None:
        return []
    return _own_experts(mod) or _recipe_experts(mod)


def expert_for(env_key: str) -> Callable | None:
    """The environment's first expert variant as ``expert(task)``, or None."""
    found = expert_candidates(env_key)
    return found[0][1] if found else None


def expert_name(env_key: str) -> str:
    """A short name of the environment's expert (for the plan file)."""
    from vical.authoring import author_module
    from vical.demos.experts import controller_for
    from vical.spec import load_envs

    spec = load_envs()[env_key]
    if controller_for(spec) is not None:
        return "scripted controller"
    shared = _family_experts(spec.family)
    if shared is not None:
        return shared[0]
    mod = author_module(spec)
    if hasattr(mod, "AUDIT_EXPERT"):
        return str(mod.AUDIT_EXPERT)
    from vical.authoring.recipes._ale import AleRecipe
    from vical.authoring.recipes._lookahead import GameDemos

    recipe = getattr(mod, "RECIPE", None)
    if isinstance(recipe, AleRecipe):
        return "ALE search on the benchmark score"
    if isinstance(recipe, GameDemos):
        return "ALE look-ahead search"
    return "Procgen beam search"


def write_plans(rows: list[dict], path: Path) -> int:
    """The expert episodes' actions as a plan file (``vical baseline expert --plans``)."""
    from vical.spec import tasks_digest

    experts = sorted(
        (r for r in rows if r["policy"] == "expert" and r["error"] is None and r["actions"]),
        key=lambda r: r["task"],
    )
    names: dict[str, str] = {}
    tasks = {}
    for r in experts:
        if r["env"] not in names:
            names[r["env"]] = expert_name(r["env"])
        label = names[r["env"]] + (f" ({r['variant']})" if r.get("variant") else "")
        tasks[r["task"]] = {"actions": list(r["actions"]), "expert": label}
    doc = {
        "format": "vical-plans/1",
        "tasks_digest": tasks_digest(),
        "source": "benchmarks/policy_audit.py --policies expert: each environment's "
        "scripted or search expert played from the task's start; the actions it chose",
        "tasks": tasks,
    }
    lines = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in tasks.items())
    head = json.dumps({k: v for k, v in doc.items() if k != "tasks"})[:-1]
    path.write_text(f'{head}, "tasks": {{\n{lines}\n}}}}\n', encoding="utf-8")
    json.loads(path.read_text(encoding="utf-8"))  # the file is valid JSON
    return len(tasks)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def _failed(task, error: str) -> Episode:
    return Episode(task.env.env, task.id, "expert", 0, 0, task.max_steps, None, False, 0.0, error)


def _rank(e: Episode) -> tuple:
    return (e.error is None, e.passed, e.score, -e.steps)


def expert_episode(task, timeout: int) -> Episode | None:
    """The expert's best episode on the task: its variants (expert_candidates) are
    tried in order until one passes, within ``timeout`` seconds in all; the best of
    those played (pass, then score) is kept, its variant named in ``expert``."""
    candidates = expert_candidates(task.env.env)
    if not candidates:
        return None
    old = signal.signal(signal.SIGALRM, _alarm)
    deadline = time.monotonic() + timeout
    best: Episode | None = None
    try:
        for name, expert in candidates:
            left = int(deadline - time.monotonic())
            if left < 1:
                break
            signal.alarm(left)
            try:
                kind, what = expert(task)
                signal.alarm(0)
                if kind == "policy":
                    ep = play(task, what, "expert")
                else:
                    ep = replay(task, list(what), "expert")
                ep = replace(ep, variant=name)
            except _Timeout:
                ep = _failed(task, "timeout")
            except Exception as e:  # an expert that cannot run here is reported, not fatal
                signal.alarm(0)
                ep = _failed(task, f"{type(e).__name__}: {e}"[:200])
            if best is None or _rank(ep) > _rank(best):
                best = ep
            if best.passed:
                break
        return best
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------------------
# jobs
# ---------------------------------------------------------------------------
def _task_job(args: tuple[str, str, int]) -> list[dict]:
    task_id, which, timeout = args
    from vical.spec import get_task

    task = get_task(task_id)
    out: list[Episode] = []
    if which in ("all", "trivial"):
        out += [random_episode(task, r) for r in range(RANDOM_RUNS)]
        out += [constant_episode(task, a) for a in task.env.actions]
    if which in ("all", "expert"):
        ep = expert_episode(task, timeout)
        if ep is not None:
            out.append(ep)
    return [
        {**asdict(e), "early_success": e.early_success, "early_death": e.early_death} for e in out
    ]


def run(envs: list[str], which: str, workers: int, timeout: int, log=print) -> list[dict]:
    from vical.spec import load_envs

    specs = load_envs()
    jobs = [(f"{env}/{v.variant}", which, timeout) for env in envs for v in specs[env].tasks]
    rows: list[dict] = []
    t0 = time.perf_counter()
    ctx = mp.get_context("fork")
    with ctx.Pool(workers, maxtasksperchild=20) as pool:
        for i, res in enumerate(pool.imap_unordered(_task_job, jobs), 1):
            rows.extend(res)
            if i % 10 == 0 or i == len(jobs):
                log(f"{i}/{len(jobs)} tasks, {time.perf_counter() - t0:.0f} s", flush=True)
    return rows


# ---------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------
def _stats(eps: list[dict]) -> dict:
    n = len(eps)
    if n == 0:
        return {"n": 0}
    return {
        "n": n,
        "score": sum(e["score"] for e in eps) / n,
        "pass": 100.0 * sum(e["passed"] for e in eps) / n,
        "es": sum(e["early_success"] for e in eps),
        "ed": sum(e["early_death"] for e in eps),
        "errors": sum(e["error"] is not None for e in eps),
    }


def summarise(rows: list[dict]) -> dict[str, dict]:
    from vical.paper import TABLE28

    out: dict[str, dict] = {}
    for env in sorted({r["env"] for r in rows}):
        mine = [r for r in rows if r["env"] == env]
        consts = {}
        for p in sorted({r["policy"] for r in mine if r["policy"].startswith("const:")}):
            consts[p[len("const:") :]] = _stats([r for r in mine if r["policy"] == p])
        rnd = _stats([r for r in mine if r["policy"] == "random"])
        best = max(consts, key=lambda a: (consts[a]["pass"], consts[a]["score"]), default=None)
        out[env] = {
            "tasks": len({r["task"] for r in mine}),
            "table28_es": TABLE28[env].early_success,
            "random": rnd,
            "constants": consts,
            "best_constant": best,
            "constants_over_random": sorted(
                a for a, s in consts.items() if rnd["n"] and s["pass"] > rnd["pass"]
            ),
            "constant_early_successes": sum(s["es"] for s in consts.values()),
            "expert": _stats([r for r in mine if r["policy"] == "expert"]),
        }
    return out


def _cell(s: dict) -> str:
    if not s.get("n"):
        return "–"
    err = f", {s['errors']} failed" if s.get("errors") else ""
    return f"{s['score']:.1f} / {s['pass']:.0f}% / {s['es']}{err}"


def markdown(summary: dict[str, dict], meta: dict) -> str:
    lines = [
        f"Generated by `benchmarks/policy_audit.py` on {meta['date']} "
        f"(task data {meta['digest'][:12]}, {meta['episodes']} episodes, "
        f"{meta['seconds']:.0f} s on {meta['workers']} workers).",
        "",
        "Cells read *score / pass rate / early successes* (episodes that passed and ended "
        "before the budget). Random: 3 runs per task. Best constant: the constant action "
        "with the highest pass rate (then score), one run per task. *Constants > random*: "
        "constant actions whose pass rate exceeds the random reference's.",
        "",
        "| env | tasks | T28 ES | random | best constant | constants > random | "
        "constant ES (all) | expert |",
        "|---|---:|---:|---|---|---|---:|---|",
    ]
    for env, s in summary.items():
        best = s["best_constant"]
        over = ", ".join(s["constants_over_random"]) or "–"
        best_cell = f"{best}: {_cell(s['constants'][best])}" if best else "–"
        lines.append(
            f"| {env} | {s['tasks']} | {s['table28_es']:.1f}% | {_cell(s['random'])} | "
            f"{best_cell} | {over} | "
            f"{s['constant_early_successes']} | {_cell(s['expert'])} |"
        )
    lines += ["", "<details><summary>Every constant action</summary>", ""]
    lines += ["| env | action | score | pass | ES | ED |", "|---|---|---:|---:|---:|---:|"]
    for env, s in summary.items():
        for a, c in s["constants"].items():
            lines.append(
                f"| {env} | {a} | {c['score']:.1f} | {c['pass']:.0f}% | {c['es']} | {c['ed']} |"
            )
    lines += ["", "</details>"]
    return "\n".join(lines)


def write_doc(table: str, path: Path = DOC) -> None:
    text = (
        path.read_text(encoding="utf-8") if path.exists() else f"# Policy audit\n\n{BEGIN}\n{END}\n"
    )
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", default=None, help="Comma-separated environment keys (default: all).")
    ap.add_argument(
        "--policies",
        choices=("all", "trivial", "expert"),
        default="all",
        help="Random and constant policies, the experts, or both (default).",
    )
    ap.add_argument(
        "--merge",
        type=Path,
        nargs="*",
        default=None,
        help="Write the table from these episode files (earlier --json output) instead of playing.",
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--expert-timeout", type=int, default=300, help="Seconds per expert episode.")
    ap.add_argument("--json", type=Path, default=None, help="Episode file (default: none).")
    ap.add_argument("--doc", type=Path, default=DOC, help="Markdown file to update.")
    ap.add_argument("--no-doc", action="store_true", help="Print the table, write no document.")
    ap.add_argument(
        "--plans",
        type=Path,
        default=None,
        help="Also write the expert episodes' actions as a plan file (vical baseline expert).",
    )
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from vical.spec import load_envs

    try:
        from vical.spec import tasks_digest as _digest
    except ImportError:  # pragma: no cover - older layout
        _digest = None
    if args.merge:
        # a later file's episode replaces an earlier one of the same task, policy and run
        by_key: dict[tuple, dict] = {}
        seconds = 0.0
        for f in args.merge:
            data = json.loads(f.read_text())
            for r in data["episodes"]:
                by_key[(r["task"], r["policy"], r["run"])] = r
            seconds += data["meta"]["seconds"]
        rows = list(by_key.values())
        if args.envs:
            rows = [r for r in rows if r["env"] in args.envs.split(",")]
    else:
        envs = args.envs.split(",") if args.envs else sorted(load_envs())
        t0 = time.perf_counter()
        rows = run(envs, args.policies, args.workers, args.expert_timeout)
        seconds = time.perf_counter() - t0
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "digest": _digest() if _digest else "unknown",
        "episodes": len(rows),
        "seconds": seconds,
        "workers": args.workers,
    }
    if args.json:  # the episodes first: a table that cannot be made loses nothing played
        args.json.write_text(json.dumps({"meta": meta, "episodes": rows}))
    if args.plans:
        print(f"wrote {write_plans(rows, args.plans)} expert plans to {args.plans}")
    summary = summarise(rows)
    table = markdown(summary, meta)
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "summary": summary, "episodes": rows}))
    if args.no_doc:
        print(table)
    else:
        write_doc(table, args.doc)
        print(f"wrote {args.doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
