"""The task author's check (``vical tasks check DIR``): one line per problem.

Loading a task file checks its shape and what the installed simulators know
cheaply; this check goes on to everything a task must do before anyone runs it,
for every file of a folder (or one file):

* the file loads, and fits the installed simulators including the registries
  that are slow to read (:func:`vical.spec.checks.env_problems`), NOOP included
  where an initial skip or the frame-skip fill needs it;
* a game module beside the file (``<env>.py``) is the one vical finds for the
  environment (through ``$VICAL_GAME_PACKAGES``);
* the adapter answers the state API (:class:`vical.envs.core.Adapter`:
  ``read_state``, ``set_state``, ``state_facts``) at the first task's start:
  ``state_facts()`` names at least one JSON-able fact, a state read and set back
  gives the same facts, and a game module's ``read_frame`` (the world-model
  track's read-back, where the game has one) reads the start frame back to them;
* every task's start plays (seed, initial skip, human-init actions) and draws an
  RGB frame; every action of the vocabulary is taken from it; tasks whose stored
  starts differ do not open on the same frame;
* budget and determinism: a seeded random episode ends within the task's
  ``max_steps`` with one of the four outcomes (``Time Out`` exactly at the
  budget), and replaying it on a fresh simulator gives the same frames, scores
  and outcome;
* demonstrations: every clip replays to its label from its own start, which is
  not the task's opening; every package holds 10-80 frames; an environment with
  clips has a ``demo_quota`` and packing under it leaves the stored packages as
  they are (``vical demos pack --check``).

Material recorded by a person (``vical play --record``: a ``human:`` source) is
checked like any other; the report lists it with the player, the date and the
consent line (:attr:`CheckReport.human`), for the maintainer who adopts it.

Each problem is one line naming the file, and the task or clip where there is one.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from vical.spec import OUTCOMES, EnvSpec, TaskSpec, TaskSpecError, load_env_file


@dataclass
class CheckReport:
    """What :func:`check_folder` found: problems (one line each) and what it checked."""

    problems: list[str] = field(default_factory=list)
    files: int = 0
    tasks: int = 0
    clips: int = 0
    human: list[str] = field(default_factory=list)  # recorded by a person, one line each


def _one_line(e: BaseException) -> str:
    """An exception as one line; vical's own errors by their message, others with their type."""
    text = " ".join(str(e).split()) or "(no message)"
    if type(e).__module__.startswith("vical."):
        return text
    return f"{type(e).__name__}: {text}"


def check_folder(path: Path, on_problem: Callable[[str], None] | None = None) -> CheckReport:
    """Check every task file of a folder (or the one file ``path``).

    ``on_problem`` is called with each problem as soon as its file has been checked
    (a large folder takes minutes).
    """
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.glob("*.yaml"))
    if not files:
        raise TaskSpecError(f"{path}: no task files (*.yaml) found; give a folder of task files")
    report = CheckReport(files=len(files))
    for f in files:
        found = _check_file(f, report)
        report.problems += found
        if on_problem is not None:
            for line in found:
                on_problem(line)
    return report


def _check_file(path: Path, report: CheckReport) -> list[str]:
    from vical.spec.checks import env_problems

    try:
        spec = load_env_file(path)
    except TaskSpecError as e:
        return [line for line in str(e).splitlines() if line.strip()]
    except OSError as e:
        return [f"{path}: cannot be read: {e}"]
    problems = env_problems(spec, path, deep=True)
    if problems:
        return problems
    problems += _game_module_problems(spec, path)
    if problems:
        return problems
    tasks = [TaskSpec(env=spec, variant=v) for v in spec.tasks]
    report.tasks += len(tasks)
    report.human += _human_material(tasks, path)
    starts: dict[str, list[TaskSpec]] = {}
    for task in tasks:
        start, task_problems = _check_task(task, path)
        problems += task_problems
        if start is not None:
            starts.setdefault(start, []).append(task)
    problems += _same_start_problems(starts, path)
    if not problems:
        problems += _state_api_problems(tasks[0], path)
    if not problems:  # demo replays need playable starts
        problems += _demo_problems(spec, tasks, path, report)
    return problems


def _human_material(tasks: list[TaskSpec], path: Path) -> list[str]:
    """One line per start sequence and distinct clip recorded by a person: who, when and
    the consent line."""
    from vical.spec import parse_human_source

    lines: list[str] = []
    seen: set[str] = set()
    for t in tasks:
        found = [(f"start of {t.id}", t.variant.init_source)] if t.variant.init_origin else []
        found += [(f"clip {c.id}", c.source) for c in t.variant.demos if c.id not in seen]
        seen |= {c.id for c in t.variant.demos}
        for what, source in found:
            if source is not None and source.lstrip().startswith("human:"):
                h = parse_human_source(source)
                lines.append(
                    f"{path}: {what}: recorded by {h.player} on {h.date}; consent: {h.consent}"
                )
    return lines


