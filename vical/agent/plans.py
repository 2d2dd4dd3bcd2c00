"""Plan files: action lists planned offline, one per task, for the ``plan`` agent.

A plan file is JSON::

    {"format": "vical-plans/1",
     "tasks_digest": "<vical.spec.tasks_digest() when it was made>",
     "source": "<free text: what made it>",
     "tasks": {"<task id>": {"actions": ["Up", ...], "expert": "<who planned it>"}}}

The planners (search tools, scripted experts; ``benchmarks/policy_audit.py
--policies expert --plans FILE``) run offline: the runtime only reads their
output. :func:`load_plans` checks a file against this vical's task data and
raises :class:`vical.errors.AgentConfigError` with one line naming the file and
the problem.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vical.errors import AgentConfigError, VicalError
from vical.spec import TASKS_DIR, TaskSpec, get_task, task_files, tasks_digest

PLANS_FORMAT = "vical-plans/1"
# the expert plans packaged with vical (made by the maintainers; may be absent)
DEFAULT_PLANS = Path(__file__).resolve().parents[1] / "data" / "expert-plans.json"
MAKE_PLANS = "python benchmarks/policy_audit.py --policies expert --plans FILE"


@dataclass(frozen=True)
class TaskPlan:
    """One task's planned actions and a short name of the expert that planned them."""

    actions: tuple[str, ...]
    expert: str


@dataclass(frozen=True)
class Plans:
    """A checked plan file: its name, sha256, digest, source and per-task plans."""

    name: str  # the file's name, without its folder
    sha256: str
    tasks_digest: str
    source: str
    tasks: dict[str, TaskPlan]

    def missing(self, tasks: list[TaskSpec]) -> list[str]:
        """The ids of ``tasks`` that have no plan, in the given order."""
        return [t.id for t in tasks if t.id not in self.tasks]


def fill_action(task: TaskSpec) -> str:
    """The action played where there is no planned action: the task's NOOP when its
    vocabulary has one by that name, else its first action (as
    ``benchmarks/policy_audit.py`` ``replay()`` fills after an expert's actions)."""
    noop = task.env.noop if isinstance(task.env.noop, str) else None
    if noop is not None and noop in task.env.actions:
        return noop
    return next(iter(task.env.actions))


def _task_plan(where: str, task_id: str, entry: Any) -> TaskPlan:
    def bad(problem: str) -> AgentConfigError:
        return AgentConfigError(f"{where}: task {task_id}: {problem}")

    try:
        task = get_task(task_id)
    except VicalError:
        raise bad("no such task in this vical (see `vical tasks list`)") from None
    if not isinstance(entry, dict):
        raise bad("its plan is not an object with 'actions' and 'expert'")
    actions = entry.get("actions")
    if not isinstance(actions, list) or not actions:
        raise bad("'actions' is not a non-empty list of action names")
    vocabulary = task.env.actions
    for i, a in enumerate(actions):
        if not isinstance(a, str) or a not in vocabulary:
            raise bad(
                f"action {i} {a!r} is not one of the task's actions ({', '.join(vocabulary)})"
            )
    expert = entry.get("expert")
    if not isinstance(expert, str) or not expert.strip():
        raise bad("'expert' (a short text naming the expert) is missing or empty")
    return TaskPlan(actions=tuple(actions), expert=expert.strip())


def plan_digests() -> set[str]:
    """The task-data digests a plan file may have been made for: this vical's, and the
    built-in set's while the folders on ``$VICAL_TASKS_DIR`` only add environments (the
    built-in tasks are then unchanged, and so are their plans)."""
    digests = {tasks_digest()}
    read = task_files()
    if all(read.get(f.stem) == f for f in TASKS_DIR.glob("*.yaml")):
        digests.add(tasks_digest(TASKS_DIR))
    return digests


def load_plans(path: str | Path) -> Plans:
    """Read and check a plan file (AgentConfigError: one line naming file and problem).

    Checked: JSON, the format tag, the task-data digest (a file made for other task
    data must be remade; one made for the built-in tasks holds while added folders
    only add environments, :func:`plan_digests`), every task id, every action against its task's vocabulary
    and each plan's expert name.
    """
    p = Path(path)
    where = f"plan file {p}"
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise AgentConfigError(f"{where}: no such file; make one with: {MAKE_PLANS}") from None
    except OSError as e:
        raise AgentConfigError(f"{where}: cannot be read ({e.strerror or e})") from None
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AgentConfigError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise AgentConfigError(f"{where}: not a JSON object (a {type(doc).__name__})")
    if doc.get("format") != PLANS_FORMAT:
        raise AgentConfigError(
            f"{where}: format is {doc.get('format')!r}, expected {PLANS_FORMAT!r}"
        )
    digest, current = doc.get("tasks_digest"), tasks_digest()
    if not isinstance(digest, str):
        raise AgentConfigError(f"{where}: 'tasks_digest' is missing or not a string")
    if digest not in plan_digests():
        raise AgentConfigError(
            f"{where}: made for task data {digest}, but this vical has {current}; "
            f"the plans must be remade for this task data: {MAKE_PLANS}"
        )
    source = doc.get("source")
    if not isinstance(source, str):
        raise AgentConfigError(f"{where}: 'source' (free text: what made it) is missing")
    tasks = doc.get("tasks")
    if not isinstance(tasks, dict):
        raise AgentConfigError(f"{where}: 'tasks' is missing or not an object of task ids")
    plans = {str(tid): _task_plan(where, str(tid), entry) for tid, entry in tasks.items()}
    return Plans(
        name=p.name,
        sha256=hashlib.sha256(data).hexdigest(),
        tasks_digest=digest,
        source=source,
        tasks=plans,
    )
