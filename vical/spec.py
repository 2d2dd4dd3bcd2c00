"""Task data: pydantic models for ``vical/tasks/<env>.yaml`` and their loader.

One YAML file describes one environment: its simulator, canonical action
vocabulary, frame-skip settings, scoring rule with calibrated targets, pass
rule, tags, rules text, and the list of task variants built on it.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from vical.errors import TaskDataError

# Where task files come from. The package ships one file per environment in
# BUILTIN_TASKS_DIR; $VICAL_BUILTIN_TASKS_DIR reads that set from another folder instead
# (a dataset's copy, say). $VICAL_TASKS_DIR names more folders (separated by the
# platform's path separator) whose files are added to that set; a file named like one
# already read replaces it. TASKS_DIR is the folder of the built-in set, TASK_DIRS every
# folder in the order they are read: the default of the functions below.
BUILTIN_TASKS_VAR = "VICAL_BUILTIN_TASKS_DIR"
TASKS_DIR_VAR = "VICAL_TASKS_DIR"
BUILTIN_TASKS_DIR = Path(__file__).parent / "tasks"
TASKS_DIR = Path(os.environ.get(BUILTIN_TASKS_VAR) or BUILTIN_TASKS_DIR)
EXTRA_TASKS_DIRS: tuple[Path, ...] = tuple(
    Path(p) for p in os.environ.get(TASKS_DIR_VAR, "").split(os.pathsep) if p.strip()
)
TASK_DIRS: tuple[Path, ...] = (TASKS_DIR, *EXTRA_TASKS_DIRS)
# one folder, or several read in order (a later folder's file replaces an earlier one)
TaskDirs = Path | tuple[Path, ...]

EnvType = Literal["Maze", "Shooter", "Control", "Dodge", "Collect", "Sport"]
ENV_TYPES: tuple[str, ...] = ("Maze", "Shooter", "Control", "Dodge", "Collect", "Sport")
Outcome = Literal["Victory", "Terminated", "Time Out", "Draw"]
OUTCOMES: tuple[str, ...] = ("Victory", "Terminated", "Time Out", "Draw")


class TaskSpecError(TaskDataError, ValueError):
    """A task file could not be loaded; the message names file, task and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_PROVENANCE_FORMS = ("paper:", "calibrated:")


def _check_provenance(v: str) -> str:
    """A number's provenance: ``paper: <table/section>`` or ``calibrated: <how>``."""
    head, sep, rest = v.partition(":")
    if not sep or head not in ("paper", "calibrated") or len(rest.strip()) < 3:
        raise ValueError(
            f"provenance {v!r} must read 'paper: <table or section>' or "
            "'calibrated: <how the number was obtained>'"
        )
    return v


class Target(_Strict):
    """A reference value (normalisation target or threshold) with where it comes from."""

    value: float
    provenance: str = Field(
        description='"paper: <table/section>" when the paper states the number, '
        'else "calibrated: <how>"'
    )

    @field_validator("provenance")
    @classmethod
    def _provenance_form(cls, v: str) -> str:
        return _check_provenance(v)


def _numeric_keys(params: dict[str, Any]) -> list[str]:
    """Parameter names whose value is or holds a number (bools are switches, not numbers)."""

    def has_number(x: Any) -> bool:
        if isinstance(x, bool):
            return False
        if isinstance(x, (int, float)):
            return True
        if isinstance(x, dict):
            return any(has_number(v) for v in x.values())
        if isinstance(x, (list, tuple)):
            return any(has_number(v) for v in x)
        return False

    return [k for k, v in params.items() if has_number(v)]


class _WithParams(_Strict):
    """A rule with numeric parameters, each of which says where it comes from."""

    params: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, str] = Field(
        default_factory=dict,
        description="parameter name -> 'paper: <where>' or 'calibrated: <how>'",
    )

    @field_validator("provenance")
    @classmethod
    def _provenance_values(cls, v: dict[str, str]) -> dict[str, str]:
        for value in v.values():
            _check_provenance(value)
        return v

    def missing_provenance(self) -> list[str]:
        """Numeric parameters that have no provenance entry."""
        return [k for k in _numeric_keys(self.params) if k not in self.provenance]


