"""What the viewer shows, read from run folders and bundles, one episode at a time.

Opening a run reads its ``manifest.json`` and the small ``eval_result.json`` of
each episode (the task × runs table needs nothing else); an episode's log,
frames and demonstration videos are read only when that episode is opened. So a
run of 342 tasks × 3 runs opens in the time it takes to read about a thousand
small JSON files, and memory holds one episode's frames at a time (a small LRU
cache keeps the last few).

Frames come from the episode's ``frames/`` folder when the run saved them;
otherwise the episode is replayed from its logged actions (invariant 1: a task
and an action list fix every frame), and each replayed frame is checked against
the frame hash the episode recorded. A replay runs on its own thread
(:class:`Replay`) and hands out each frame as soon as it is made and checked,
so the first frame of a long episode shows while the rest is still replaying;
:meth:`Catalog.warm` starts one before its frames are asked for, and
:meth:`Catalog.warm_simulators` imports the runs' simulators in the background
(the slow part of a first replay) while the person reads the table.

A bundle (``.tar.gz`` from ``vical submit``) is unpacked, with the same member
rules as ``vical verify`` (no links, no paths outside the bundle, size caps), into
a temporary folder that lives as long as the :class:`Catalog`; its signature is
not checked, since viewing trusts nothing it shows.
"""

from __future__ import annotations

import io
import json
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vical.errors import RunFolderError
from vical.outcomes import FAILURE_MODES, episode_name
from vical.run.results import EvalResult, RunManifest, read_manifest

PASSED = "passed"  # the table's word for an episode with no failure mode


class ViewError(ValueError):
    """A path the viewer cannot open, named with the reason."""


@dataclass
class Run:
    """One opened run: its folder, a unique short name, its manifest and results."""

    key: str  # r0, r1, ... in the order given
    name: str
    folder: Path
    source: str  # what the user passed (folder or bundle path)
    manifest: RunManifest
    results: dict[str, EvalResult] = field(default_factory=dict)  # by episode name

    @property
    def label(self) -> str:
        model = self.manifest.agent_settings.get("model")
        who = self.manifest.agent_settings.get("participant")
        extra = f", {model}" if model else f", participant {who}" if who else ""
        return f"{self.name} ({self.manifest.agent}{extra})"


def _outcome(r: EvalResult) -> dict[str, Any]:
    """What the table and the player both show of an episode's result."""
    return {
        "run_index": r.run_index,
        "score": r.score,
        "passed": r.passed,
        "outcome": r.outcome,
        "failure_mode": r.failure_mode,
        "steps": r.steps,
        "max_steps": r.max_steps,
    }


def _open_folder(folder: Path) -> tuple[RunManifest, dict[str, EvalResult]]:
    try:
        manifest = read_manifest(folder, "pass a vical run folder or bundle")
    except RunFolderError as e:
        raise ViewError(str(e)) from None
    results: dict[str, EvalResult] = {}
    for p in sorted((folder / "episodes").glob("*/eval_result.json")):
        try:
            r = EvalResult.model_validate_json(p.read_text())
        except ValueError as e:
            raise ViewError(f"{p} is not an episode result ({type(e).__name__})") from None
        results[p.parent.name] = r
    return manifest, results