def _game_module_problems(spec: EnvSpec, path: Path) -> list[str]:
    """A ``<env>.py`` beside the task file must be the game module vical finds."""
    from vical.envs import GAME_PACKAGES_VAR, game_module

    beside = path.with_suffix(".py")
    if not beside.is_file():
        return []
    try:
        found = game_module(spec)
    except Exception as e:  # an error inside the module: the author's to fix
        return [f"{beside}: importing the game module failed: {_one_line(e)}"]
    where = getattr(found, "__file__", None)
    if where is not None and Path(where).resolve() == beside.resolve():
        return []
    now = f"vical finds {found.__name__} ({where})" if found is not None else "vical finds none"
    return [
        f"{beside}: not the game module of {spec.env} ({now}); put the folder's parent on "
        f"PYTHONPATH and the folder's name ({path.parent.name}) in ${GAME_PACKAGES_VAR}"
    ]


STATE_API = ("read_state", "set_state", "state_facts")


def _state_api_problems(task: TaskSpec, path: Path) -> list[str]:
    """The adapter's state API at the task's start (one line per problem, naming the
    environment and the method)."""
    from vical.envs import game_module, make_env

    env = make_env(task)
    try:
        frame = env.reset()
        adapter = env.adapter
        where = f"{path}: environment {task.env.env}: its Adapter ({type(adapter).__name__})"
        fix = "the state API: subclass vical.envs.core.Adapter (docs/FAMILY_GUIDE.md)"
        missing = [m for m in STATE_API if not callable(getattr(adapter, m, None))]
        if missing:
            return [f"{where} has no {', '.join(m + '()' for m in missing)}; {fix}"]
        problems: list[str] = []
        facts = _guard(problems, where, "state_facts() fails", adapter.state_facts)
        if problems:
            return problems
        if not isinstance(facts, dict) or not facts:
            return [
                f"{where}: state_facts() names no fact of the state ({facts!r}); override "
                "state_facts() to return what the frame shows by name, e.g. {'row': 2}"
            ]
        try:
            json.dumps(facts, allow_nan=False)
        except (TypeError, ValueError) as e:
            return [f"{where}: state_facts() is not JSON-able: {_one_line(e)}"]

        def round_trip() -> Any:
            state = adapter.read_state()
            for name in task.action_names:  # until the state changes
                if env.done or adapter.state_facts() != facts:
                    break
                env.step(name)
            adapter.set_state(state)
            return adapter.state_facts()

        back = _guard(problems, where, "read_state() then set_state() fails", round_trip)
        if back is not None and back != facts:
            problems.append(
                f"{where}: set_state(read_state()) does not return to the state read: facts "
                f"{back!r} != {facts!r}"
            )
        reader = getattr(game_module(task.env), "read_frame", None)
        if reader is not None and not problems:
            seen = _guard(
                problems, where, "read_frame() fails", lambda: reader(adapter, frame, facts)
            )
            if not problems and seen != facts:
                problems.append(
                    f"{where}: read_frame() reads the start frame as {seen!r}, not its facts "
                    f"{facts!r}"
                )
        return problems
    finally:
        env.close()


def _start_key(task: TaskSpec) -> str:
    v = task.variant
    return json.dumps(
        [v.seed, v.initial_skip, v.init_actions, task.env_kwargs, v.params],
        sort_keys=True,
        default=str,
    )


def _same_start_problems(starts: dict[str, list[TaskSpec]], path: Path) -> list[str]:
    problems = []
    for group in starts.values():
        if len({_start_key(t) for t in group}) > 1:
            ids = ", ".join(t.id for t in group)
            problems.append(
                f"{path}: tasks {ids} store different starts but open on the same frame; "
                "change a seed, skip or human-init sequence so that each start differs"
            )
    return problems