class ScoringRule(_WithParams):
    """Which score family an environment uses, with its targets and parameters."""

    family: Literal[
        "capped_ratio", "event_count", "horizon_ratio", "path_efficiency", "milestones", "native"
    ]
    description: str
    targets: dict[str, Target] = Field(default_factory=dict)


class PassRule(_WithParams):
    """The success condition, evaluated independently of the score."""

    description: str


class Tags(_Strict):
    """Table 1 categories: multi-label type, memory requirement, dynamics."""

    types: list[EnvType] = Field(min_length=1)
    memory: Literal["Single", "Multiple"]
    dynamics: Literal["Static", "Dynamic"]
    provenance: str | None = Field(
        default=None, description="which evidence in the paper fixes these tags"
    )


class Rules(_Strict):
    """Rules text in two levels: non-visual constraints, and the full mechanics."""

    basic: str = Field(min_length=20)
    detailed: str = Field(min_length=40)


class DemoClip(_Strict):
    """A demonstration clip as data: a start state, actions and a terminal label."""

    id: str
    seed: int | None = None
    initial_skip: int = 0
    init_actions: list[str] = Field(default_factory=list)
    actions: list[str] = Field(min_length=1)
    label: Outcome
    source: str = Field(description="how the clip was produced (expert tool and settings)")


class TaskVariant(_WithParams):
    """One task: a start state on an environment, with per-task overrides."""

    variant: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    kind: Literal["base", "parameterized", "human-init"]
    seed: int
    initial_skip: int = Field(default=0, ge=0)
    init_actions: list[str] = Field(default_factory=list)
    init_source: str | None = Field(
        default=None,
        description="where the human-init sequence comes from: 'paper: <figure/section>' "
        "or 'generated: <how>'",
    )
    max_steps: int | None = Field(default=None, gt=0)
    targets: dict[str, Target] = Field(default_factory=dict)
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    demos: list[DemoClip] = Field(default_factory=list)

    @field_validator("init_source")
    @classmethod
    def _init_source_form(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("paper:", "generated:")):
            raise ValueError(
                f"init_source {v[:40]!r}... must start with 'paper: <where the paper states "
                "the sequence>' or 'generated: <how it was produced>'"
            )
        return v

    @model_validator(mode="after")
    def _init_source_required(self) -> TaskVariant:
        if self.init_actions and not self.init_source:
            raise ValueError("init_source is required when init_actions is not empty")
        return self


LOSS_SCOPES: tuple[str, ...] = ("env", "settings", "every")