class Catalog:
    """The runs being viewed, and on-demand access to their episodes.

    Use as a context manager (or call :meth:`close`) so the folders unpacked from
    bundles are removed.
    """

    def __init__(self, sources: list[Path], cache_episodes: int = 4) -> None:
        if not sources:
            raise ViewError("name at least one run folder or bundle")
        self._tmp = tempfile.TemporaryDirectory(prefix="vical-view-")
        self.runs: list[Run] = []
        names: list[str] = []
        try:
            for i, src in enumerate(sources):
                folder = self._resolve(Path(src), i)
                manifest, results = _open_folder(folder)
                base = manifest.run_id or folder.name
                name, k = base, 2
                while name in names:
                    name, k = f"{base}#{k}", k + 1
                names.append(name)
                self.runs.append(Run(f"r{i}", name, folder, str(src), manifest, results))
        except BaseException:
            self._tmp.cleanup()
            raise
        self._replays: OrderedDict[tuple[str, str], Replay] = OrderedDict()
        self._cache_size = cache_episodes
        self._lock = threading.Lock()
        self._warming: threading.Thread | None = None

    def _resolve(self, src: Path, i: int) -> Path:
        if src.is_dir():
            return src
        if src.is_file() and src.name.endswith((".tar.gz", ".tgz", ".tar")):
            from vical.submit.unpack import safe_extract
            from vical.submit.verdict import VerifyError

            dest = Path(self._tmp.name) / f"b{i}"
            try:
                safe_extract(src, dest)
            except VerifyError as e:
                raise ViewError(f"{src}: cannot unpack the bundle: {e}") from None
            folder = dest / "bundle" / "run"
            if not folder.is_dir():
                raise ViewError(f"{src}: the bundle holds no run/ folder")
            return folder
        raise ViewError(f"{src}: no such run folder or bundle (.tar.gz)")

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lookups -----------------------------------------------------------------------
    def run(self, key: str) -> Run:
        for r in self.runs:
            if r.key == key:
                return r
        raise ViewError(f"no run {key!r}; the runs are {[r.key for r in self.runs]}")

    def result(self, key: str, episode: str) -> tuple[Run, EvalResult]:
        run = self.run(key)
        r = run.results.get(episode)
        if r is None:
            raise ViewError(f"run {run.name} has no episode {episode!r}")
        return run, r

    # -- the table ----------------------------------------------------------------------
    def index(self) -> dict[str, Any]:
        """Runs, and one row per task with each run's episodes (score, pass, outcome)."""
        from vical.spec import all_tasks

        known = {t.id: t for t in all_tasks()}
        tasks: dict[str, dict[str, Any]] = {}
        for run in self.runs:
            for ep, r in run.results.items():
                row = tasks.get(r.task_id)
                if row is None:
                    t = known.get(r.task_id)
                    row = tasks[r.task_id] = {
                        "task": r.task_id,
                        "env": r.env,
                        "game": t.env.name if t else r.env,
                        "types": list(r.tags.get("types", [])),
                        "memory": r.tags.get("memory"),
                        "dynamics": r.tags.get("dynamics"),
                        "runs": {},
                    }
                row["runs"].setdefault(run.key, []).append(
                    {
                        "episode": ep,
                        **_outcome(r),
                        "infrastructure_failure": r.infrastructure_failure,
                    }
                )
        for row in tasks.values():
            for eps in row["runs"].values():
                eps.sort(key=lambda e: e["run_index"])
        return {
            # the outcome vocabulary of the table and its filter: vical.outcomes' names
            "outcomes": [PASSED, *(str(m) for m in FAILURE_MODES)],
            "runs": [
                {
                    "key": r.key,
                    "name": r.name,
                    "label": r.label,
                    "agent": r.manifest.agent,
                    "model": r.manifest.agent_settings.get("model"),
                    "source": r.source,
                    "episodes": len(r.results),
                }
                for r in self.runs
            ],
            "tasks": [tasks[k] for k in sorted(tasks)],
        }

    # -- one episode -------------------------------------------------------------------
    def episode(self, key: str, episode: str) -> dict[str, Any]:
        """Everything the episode player shows, turn by turn, from the episode's files."""
        run, r = self.result(key, episode)
        folder = run.folder / "episodes" / episode
        turns: list[dict[str, Any]] = [
            {"step": i, "attempts": [], "decision": None, "after": None}
            for i in range(len(r.actions) + 1)
        ]
        log_path = folder / "log.jsonl"
        records = []
        if log_path.is_file():
            with open(log_path) as f:
                records = [json.loads(line) for line in f if line.strip()]
        session = None
        end = None
        for rec in records:
            kind = rec.get("type")
            step = rec.get("step")
            if kind == "agent_session":
                session = {k: rec.get(k) for k in ("backend", "settings")}
            elif kind == "end":
                end = rec
            elif isinstance(step, int):
                if kind == "step":
                    # the step record is the result of the decision taken at step - 1
                    if 0 < step <= len(r.actions):
                        turns[step - 1]["after"] = {
                            k: rec.get(k) for k in ("score", "outcome", "terminated", "truncated")
                        }
                    continue
                if not 0 <= step < len(turns):
                    continue
                turn = turns[step]
                if kind == "response":
                    turn["attempts"].append(
                        {
                            "kind": "response",
                            "text": rec.get("text"),
                            "reasoning": rec.get("reasoning"),
                            "parse_error": (rec.get("parse") or {}).get("error"),
                            "finish_reason": rec.get("finish_reason"),
                            "latency_s": rec.get("latency_s"),
                            "truncated_from": rec.get("truncated_from"),
                        }
                    )
                elif kind == "api_error":
                    turn["attempts"].append(
                        {
                            "kind": "api_error",
                            "status": rec.get("status"),
                            "reason": rec.get("reason"),
                            "message": rec.get("message"),
                        }
                    )
                elif kind in ("decision", "agent_failure"):
                    turn["decision"] = {
                        k: rec.get(k)
                        for k in (
                            "action",
                            "failure",
                            "format_retries",
                            "transport_retries",
                            "wall_seconds",
                            "input",
                        )
                        if k in rec
                    }
        return {
            "run": run.key,
            "run_name": run.name,
            "run_label": run.label,
            "episode": episode,
            "task": r.task_id,
            "agent": r.agent,
            "session": session,
            **_outcome(r),
            "actions": r.actions,
            "frame_hashes": r.frame_hashes,
            "frames_saved": (folder / "frames").is_dir(),
            "end": end,
            "turns": turns,
            "demos": self.demos(r.task_id),
        }

    def demos(self, task_id: str) -> list[dict[str, Any]]:
        from vical.spec import get_task

        try:
            task = get_task(task_id)
        except (KeyError, ValueError):
            return []
        return [
            {"index": i, "id": c.id, "label": c.label, "actions": len(c.actions)}
            for i, c in enumerate(task.variant.demos)
        ]

    def demo_mp4(self, task_id: str, index: int) -> bytes:
        from vical.demos import load_demo_clip
        from vical.spec import get_task

        task = get_task(task_id)
        clips = task.variant.demos
        if not 0 <= index < len(clips):
            raise ViewError(f"{task_id} has {len(clips)} demonstration(s); no video {index}")
        return load_demo_clip(task, clips[index]).mp4

    # -- frames ------------------------------------------------------------------------
    def _saved(self, key: str, episode: str) -> tuple[EvalResult, list[Path] | None]:
        """The episode's result, and its saved frame files (None: they must be replayed)."""
        run, r = self.result(key, episode)
        return r, saved_frames(run.folder / "episodes" / episode, r)

    def _replay(self, key: str, episode: str, r: EvalResult) -> Replay:
        """The episode's replay: running or finished, or started now (kept LRU)."""
        with self._lock:
            rep = self._replays.get((key, episode))
            if rep is not None:
                self._replays.move_to_end((key, episode))
                return rep
            rep = self._replays[(key, episode)] = Replay(r)
            # forget the oldest finished replays beyond the cache size
            for k in [k for k, v in self._replays.items() if v.finished][
                : max(0, len(self._replays) - self._cache_size)
            ]:
                del self._replays[k]
            return rep

    def warm(self, key: str, episode: str) -> None:
        """Start replaying an episode whose frames were not saved (returns at once)."""
        r, saved = self._saved(key, episode)
        if saved is None:
            self._replay(key, episode, r)

    def warm_simulators(self) -> None:
        """Import the simulators the runs' tasks need, once, on a background thread."""
        with self._lock:
            if self._warming is not None:
                return
            ids = sorted({r.task_id for run in self.runs for r in run.results.values()})
            self._warming = threading.Thread(
                target=_preload, args=(ids,), daemon=True, name="vical-view-warm"
            )
        self._warming.start()

    def frames(self, key: str, episode: str) -> list[bytes]:
        """Every frame of an episode as PNG bytes: saved ones, or replayed and checked."""
        r, saved = self._saved(key, episode)
        if saved is not None:
            return [p.read_bytes() for p in saved]
        return self._replay(key, episode, r).all()

    def frame(self, key: str, episode: str, index: int) -> bytes:
        """Frame ``index`` of an episode, as soon as it exists (saved, or replayed so far)."""
        r, saved = self._saved(key, episode)
        n = len(r.frame_hashes)
        if not 0 <= index < n:
            raise ViewError(f"{episode} has {n} frames; no frame {index}")
        if saved is not None:
            return saved[index].read_bytes()
        return self._replay(key, episode, r).frame(index)


