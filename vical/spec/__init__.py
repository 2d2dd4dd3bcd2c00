"""Task data: the environment files ``vical/tasks/<env>.yaml`` and their loaders.

One YAML file describes one environment: its simulator, canonical action
vocabulary, frame-skip settings, scoring rule with calibrated targets, pass
rule, tags, rules text, and the list of task variants built on it.

The package has three parts, imported in one direction only:

* :mod:`vical.spec.models`: the pydantic models (:class:`EnvSpec`, :class:`TaskSpec`
  and their parts), which check a file's shape;
* :mod:`vical.spec.checks`: the checks of a file against the installed simulators;
* this module: finding, reading and loading the files (both of the above applied),
  selecting tasks, and the task-data digest. The models are re-exported here.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from vical.errors import TaskSpecError
from vical.spec.checks import check_env
from vical.spec.models import (
    CLIP_ORIGINS,
    ENV_TYPES,
    HUMAN_FORM,
    INIT_ORIGINS,
    LOSS_SCOPES,
    ORIGINS,
    OUTCOMES,
    DemoClip,
    DemoQuota,
    EnvSpec,
    EnvType,
    Outcome,
    PassRule,
    Rules,
    ScoringRule,
    Tags,
    Target,
    TaskSpec,
    TaskVariant,
    check_provenance,
    human_source,
    numeric_keys,
    origin_counts,
    parse_human_source,
    source_origin,
)

# Where task files come from. The package ships one file per environment in
# BUILTIN_TASKS_DIR; $VICAL_BUILTIN_TASKS_DIR reads that set from another folder instead
# (a dataset's copy, say). $VICAL_TASKS_DIR names more folders (separated by the
# platform's path separator) whose files are added to that set; a file named like one
# already read replaces it. TASKS_DIR is the folder of the built-in set, TASK_DIRS every
# folder in the order they are read: the default of the functions below.
BUILTIN_TASKS_VAR = "VICAL_BUILTIN_TASKS_DIR"
TASKS_DIR_VAR = "VICAL_TASKS_DIR"
BUILTIN_TASKS_DIR = Path(__file__).parent.parent / "tasks"
TASKS_DIR = Path(os.environ.get(BUILTIN_TASKS_VAR) or BUILTIN_TASKS_DIR)
EXTRA_TASKS_DIRS: tuple[Path, ...] = tuple(
    Path(p) for p in os.environ.get(TASKS_DIR_VAR, "").split(os.pathsep) if p.strip()
)
TASK_DIRS: tuple[Path, ...] = (TASKS_DIR, *EXTRA_TASKS_DIRS)
# one folder, or several read in order (a later folder's file replaces an earlier one)
TaskDirs = Path | tuple[Path, ...]


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
    (:func:`vical.spec.checks.check_env`): ``package``, ``sim_id`` where the
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


def task_patterns(patterns: str | Iterable[str] | None) -> list[str]:
    """The glob patterns of a selection: one string of comma-separated patterns
    (``taxi/*,cartpole/base``) or a list of them (each item may itself hold commas, as
    Inspect's ``-T tasks=a,b`` or a YAML list arrive); empty items are dropped."""
    if patterns is None:
        return []
    items = [patterns] if isinstance(patterns, str) else list(patterns)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TaskSpecError(
                f"task pattern {item!r} is not text; give patterns such as 'taxi/*,cartpole/base'"
            )
        out.extend(p.strip() for p in item.split(",") if p.strip())
    return out


def select_tasks(
    patterns: str | Iterable[str] | None, tasks_dir: TaskDirs = TASK_DIRS
) -> list[TaskSpec]:
    """Tasks matching glob patterns (``taxi/*,cartpole/base``, or a list of such
    strings, see :func:`task_patterns`); all when there is none."""
    from fnmatch import fnmatchcase

    tasks = all_tasks(tasks_dir)
    pats = task_patterns(patterns)
    if not pats:
        return tasks
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


__all__ = [
    "BUILTIN_TASKS_DIR",
    "CLIP_ORIGINS",
    "ENV_TYPES",
    "HUMAN_FORM",
    "INIT_ORIGINS",
    "LOSS_SCOPES",
    "ORIGINS",
    "OUTCOMES",
    "TASKS_DIR",
    "TASK_DIRS",
    "DemoClip",
    "DemoQuota",
    "EnvSpec",
    "EnvType",
    "Outcome",
    "PassRule",
    "Rules",
    "ScoringRule",
    "Tags",
    "Target",
    "TaskDirs",
    "TaskSpec",
    "TaskSpecError",
    "TaskVariant",
    "all_tasks",
    "check_provenance",
    "env_file",
    "get_task",
    "human_source",
    "load_env_file",
    "load_envs",
    "numeric_keys",
    "origin_counts",
    "parse_human_source",
    "read_env_file",
    "select_tasks",
    "source_origin",
    "task_files",
    "task_patterns",
    "tasks_digest",
]