class DemoQuota(_Strict):
    """How the environment's demo clips are packed (:mod:`vical.demos.packages`).

    ``pool``: distinct clips in the environment's shared pool; ``clips``: one digit
    (1-4) per task, in file order, the clips of that task's package; ``loss_scope``:
    where a failure clip must be shown, ``env``, ``settings``, ``every`` or the name
    of a task parameter (a loss shown for every value of it).
    """

    pool: int = Field(ge=1, description="distinct clips in the shared pool")
    clips: str = Field(
        pattern=r"^[1-4]+$", description="clips per task package, one digit per task in file order"
    )
    loss_scope: str = Field(default="env", min_length=1)

    @field_validator("clips", mode="before")
    @classmethod
    def _digits_as_text(cls, v: Any) -> Any:
        # an unquoted digit string reads as a YAML integer; its digits are the same
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class EnvSpec(_Strict):
    """One environment file (``vical/tasks/<env>.yaml``)."""

    env: str = Field(pattern=r"^[a-z0-9]+$")
    name: str
    paper_id: str = Field(description="the environment id used in the paper's tables")
    family: Literal[
        "toytext",
        "classic",
        "ale",
        "minigrid",
        "breakout",
        "procgen",
        "highway",
        "tetris",
        "flappy",
    ]
    sim_id: str = Field(description="the id handed to the simulator package")
    package: str
    actions: dict[str, Any] = Field(description="canonical action name -> native action")
    noop: Any = Field(default=None, description="native action used for NOOP fill and skips")
    frame_skip: int = Field(ge=1)
    action_steps: int = Field(ge=1)
    max_steps: int = Field(gt=0)
    life_loss_terminates: bool = False
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    scoring: ScoringRule
    pass_rule: PassRule
    tags: Tags
    rules: Rules
    demo_quota: DemoQuota | None = Field(
        default=None, description="how the demo clips are packed (vical demos pack)"
    )
    tasks: list[TaskVariant] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> EnvSpec:
        if self.action_steps > self.frame_skip:
            raise ValueError(
                f"action_steps ({self.action_steps}) cannot exceed frame_skip ({self.frame_skip})"
            )
        if self.action_steps < self.frame_skip and self.noop is None:
            raise ValueError("noop is required when action_steps < frame_skip (NOOP fill)")
        seen: set[str] = set()
        for t in self.tasks:
            if t.variant in seen:
                raise ValueError(f"duplicate task variant {t.variant!r}")
            seen.add(t.variant)
            for a in t.init_actions:
                if a not in self.actions:
                    raise ValueError(
                        f"task {self.env}/{t.variant}: init action {a!r} is not one of "
                        f"{list(self.actions)}"
                    )
            for clip in t.demos:
                for a in [*clip.init_actions, *clip.actions]:
                    if a not in self.actions:
                        raise ValueError(
                            f"task {self.env}/{t.variant}: demo {clip.id} action {a!r} is not "
                            f"one of {list(self.actions)}"
                        )
        if sum(t.kind == "base" for t in self.tasks) != 1:
            raise ValueError("exactly one task must have kind 'base'")
        self._check_param_provenance()
        return self

    def demo_quota_problem(self) -> str | None:
        """What is wrong with the quota against this file's tasks (None: nothing).

        Checked when a task file loads (:func:`load_env_file`), not by the model: an
        environment taken with some of its tasks (a generator's or a test's copy)
        keeps the file's quota, which describes the file.
        """
        q = self.demo_quota
        if q is None:
            return None
        if len(q.clips) != len(self.tasks):
            return (
                f"demo_quota.clips {q.clips!r} has {len(q.clips)} digits for {len(self.tasks)} "
                "tasks; give one digit (1-4) per task, in file order"
            )
        names = {k for t in self.tasks for k in t.params}
        names |= set(self.scoring.params) | set(self.pass_rule.params)
        if q.loss_scope not in LOSS_SCOPES and q.loss_scope not in names:
            return (
                f"demo_quota.loss_scope {q.loss_scope!r} is neither one of "
                f"{', '.join(LOSS_SCOPES)} nor a task parameter "
                f"({', '.join(sorted(names)) or 'none defined'})"
            )
        return None

    def _check_param_provenance(self) -> None:
        """Every numeric rule or task parameter must say where it comes from."""
        fix = (
            'add it under {where} as {key}: "paper: <table or section>" or '
            '{key}: "calibrated: <how the number was obtained>"'
        )
        problems = []
        for name, rule in (("scoring", self.scoring), ("pass_rule", self.pass_rule)):
            for key in rule.missing_provenance():
                problems.append(
                    f"{self.env}.yaml: {name}.params.{key} has no provenance; "
                    + fix.format(where=f"{name}.provenance", key=key)
                )
        for t in self.tasks:
            for key in t.missing_provenance():
                problems.append(
                    f"{self.env}.yaml: task {self.env}/{t.variant}: params.{key} has no "
                    "provenance; " + fix.format(where="the task's provenance", key=key)
                )
        if problems:
            raise ValueError("\n".join(problems))