def _preload(task_ids: list[str]) -> None:
    """Import the simulator modules of ``task_ids`` (best effort: a replay reports problems)."""
    from vical.envs import preload
    from vical.spec import get_task

    tasks = []
    for t in task_ids:
        try:
            tasks.append(get_task(t))
        except (KeyError, ValueError):
            continue
    preload(tasks)


def saved_frames(folder: Path, r: EvalResult) -> list[Path] | None:
    """The episode's saved frame files in order, or None when they are not all there."""
    saved = sorted((folder / "frames").glob("*.png")) if (folder / "frames").is_dir() else []
    return saved if len(saved) == len(r.frame_hashes) else None


def episode_frames(folder: Path, r: EvalResult) -> list[bytes]:
    """The PNG frames of the episode in ``folder``: its saved ones, or replayed."""
    saved = saved_frames(folder, r)
    if saved is not None:
        return [p.read_bytes() for p in saved]
    return replay_frames(r)


def replay_frames(r: EvalResult) -> list[bytes]:
    """Re-render an episode's frames by replaying its actions; each must match its hash."""
    return list(replayed_frames(r))


def replayed_frames(r: EvalResult) -> Iterator[bytes]:
    """An episode's frames as PNG, one by one as the replay makes them, each checked
    against the frame hash the episode recorded before it is given out."""
    from PIL import Image

    from vical.envs import make_env
    from vical.envs.core import frame_sha256

    def png(frame: Any) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def differs(i: int) -> ViewError:
        return ViewError(
            f"{episode_name(r.task_id, r.run_index)}: replayed frame {i} differs from the "
            "recorded one (other task data or simulator versions than the run's)"
        )

    expected = len(r.frame_hashes)
    env = make_env(r.task_id)
    try:
        frame = env.reset()
        if not expected or frame_sha256(frame) != r.frame_hashes[0]:
            raise differs(0)
        yield png(frame)
        for i, a in enumerate(r.actions, start=1):
            frame = env.step(a).frame
            if i >= expected or frame_sha256(frame) != r.frame_hashes[i]:
                raise differs(min(i, expected))
            yield png(frame)
    finally:
        env.close()
    if len(r.actions) + 1 != expected:
        raise differs(len(r.actions) + 1)


