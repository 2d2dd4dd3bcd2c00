"""What an evaluation writes to disk: pydantic models and atomic file helpers."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

# FAILURE_MODES is re-exported for the callers that import it from here
from vical.outcomes import FAILURE_MODES, INFRASTRUCTURE_FAILURES, FailureMode  # noqa: F401
from vical.run.shard import MergedShard, ShardInfo


class EvalResult(BaseModel):
    """One episode's outcome (``eval_result.json``). The report reads only these."""

    schema_version: int = 1
    task_id: str
    env: str
    variant: str
    run_index: int
    agent: str
    seed: int
    score: float = Field(ge=0.0, le=100.0)
    passed: bool
    outcome: str | None
    failure_mode: FailureMode | None
    steps: int
    max_steps: int
    actions: list[str]
    frame_hashes: list[str]
    tags: dict[str, Any]
    progress: dict[str, Any] = Field(default_factory=dict)
    usage: dict[str, int] = Field(default_factory=dict)
    cost_usd: float | None = None
    wall_seconds: float
    agent_seconds: float
    started_at: str
    finished_at: str
    vical_version: str
    files: dict[str, str] = Field(
        default_factory=dict,
        description="sha256 of every other file of the episode folder, by relative path",
    )

    @property
    def infrastructure_failure(self) -> bool:
        return self.failure_mode in INFRASTRUCTURE_FAILURES


class RunManifest(BaseModel):
    """A run folder's ``manifest.json``: who ran what, with which settings and versions."""

    schema_version: int = 1
    run_id: str
    agent: str
    agent_settings: dict[str, Any]
    run_seed: int
    runs_per_task: int
    tasks: list[str]
    tasks_digest: str
    versions: dict[str, str]
    created_at: str
    command: list[str] = Field(default_factory=list)
    image: dict[str, str] | None = None
    demos: bool = True
    # which rules text the prompt carried (`vical eval --rules`); older manifests: basic
    rules: str = Field(default="basic", pattern=r"^(basic|detailed)$")
    # set by `vical eval --shard`; a merged run has none, and lists its shards instead
    shard: ShardInfo | None = None
    merged_from: list[MergedShard] | None = None
    # the reproducibility self-check before the run (vical.run.doctor): status ok,
    # diverged, stale, missing or skipped, and its one-line summary; None: not run
    # (older manifests, runs started from the library)
    doctor: dict[str, Any] | None = None
    # the machine that started the run: cpu_model, machine, numpy_features
    machine: dict[str, Any] | None = None
    # a coupled run (vical wm couple): {name, horizon, candidates, endpoint} of the world
    # model whose imagined rollouts the agent saw before each move; None: a plain run
    world_model: dict[str, Any] | None = None


def read_manifest(
    run_dir: Path, hint: str = "pass a folder that `vical eval` wrote"
) -> RunManifest:
    """The run folder's ``manifest.json``; :class:`~vical.errors.RunFolderError` naming the
    folder (and ``hint``, the fix) when it is missing or not a run manifest."""
    from vical.errors import RunFolderError

    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        raise RunFolderError(f"{run_dir}: no manifest.json; {hint}")
    try:
        return RunManifest.model_validate_json(path.read_bytes())
    except ValueError as e:
        raise RunFolderError(f"{path} is not a vical run manifest ({type(e).__name__})") from None


def run_model(run_dir: Path) -> str | None:
    """The ``--model`` a run folder's manifest records, None without one (or a manifest)."""
    if not (Path(run_dir) / "manifest.json").is_file():
        return None
    return read_manifest(run_dir).agent_settings.get("model")


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _read_umask()
FILE_MODE = 0o666 & ~UMASK  # what open() would give: every file a run writes has this mode


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``.

    The file gets the mode a plain ``open()`` would give (0666 less the umask),
    not ``mkstemp``'s private 0600, so a run's files all share one mode.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks (bundles and videos can be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_json(path: Path, obj: Any) -> None:
    if isinstance(obj, BaseModel):
        text = obj.model_dump_json(indent=2)
    else:
        text = json.dumps(obj, indent=2, sort_keys=True)
    atomic_write_bytes(path, (text + "\n").encode())


def load_all_results(run_dir: Path) -> list[EvalResult]:
    """Every episode folder's result, infrastructure failures included."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder")
    out = [
        EvalResult.model_validate_json(p.read_text())
        for p in sorted((run_dir / "episodes").glob("*/eval_result.json"))
    ]
    return sorted(out, key=lambda r: (r.task_id, r.run_index))


def load_results(run_dir: Path) -> list[EvalResult]:
    """The results of a run folder, sorted by task then run index.

    Episodes that ended in an infrastructure failure (``api_error``) are not
    results and are left out; :func:`load_infrastructure_failures` lists them.
    """
    return [r for r in load_all_results(run_dir) if not r.infrastructure_failure]


def load_infrastructure_failures(run_dir: Path) -> list[EvalResult]:
    """Episodes that ended because the endpoint or network failed, not the model."""
    return [r for r in load_all_results(run_dir) if r.infrastructure_failure]