class TaskSpec(BaseModel):
    """A resolved task: its environment plus one variant, overrides applied."""

    model_config = ConfigDict(frozen=True)

    env: EnvSpec
    variant: TaskVariant

    @property
    def id(self) -> str:
        return f"{self.env.env}/{self.variant.variant}"

    @property
    def max_steps(self) -> int:
        return self.variant.max_steps or self.env.max_steps

    @property
    def targets(self) -> dict[str, Target]:
        return {**self.env.scoring.targets, **self.variant.targets}

    def target(self, name: str) -> float:
        try:
            return self.targets[name].value
        except KeyError:
            raise TaskSpecError(
                f"task {self.id}: scoring target {name!r} is missing; add it under "
                f"scoring.targets in {self.env.env}.yaml or under the task's targets"
            ) from None

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return {**self.env.env_kwargs, **self.variant.env_kwargs}

    @property
    def params(self) -> dict[str, Any]:
        return {**self.env.scoring.params, **self.env.pass_rule.params, **self.variant.params}

    @property
    def action_names(self) -> list[str]:
        return list(self.env.actions)


def _locate(err: ErrorDetails, data: Any) -> tuple[str | None, str]:
    """Turn a pydantic error location into (task id, dotted field path)."""
    loc = list(err["loc"])
    task_id = None
    if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
        try:
            task_id = data["tasks"][loc[1]].get("variant", f"#{loc[1]}")
        except (KeyError, IndexError, TypeError, AttributeError):
            task_id = f"#{loc[1]}"
        loc = loc[2:]
    return task_id, ".".join(str(x) for x in loc) or "<file>"


# libyaml's loader when PyYAML was built with it: the same documents, about five times
# faster than the pure-Python one (all 37 files: 0.07 s instead of 0.36 s).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _kind(data: Any) -> str:
    """How a YAML document's top level reads, for an error message."""
    if data is None:
        return "nothing (the file is empty)"
    if isinstance(data, list):
        return "a list"
    return f"a single {type(data).__name__} value"


