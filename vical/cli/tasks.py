"""``vical tasks``: list, show, digest, check; the authoring views sheet and make-init."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vical.cli._common import console, envs, fail, interrupted, say, select
from vical.paper import ENVS

if TYPE_CHECKING:
    from vical.spec import TaskSpec

tasks_app = typer.Typer(help="Browse the benchmark's tasks.", no_args_is_help=True)


@tasks_app.command("list")
def tasks_list(
    pattern: str = typer.Option(
        None, "--tasks", "-t", help="Comma-separated id globs, e.g. 'taxi/*,pong'."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List tasks, one per line, the task id first."""
    tasks = select(pattern)
    rows: list[dict[str, Any]] = [
        {
            "id": t.id,
            "env": t.env.env,
            "kind": t.variant.kind,
            "seed": t.variant.seed,
            "max_steps": t.max_steps,
            "actions": len(t.action_names),
            "types": t.env.tags.types,
            "memory": t.env.tags.memory,
            "dynamics": t.env.tags.dynamics,
        }
        for t in tasks
    ]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    for r in rows:
        sys.stdout.write(
            f"{r['id']}\t{r['kind']}\tseed={r['seed']}\tmax_steps={r['max_steps']}\t"
            f"actions={r['actions']}\t{'/'.join(r['types'])}\t{r['memory']}\t{r['dynamics']}\n"
        )


@tasks_app.command("digest")
def tasks_digest_cmd() -> None:
    """Print the task-data version: sha256 over every task file.

    Run manifests and bundles record it; resuming, bundling and verification
    refuse to mix results made on different task data.
    """
    from vical.spec import TASK_DIRS, tasks_digest

    sys.stdout.write(f"{tasks_digest()}  {' + '.join(str(d) for d in TASK_DIRS)}\n")