def _guard(problems: list[str], where: str, what: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or None with one problem line when it raises."""
    try:
        return fn()
    except Exception as e:
        problems.append(f"{where}: {what}: {_one_line(e)}")
        return None


def _check_task(task: TaskSpec, path: Path) -> tuple[str | None, list[str]]:
    """The task's start frame hash (None when it cannot be played) and its problems."""
    from vical.envs import make_env
    from vical.envs.core import frame_sha256

    where = f"{path}: task {task.id}"
    problems: list[str] = []
    env = _guard(problems, where, "the game cannot be made", lambda: make_env(task))
    if env is None:
        return None, problems
    try:
        frame = _guard(problems, where, "its start does not play", env.reset)
        if frame is None:
            return None, problems
        start = frame_sha256(frame)
        for name, native in env.actions.items():

            def take(name: str = name) -> None:
                env.reset()
                env.step(name)

            _guard(problems, where, f"action {name!r} (native {native!r}) fails", take)
    finally:
        env.close()
    rng = random.Random(f"tasks check|{task.id}")
    actions = [rng.choice(task.action_names) for _ in range(task.max_steps)]
    first = _guard(problems, where, "a random episode fails", lambda: _episode(task, actions))
    if first is None:
        return start, problems
    hashes, _trace, outcome, taken = first
    if outcome not in OUTCOMES:
        problems.append(
            f"{where}: a random episode of max_steps {task.max_steps} decisions ended with "
            f"outcome {outcome!r} after {taken}"
        )
    elif outcome == "Time Out" and taken != task.max_steps:
        problems.append(
            f"{where}: a random episode timed out after {taken} of max_steps "
            f"{task.max_steps} decisions"
        )
    again = _guard(
        problems, where, "replaying a random episode fails", lambda: _episode(task, actions, True)
    )
    if again is not None and again != first:
        step = next(
            (i for i, (a, b) in enumerate(zip(hashes, again[0], strict=False)) if a != b),
            min(len(hashes), len(again[0])),
        )
        problems.append(
            f"{where}: not deterministic: a random episode replayed on a fresh simulator "
            f"differs from step {step} (frame, score, pass or outcome); pin every RNG the "
            "simulator has to the task's seed"
        )
    return start, problems


def _episode(
    task: TaskSpec, actions: list[str], fresh: bool = False
) -> tuple[list[str], list[tuple[float, bool, str | None]], str | None, int]:
    """Frame hashes, (score, passed, outcome) per step, the outcome and the decisions taken
    (``fresh``: on a new simulator whose start is replayed, not one handed on)."""
    from vical.envs import make_adapter, make_env
    from vical.envs.core import frame_sha256
    from vical.envs.environment import VicalEnv

    env = VicalEnv(task, make_adapter(task), starts="replayed") if fresh else make_env(task)
    try:
        hashes = [frame_sha256(env.reset())]
        trace = []
        for a in actions:
            if env.done:
                break
            s = env.step(a)
            hashes.append(s.frame_sha256)
            trace.append((s.score, s.passed, s.outcome))
        return hashes, trace, env.outcome, env.steps
    finally:
        env.close()


def _demo_problems(
    spec: EnvSpec, tasks: list[TaskSpec], path: Path, report: CheckReport
) -> list[str]:
    from vical.demos.packages import MAX_FRAMES, MIN_FRAMES, PackError, frames, pack_env
    from vical.demos.render import ClipReplayError, replay_clip, task_start_sha256

    problems: list[str] = []
    clips = {c.id for t in tasks for c in t.variant.demos}
    report.clips += len(clips)
    if not clips:
        return problems
    for task in tasks:
        where = f"{path}: task {task.id}"
        demos = task.variant.demos
        if not demos:
            continue
        total = sum(frames(c) for c in demos)
        if not MIN_FRAMES <= total <= MAX_FRAMES:
            problems.append(
                f"{where}: its demo package has {total} frames; a package holds "
                f"{MIN_FRAMES}-{MAX_FRAMES} (each clip: its actions plus 2)"
            )
        opening = _guard(
            problems, where, "its start does not play", partial(task_start_sha256, task)
        )
        for clip in demos:
            try:
                r = replay_clip(task, clip)
            except Exception as e:
                text = _one_line(e)
                # the renderer's own messages already start with the task id and clip
                own = isinstance(e, ClipReplayError) and text.startswith(f"{task.id}: ")
                problems.append(
                    f"{path}: task {text}" if own else f"{where}: demo {clip.id}: {text}"
                )
                continue
            if opening is not None and r.start_sha256 == opening:
                problems.append(
                    f"{where}: demo {clip.id} starts on the task's own opening frame; give the "
                    "clip another seed, initial skip or human-init sequence"
                )
    if spec.demo_quota is None:
        problems.append(
            f"{path}: field 'demo_quota': missing, and the tasks have demo clips; add "
            "demo_quota: {pool: <distinct clips>, clips: '<one digit 1-4 per task>', "
            "loss_scope: env} so that `vical demos pack` can pack them"
        )
    elif not problems:
        stored = {v.variant: list(v.demos) for v in spec.tasks}
        try:
            packed = pack_env(spec, stored)
        except PackError as e:
            problems.append(f"{path}: field 'demo_quota': {_one_line(e)}")
        else:
            changed = [v for v in stored if packed[v] != stored[v]]
            if changed:
                problems.append(
                    f"{path}: field 'demo_quota': packing would change the demos of "
                    f"{', '.join(changed)}; run `vical demos pack --env {spec.env}` (with this "
                    "folder in $VICAL_TASKS_DIR) or change the quota"
                )
    return problems