def read_env_file(path: Path) -> dict[str, Any]:
    """A task file's YAML mapping, with errors naming the file."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TaskSpecError(
            f"{path}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}: "
            f"{e.reason}); task files must be UTF-8 YAML"
        ) from None
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as e:
        raise TaskSpecError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise TaskSpecError(
            f"{path}: expected a mapping of fields (env: ..., sim_id: ...) at top level, "
            f"found {_kind(data)}"
        )
    return data


def load_env_file(path: Path) -> EnvSpec:
    """Load and validate one environment file, with errors naming file, task and field.

    Besides the file's shape this checks it against the installed simulators
    (:func:`vical.envs.checks.check_env`): ``package``, ``sim_id`` where the
    registry is cheap to read, and native actions where the action space is
    known without building a game.
    """
    data = read_env_file(path)
    try:
        spec = EnvSpec.model_validate(data)
    except ValidationError as e:
        lines = []
        env = data.get("env", path.stem)
        for err in e.errors():
            task, field = _locate(err, data)
            where = f"task {env}/{task}" if task else f"environment {env}"
            lines.append(f"{path}: {where}: field '{field}': {err['msg']}")
        raise TaskSpecError("\n".join(lines)) from None
    if spec.env != path.stem:
        raise TaskSpecError(
            f"{path}: field 'env': value {spec.env!r} must equal the file name {path.stem!r}"
        )
    quota = spec.demo_quota_problem()
    if quota is not None:
        raise TaskSpecError(f"{path}: environment {spec.env}: field 'demo_quota': {quota}")
    from vical.envs.checks import check_env  # vical.envs imports this module

    check_env(spec, path)
    return spec


def _folders(tasks_dir: TaskDirs | str) -> tuple[Path, ...]:
    if isinstance(tasks_dir, (str, os.PathLike)):
        return (Path(tasks_dir),)
    return tuple(Path(p) for p in tasks_dir)


def _files(folders: tuple[Path, ...]) -> dict[str, Path]:
    """Environment key -> task file over ``folders`` in order (a later file of the same
    name replaces an earlier one), sorted by key."""
    files: dict[str, Path] = {}
    for folder in folders:
        for f in sorted(folder.glob("*.yaml")):
            files[f.stem] = f
    return dict(sorted(files.items()))


def task_files(tasks_dir: TaskDirs = TASK_DIRS) -> dict[str, Path]:
    """Environment key -> the task file read for it, sorted by key.

    ``tasks_dir`` is one folder or several read in order; by default the built-in
    set and then each folder of ``$VICAL_TASKS_DIR``, whose files add environments
    (or replace the built-in file of the same name). A folder without task files is
    an error: it is a wrong path far more often than an intended empty set.
    """
    folders = _folders(tasks_dir)
    for folder in folders:
        if not any(folder.glob("*.yaml")):
            raise TaskSpecError(f"{folder}: no task files (*.yaml) found")
    return _files(folders)


def env_file(env_key: str, tasks_dir: TaskDirs = TASK_DIRS) -> Path:
    """The task file read for environment ``env_key``."""
    files = task_files(tasks_dir)
    if env_key not in files:
        raise TaskSpecError(f"unknown environment {env_key!r}; known: {', '.join(files)}")
    return files[env_key]


@cache
def load_envs(tasks_dir: TaskDirs = TASK_DIRS) -> dict[str, EnvSpec]:
    """All environment files of the task folders (:func:`task_files`), keyed by environment."""
    return {key: load_env_file(f) for key, f in task_files(tasks_dir).items()}


def all_tasks(tasks_dir: TaskDirs = TASK_DIRS) -> list[TaskSpec]:
    """Every task of every environment, in environment then variant order."""
    return [
        TaskSpec(env=env, variant=v) for env in load_envs(tasks_dir).values() for v in env.tasks
    ]


def get_task(task_id: str, tasks_dir: TaskDirs = TASK_DIRS) -> TaskSpec:
    """Look a task up by its id ``<env>/<variant>``."""
    env_key, _, variant = task_id.partition("/")
    envs = load_envs(tasks_dir)
    if env_key not in envs:
        raise TaskSpecError(
            f"unknown environment {env_key!r} in task id {task_id!r}; known: {', '.join(envs)}"
        )
    for v in envs[env_key].tasks:
        if v.variant == variant:
            return TaskSpec(env=envs[env_key], variant=v)
    raise TaskSpecError(
        f"unknown task {task_id!r}; variants of {env_key}: "
        f"{', '.join(v.variant for v in envs[env_key].tasks)}"
    )


def select_tasks(patterns: str | None, tasks_dir: TaskDirs = TASK_DIRS) -> list[TaskSpec]:
    """Tasks matching comma-separated glob patterns (``taxi/*,cartpole/base``); all if None."""
    from fnmatch import fnmatchcase

    tasks = all_tasks(tasks_dir)
    if not patterns:
        return tasks
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    chosen: list[TaskSpec] = []
    for p in pats:
        p2 = p if "/" in p else f"{p}/*"
        hits = [t for t in tasks if fnmatchcase(t.id, p2)]
        if not hits:
            raise TaskSpecError(
                f"task pattern {p!r} matches no task; try `vical tasks list` to see the ids"
            )
        chosen.extend(h for h in hits if h not in chosen)
    return chosen


# The simulators' own version: raised whenever a change to vical's simulator code
# changes a frame, score or ending while the task files stay the same (2: float
# math through vical.envs.fpmath, the same bits on every CPU). It is part of the
# task-data digest, so runs, bundles and datasets of another version are told
# apart by the same check as other task data.
SIMULATOR_VERSION = 2


def tasks_digest(tasks_dir: TaskDirs = TASK_DIRS) -> str:
    """sha256 over the simulator version and every task file read (names and bytes),
    in name order: the task-data version.

    Only the files read count, not the folders they come from: with nothing added the
    digest is the built-in set's, and an added environment changes it as any other
    change of task data does.
    """
    h = hashlib.sha256(f"simulator {SIMULATOR_VERSION}\0".encode())
    for f in sorted(_files(_folders(tasks_dir)).values(), key=lambda f: f.name):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()