@tasks_app.command("check")
def tasks_check(
    folder: Path = typer.Argument(..., help="A folder of task files (or one task file)."),
    reflex: bool = typer.Option(
        False,
        "--screen",
        help="Also play the reflex screen (vical tasks screen) on the folder's tasks; a "
        "task a screen-blind policy passes is a problem.",
    ),
) -> None:
    """Check task files before adding them: one line per problem, exit 1 if any.

    Loads each file, checks it against the installed simulators, plays every task's
    start and every action, checks budgets and determinism with a random episode,
    and replays every demo clip to its label. Game modules are found as for any
    run (a module beside the file must be the one found: $VICAL_GAME_PACKAGES).
    Material recorded by a person (vical play --record) is listed with the player,
    the date and the consent line.
    """
    from vical.demos.taskcheck import check_folder

    if not folder.exists():
        fail(f"{folder}: no such file or folder; give a folder of task files (*.yaml)")

    def show(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    report = check_folder(folder, on_problem=show)
    if reflex and not report.problems:
        report.problems += _screen_folder(folder, show)
    for line in report.human:  # recorded by a person: whose play, and their consent
        sys.stderr.write(line + "\n")
    counts = f"{report.files} task file(s), {report.tasks} task(s), {report.clips} demo clip(s)"
    if report.problems:
        sys.stderr.write(f"{len(report.problems)} problem(s) in {counts}\n")
        raise typer.Exit(1)
    sys.stderr.write(f"no problems in {counts}\n")


@tasks_app.command("record")
def tasks_record(
    folder: Path = typer.Argument(..., help="An added folder of task files (on $VICAL_TASKS_DIR)."),
    workers: int = typer.Option(2, "--workers", "-j", min=1, help="Worker processes."),
) -> None:
    """Record an added folder's fingerprints and doctor record beside its task files.

    Writes FOLDER/fingerprints.json (every task's start frame, every demo clip, each
    task's longest clip and one random episode, as sha256 fingerprints) and
    FOLDER/doctor.json (what `vical doctor --tasks-dir FOLDER` replays). The test
    suite's per-environment tests read them from there; run it again after changing
    a task file or the game module (a fingerprint recorded on other task files is
    refused).
    """
    from vical.run.fingerprints import record_folder
    from vical.run.pool import Interrupted

    if not folder.is_dir() or not any(folder.glob("*.yaml")):
        fail(f"{folder}: not a folder of task files (*.yaml); give the folder to record")
    try:
        written = record_folder(folder, workers)
    except (Interrupted, KeyboardInterrupt):
        interrupted("nothing complete was written; run it again")
    for path in written:
        say(f"wrote {path}")


def _screen_folder(folder: Path, show: Any) -> list[str]:
    """The reflex screen over the tasks of a checked folder: one problem per failing task."""
    from vical.run.screen import run_screen
    from vical.spec import TaskSpec, load_env_file

    files = [folder] if folder.is_file() else sorted(folder.glob("*.yaml"))
    tasks = [TaskSpec(env=e, variant=v) for e in map(load_env_file, files) for v in e.tasks]
    results, _ = run_screen(tasks, workers=1)
    problems = []
    for r in results:
        if r.status == "fail":
            line = f"{r.task}: fails the reflex screen: " + "; ".join(r.failures)
            show(line)
            problems.append(line)
    return problems


@tasks_app.command("screen")
def tasks_screen(
    pattern: str = typer.Option(
        None, "--tasks", "-t", help="Comma-separated id globs, e.g. 'pong,taxi/*' (all if omitted)."
    ),
    workers: int = typer.Option(2, "--workers", "-j", min=1, help="Worker processes."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (every task)."),
    plans: Path = typer.Option(
        None, "--plans", help="Expert plan file to compare with (default: the packaged plans)."
    ),
    show_all: bool = typer.Option(False, "--all", help="List every task, not only flagged ones."),
) -> None:
    """Play policies that never look at the screen on each task: exit 1 if one wins.

    The battery: every constant action, short action cycles (period 2-4), three
    seeded random runs and sticky random play. A task fails when a constant or a
    cycle passes it, when random play passes most of its episodes, or when the best
    constant or cycle (or random play on average) scores within 10 points of the
    expert's replayed plan, unless the task file records a reflex_exception quoting
    the paper's rule that admits it (listed as EXCEPTION with its quote).
    """
    from vical.run.pool import Interrupted
    from vical.run.screen import MARGIN, run_screen, summary

    tasks = select(pattern)
    if plans is not None and not plans.is_file():
        fail(f"--plans {plans}: no such file; omit --plans to use the packaged expert plans")
    done = [0]

    def progress(ts: Any) -> None:
        done[0] += 1
        if not as_json and sys.stderr.isatty():
            sys.stderr.write(f"\rscreened {done[0]}/{len(tasks)} tasks ")
            sys.stderr.flush()

    try:
        results, note = run_screen(tasks, workers=workers, plans_path=plans, on_task=progress)
    except (Interrupted, KeyboardInterrupt):
        interrupted(
            f"the screen stopped after {done[0]} of {len(tasks)} tasks; nothing was written"
        )
    if not as_json and sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 40 + "\r")
    counts = summary(results)
    if as_json:
        doc = {
            "margin": MARGIN,
            "note": note,
            "counts": counts,
            "tasks": [r.to_json() for r in results],
        }
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        for r in results:
            if r.status == "ok" and not show_all:
                continue
            expert = "-" if r.expert_score is None else f"{r.expert_score:.1f}"
            best = r.best_reflex if len(r.best_reflex) <= 24 else r.best_reflex[:23] + "…"
            say(
                f"{r.status.upper():9} {r.task}  blind {r.best_reflex_score:.1f} "
                f"({best})  expert {expert}"
            )
            for line in r.failures:
                for part in textwrap.wrap(line, 70):
                    say(f"          {part}")
            if r.exception is not None and r.excused:
                say(
                    f"          excused: {', '.join(r.excused[:4])}"
                    + (f" (+{len(r.excused) - 4})" if len(r.excused) > 4 else "")
                )
                quoted = f'{r.exception["where"]}: "{r.exception["quote"]}"'
                for part in textwrap.wrap(quoted, 70):
                    say(f"          {part}")
        if note:
            say(f"note: {note}")
        say(
            f"{len(results)} task(s): {counts['ok']} ok, {counts['exception']} recorded "
            f"exception(s), {counts['fail']} failing"
        )
    if counts["fail"]:
        raise typer.Exit(1)


@tasks_app.command("show")
def tasks_show(
    task_id: str = typer.Argument(..., help="Task id, e.g. taxi/state1."),
    png: Path = typer.Option(None, "--png", help="Write the start frame to this PNG file."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the settings and every provenance as JSON."
    ),
) -> None:
    """Show one task's settings, rules and actions, where its numbers come from and
    who made its start sequence and demo clips (paper, generated, search, scripted or
    human); optionally save its start frame."""
    from vical.spec import get_task

    t = get_task(task_id)
    spec = t.env
    if as_json:
        sys.stdout.write(json.dumps(task_show_json(t), indent=1) + "\n")
        if png:
            _save_start_frame(t, png, quiet=True)
        return
    console.print(f"[bold]{t.id}[/] ({spec.name}, paper id {spec.paper_id}, {t.variant.kind})")
    console.print(
        f"seed {t.variant.seed}, initial skip {t.variant.initial_skip}, "
        f"start sequence {len(t.variant.init_actions)} actions, max steps {t.max_steps}, "
        f"frame skip {spec.frame_skip} (action held {spec.action_steps})"
    )
    console.print(f"tags: {', '.join(spec.tags.types)}; {spec.tags.memory}; {spec.tags.dynamics}")
    console.print(f"actions: {', '.join(t.action_names)}")
    console.print(f"scoring ({spec.scoring.family}): {spec.scoring.description}")
    console.print(f"pass: {spec.pass_rule.description}")
    console.print(f"[bold]basic rules[/]: {spec.rules.basic}")
    console.print(f"[bold]detailed rules[/]: {spec.rules.detailed}")
    console.print(f"demo clips: {len(t.variant.demos)}")
    _print_sources(t)
    _print_provenance(t)
    if png:
        _save_start_frame(t, png)


def task_provenance(t: TaskSpec) -> dict[str, Any]:
    """Who made the task's start sequence and each of its demo clips.

    ``start``: None without a start sequence, else its ``origin`` (paper, generated or
    human), ``source`` text and ``actions``; ``demos``: per clip its ``id``, ``label``,
    ``origin`` (search, scripted or human) and ``source`` text.
    """
    v = t.variant
    start = None
    if v.init_origin is not None:
        start = {
            "origin": v.init_origin,
            "source": " ".join((v.init_source or "").split()),
            "actions": list(v.init_actions),
        }
    demos = [
        {"id": c.id, "label": c.label, "origin": c.origin, "source": " ".join(c.source.split())}
        for c in v.demos
    ]
    return {"start": start, "demos": demos}


def task_show_json(t: TaskSpec) -> dict[str, Any]:
    """`vical tasks show --json`: the settings, the numbers' sources and the provenance."""
    spec, v = t.env, t.variant
    return {
        "id": t.id,
        "name": spec.name,
        "paper_id": spec.paper_id,
        "kind": v.kind,
        "seed": v.seed,
        "initial_skip": v.initial_skip,
        "max_steps": t.max_steps,
        "frame_skip": spec.frame_skip,
        "action_steps": spec.action_steps,
        "actions": t.action_names,
        "tags": spec.tags.model_dump(),
        "scoring": {"family": spec.scoring.family, "description": spec.scoring.description},
        "pass": spec.pass_rule.description,
        "rules": spec.rules.model_dump(),
        "numbers": [{"number": n, "source": src} for n, src in number_sources(t)],
        **task_provenance(t),
    }


def _save_start_frame(t: TaskSpec, png: Path, quiet: bool = False) -> None:
    from PIL import Image

    from vical.envs import make_env

    env = make_env(t)
    try:
        frame = env.reset()
    finally:
        env.close()
    png.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(frame).save(png)
    if not quiet:
        console.print(f"start frame ({frame.shape[1]}x{frame.shape[0]}) written to {png}")


def _fmt_number(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {_fmt_number(v)}" for k, v in x.items()) + "}"
    return str(x)


def _paper_sets(values: Iterable[Any]) -> str:
    return ", ".join(str(v) for v in sorted(values))


def number_sources(t: TaskSpec) -> list[tuple[str, str]]:
    """(number, where it comes from) for every number `vical tasks show` prints."""
    from vical.spec import numeric_keys

    spec, v = t.env, t.variant
    pe = ENVS.get(spec.env)
    rows: list[tuple[str, str]] = []

    def table(name: str, value: Any, ok: bool, label: str, listed: Iterable[Any]) -> None:
        if pe is None:
            rows.append((f"{name} {value}", "not checked: no paper entry for this environment"))
        elif ok:
            rows.append((f"{name} {value}", f"paper: {label} ({pe.paper_id})"))
        else:
            rows.append(
                (
                    f"{name} {value}",
                    f"ours: not among {label}'s values for {pe.paper_id} "
                    f"({_paper_sets(listed) or 'none'})",
                )
            )

    table("seed", v.seed, pe is not None and v.seed in pe.seeds, "Table 8", pe.seeds if pe else ())
    skips = pe.initial_skips if pe else frozenset()
    if pe is not None and v.initial_skip == 0:
        note = (
            f"none stored; Table 8 lists {_paper_sets(skips)} for other {pe.paper_id} tasks"
            if skips
            else f"paper: Table 8 (a dash: no initial skip for {pe.paper_id})"
        )
        rows.append(("initial skip 0", note))
    else:
        table("initial skip", v.initial_skip, v.initial_skip in skips, "Table 8", skips)
    # Table 7: the budget is one of a set of values, frame skip and action steps one value
    listed: Iterable[Any]
    for name, value, listed in (
        ("max steps", t.max_steps, pe.max_steps if pe else ()),
        ("frame skip", spec.frame_skip, [pe.frame_skip] if pe else ()),
        ("action steps", spec.action_steps, [pe.action_steps] if pe else ()),
    ):
        table(name, value, value in listed, "Table 7", listed)
    own = v.targets
    for name, target in t.targets.items():
        where = "task target" if name in own else "scoring target"
        rows.append((f"{where} {name} = {_fmt_number(target.value)}", target.provenance))
    for rule_name, rule in (("scoring", spec.scoring), ("pass_rule", spec.pass_rule)):
        for key in numeric_keys(rule.params):
            rows.append(
                (
                    f"{rule_name}.{key} = {_fmt_number(rule.params[key])}",
                    rule.provenance.get(key, "MISSING"),
                )
            )
    for key in numeric_keys(v.params):
        rows.append(
            (f"task param {key} = {_fmt_number(v.params[key])}", v.provenance.get(key, "MISSING"))
        )
    return rows


def _note(head: str, text: str) -> None:
    """One ``head: text`` note, wrapped at 80 columns with a hanging indent."""
    for line in textwrap.wrap(
        f"{head}: {' '.join(text.split())}",
        width=80,
        initial_indent="  ",
        subsequent_indent="      ",
        break_on_hyphens=False,
    ):
        say(line)


def _print_sources(t: TaskSpec) -> None:
    """Where every printed number and the tags come from (80 columns)."""
    console.print("[bold]where the numbers come from[/]:")
    for head, text in number_sources(t):
        _note(head, text)
    _note("tags", t.env.tags.provenance or "no provenance recorded yet")


def _print_provenance(t: TaskSpec) -> None:
    """Who made the start sequence and each demo clip: origin, then the source text."""
    prov = task_provenance(t)
    console.print("[bold]who made the start and the demonstrations[/]:")
    start = prov["start"]
    if start is None:
        _note("start sequence", "none (the task starts at reset after the initial skip)")
    else:
        _note(
            f"start sequence ({len(start['actions'])} actions; origin {start['origin']})",
            start["source"],
        )
    if not prov["demos"]:
        _note("demo clips", "none")
    for d in prov["demos"]:
        _note(f"demo clip {d['id']} ({d['label']}; origin {d['origin']})", d["source"])


@tasks_app.command("sheet")
def tasks_sheet(
    env: str = typer.Option(..., "--env", help="Environment key, e.g. seaquest."),
    out: Path = typer.Option(..., "--out", help="PNG file to write."),
) -> None:
    """Draw a contact sheet of every start frame of an environment's tasks, for review."""
    from vical.authoring.sheet import start_sheet

    tasks = select(env)
    start_sheet(tasks, out)
    console.print(f"{len(tasks)} start frames written to {out}")


@tasks_app.command("make-init")
def tasks_make_init(
    env: str = typer.Option(..., "--env", help="Environment key with an init generator."),
    check: bool = typer.Option(
        False, "--check", help="Exit 1 if the stored sequences differ from a fresh run."
    ),
) -> None:
    """Re-run an environment's human-init generator and print (or check) its sequences."""
    from vical.authoring import init_generator

    known = envs()
    if env not in known:
        fail(f"unknown environment {env!r}; known: {', '.join(known)}")
    gen = init_generator(known[env])
    if gen is None:
        fail(f"{env} has no generate_init_actions(); its sequences are scripted in the YAML")
    fresh = gen(known[env])
    # sequences the paper spells out (init_source 'paper: ...') are data, not generator output
    stored = {
        t.variant: list(t.init_actions)
        for t in known[env].tasks
        if t.init_actions and not (t.init_source or "").startswith("paper:")
    }
    if check:
        if fresh != stored:
            diff = sorted(k for k in set(fresh) | set(stored) if fresh.get(k) != stored.get(k))
            fail(f"{env}: stored sequences differ from the generator for {diff}", code=1)
        console.print(f"{env}: {len(stored)} stored sequences match the generator")
        return
    sys.stdout.write(json.dumps(fresh, indent=1) + "\n")