class Replay:
    """One episode replayed on a daemon thread; its frames are read as they come."""

    def __init__(self, r: EvalResult) -> None:
        self.name = episode_name(r.task_id, r.run_index)
        self._pngs: list[bytes] = []
        self._error: str | None = None
        self.finished = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(
            target=self._run, args=(r,), daemon=True, name=f"vical-view-replay {self.name}"
        )
        self._thread.start()

    def _run(self, r: EvalResult) -> None:
        error = None
        try:
            for png in replayed_frames(r):
                with self._cond:
                    self._pngs.append(png)
                    self._cond.notify_all()
        except ViewError as e:
            error = str(e)
        except Exception as e:  # a simulator that fails: say so to whoever waits
            error = f"{self.name}: the replay failed ({type(e).__name__}: {e})"
        with self._cond:
            self._error, self.finished = error, True
            self._cond.notify_all()

    def frame(self, index: int) -> bytes:
        """Frame ``index``, waiting until the replay has made and checked it."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._pngs) > index or self.finished)
            if index < len(self._pngs):
                return self._pngs[index]
            raise ViewError(self._error or f"{self.name} has {len(self._pngs)} frames")

    def all(self) -> list[bytes]:
        """Every frame, once the replay has finished (ViewError if it failed)."""
        with self._cond:
            self._cond.wait_for(lambda: self.finished)
            if self._error is not None:
                raise ViewError(self._error)
            return list(self._pngs)
