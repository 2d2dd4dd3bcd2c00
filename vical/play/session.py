"""A play session: one person, one run folder, a list of tasks played in order.

The session is a ``vical eval`` run whose agent is ``human``: the same
``manifest.json`` (agent ``human``, settings ``{"participant": ID}``), the same
episode folders written by :func:`vical.run.runner.run_episode`, the same lock
and the same resume rules. Tasks are taken in the order given, run index 0 of
every task first, then index 1, and so on; an episode already in the folder is
skipped, so starting the command again continues where the person stopped. An
episode left half-played (the server stopped, the page was closed for good)
leaves nothing behind and is played again from its start.

Each task goes through the protocol a model gets, one phase after the other:

``brief``  the game's rules text, the move budget, the actions and their keys,
           and the demonstration videos of the task's package;
``play``   the start frame, then one frame per decision, until the episode
           ends by the task's own rules (goal, death, budget);
``over``   the episode is written; the page offers the next task;
``done``   every (task, run) of the session is in the folder.

With ``record="demo"`` or ``record="start"`` (``vical play --record``) the
session records task material instead (:mod:`vical.play.record`): one
demonstration clip per task, played from the clip's start, or one start sequence
per human-init task, played from its seed until the person sets the start. The
pages are the same, with the player's name and consent line on them; each
recording, checked by replay, goes to the session's ``writer`` (``vical play``
writes it into a copy of the task file in the output folder), its raw record
under ``<out>/recordings/``, and never into a run.
"""

from __future__ import annotations

import base64
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vical.agent import prompts
from vical.errors import RunFolderError
from vical.outcomes import episode_name
from vical.play.human import AGENT_NAME, Bridge, HumanAgent, Refused, SessionStopped
from vical.play.record import (
    RECORD_KINDS,
    SET_START,
    Provenance,
    Recording,
    check_start_task,
    chosen_clip,
    next_commands,
    record_demo,
    record_start,
    recording_path,
    save_recording,
)
from vical.run.results import RunManifest
from vical.run.runner import (
    FRAME_MODES,
    EpisodeJob,
    RunOptions,
    RunSummary,
    lock_run_folder,
    prepare_run,
    run_episode,
    scan_episodes,
)
from vical.spec import DemoClip, TaskSpec

_ARROWS = {"Up": "ArrowUp", "Down": "ArrowDown", "Left": "ArrowLeft", "Right": "ArrowRight"}
_SPARE_KEYS = "1234567890qwertyuiopasdfghjklzxcvbnm"


def key_bindings(action_names: list[str]) -> dict[str, str]:
    """Keyboard key (``KeyboardEvent.key``) for each action, stable for a vocabulary.

    The four plain directions take the arrow keys; every other action takes the
    first letter of its name when that letter is free (``Pickup`` p, ``Shoot`` s),
    otherwise the next free digit or letter.
    """
    keys: dict[str, str] = {}
    used: set[str] = set()
    for a in action_names:
        if a in _ARROWS:
            keys[a] = _ARROWS[a]
            used.add(keys[a])
    for a in action_names:
        if a in keys:
            continue
        first = a[:1].lower()
        if first.isalpha() and first not in used and "+" not in a:
            keys[a] = first
        else:
            keys[a] = next(k for k in _SPARE_KEYS if k not in used)
        used.add(keys[a])
    return keys


@dataclass(frozen=True)
class Item:
    task: TaskSpec
    run_index: int
    record: str | None = None  # "demo" or "start" in a recording session
    clip: DemoClip | None = None  # the clip re-recorded (record "demo")

    @property
    def name(self) -> str:
        if self.record is not None:
            what = self.clip.id if self.clip is not None else "start"
            return f"{episode_name(self.task.id, 0)}:{what}"
        return episode_name(self.task.id, self.run_index)


class PlaySession:
    """The state of one ``vical play`` session; every method is safe from any thread."""

    def __init__(
        self,
        run_dir: Path,
        tasks: list[TaskSpec],
        participant: str,
        runs: int = 1,
        frames: str = "none",
        record: str | None = None,
        clip: str | None = None,
        provenance: Provenance | None = None,
        writer: Callable[[Path, Recording], Path] | None = None,
    ) -> None:
        if not tasks:
            raise ValueError("a play session needs at least one task")
        if not participant.strip():
            raise ValueError("the participant id is empty; pass --participant ID")
        if frames not in FRAME_MODES:
            raise ValueError(f"frames must be one of {', '.join(FRAME_MODES)}, not {frames!r}")
        self.run_dir = Path(run_dir)
        self.tasks = list(tasks)
        self.participant = participant.strip()
        self.runs = runs
        self.frames = frames
        self.record = record
        self.provenance = provenance
        self.writer = writer
        self.recorded: list[Recording] = []  # the recordings written by this session
        self._written: Path | None = None
        if record is not None:
            if record not in RECORD_KINDS:
                raise ValueError(f"record must be one of {', '.join(RECORD_KINDS)}, not {record!r}")
            if provenance is None or writer is None:
                raise ValueError("a recording session needs the player's provenance and a writer")
            if record == "demo":
                self.items = [Item(t, 0, record, chosen_clip(t, clip)) for t in self.tasks]
            else:
                for t in self.tasks:
                    check_start_task(t)
                self.items = [Item(t, 0, record) for t in self.tasks]
        else:
            self.items = [Item(t, k) for k in range(runs) for t in self.tasks]
        self.done: set[str] = set()
        self.repaired: list[str] = []
        self._lock = threading.RLock()
        self._stack = contextlib.ExitStack()
        self._bridge: Bridge | None = None
        self._thread: threading.Thread | None = None
        self._current: Item | None = None
        self._last_steps = 0

    # -- opening and closing ---------------------------------------------------------
    def open(self) -> PlaySession:
        """Lock the run folder, write or check its manifest, and find what is done."""
        if self.record is not None:  # recordings only: no run manifest, no episodes
            self._stack.enter_context(lock_run_folder(self.run_dir))
            self.done = {
                i.name for i in self.items if recording_path(self.run_dir, i.task, i.clip).is_file()
            }
            return self
        self._check_participant()
        self._stack.enter_context(lock_run_folder(self.run_dir))
        try:
            prepare_run(
                self.run_dir,
                self.tasks,
                AGENT_NAME,
                {"participant": self.participant},
                RunOptions(run_seed=0, runs=self.runs, demos=True),
            )
            summary = RunSummary(self.run_dir, total=len(self.items), skipped=0, finished=0)
            self.done = scan_episodes(self.run_dir, retry_errors=False, summary=summary)
            self.repaired = summary.repaired
        except BaseException:
            self._stack.close()
            raise
        return self

    def _check_participant(self) -> None:
        path = self.run_dir / "manifest.json"
        if not path.is_file():
            return
        try:
            old = RunManifest.model_validate_json(path.read_text())
        except ValueError:
            return  # prepare_run names the problem
        if old.agent != AGENT_NAME:
            raise RunFolderError(
                f"{self.run_dir} holds a run of agent {old.agent!r}, not a play session; "
                "choose another --out"
            )
        was = old.agent_settings.get("participant")
        if was != self.participant:
            raise RunFolderError(
                f"{self.run_dir} is participant {was!r}'s session, not {self.participant!r}: "
                f"pass --participant {was} to continue it, or choose another --out"
            )

    def close(self) -> None:
        """Stop a half-played episode (nothing of it is kept) and release the folder."""
        with self._lock:
            bridge, thread = self._bridge, self._thread
        if bridge is not None:
            bridge.stop()
        if thread is not None:
            thread.join(timeout=30)
        self._stack.close()

    def __enter__(self) -> PlaySession:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the order of play -----------------------------------------------------------
    def pending(self) -> list[Item]:
        return [i for i in self.items if i.name not in self.done]

    def _item(self) -> Item | None:
        if self._current is not None:
            return self._current
        todo = self.pending()
        return todo[0] if todo else None

    def phase(self) -> str:
        with self._lock:
            if self._bridge is not None:
                return "over" if self._bridge.ended else "play"
            return "brief" if self._item() is not None else "done"

    # -- what the page shows ---------------------------------------------------------
    def brief(self, item: Item) -> dict[str, Any]:
        task = item.task
        keys = key_bindings(task.action_names)
        n = len(task.variant.demos)
        return {
            "id": task.id,
            "run_index": item.run_index,
            "game": task.env.name,
            "environment": task.env.paper_id,
            "rules": task.env.rules.basic.strip(),
            "max_steps": task.max_steps,
            "actions": [{"name": a, "key": keys[a]} for a in task.action_names],
            "demos_intro": prompts.demos_intro(n) if n else "",
            "demos": [
                {"heading": prompts.demo_heading(i + 1, n), "url": f"/demo/{i}.mp4", "id": c.id}
                for i, c in enumerate(task.variant.demos)
            ],
            "start_text": prompts.start_frame_text(),
            "record": self._record_brief(item),
        }

    def _record_brief(self, item: Item) -> dict[str, Any] | None:
        """What the page says about the recording under way (None when not recording)."""
        if item.record is None or self.provenance is None:
            return None
        p = self.provenance
        out: dict[str, Any] = {
            "kind": item.record,
            "player": p.player,
            "consent": p.consent,
            "date": p.date.isoformat(),
            "set_start": SET_START,
            "start_actions": len(item.task.variant.init_actions),
        }
        if item.clip is not None:
            out.update(clip=item.clip.id, label=item.clip.label, actions=len(item.clip.actions))
        return out

    def state(self) -> dict[str, Any]:
        with self._lock:
            item = self._item()
            done_count = sum(1 for i in self.items if i.name in self.done)
            out: dict[str, Any] = {
                "phase": self.phase(),
                "participant": self.participant,
                "run": self.run_dir.name,
                "total": len(self.items),
                "finished": done_count,
                "unit": "recordings" if self.record is not None else "episodes",
                "position": self.items.index(item) + 1 if item is not None else None,
            }
            if item is None:
                return out
            out["task"] = self.brief(item)
            bridge = self._bridge
            if bridge is not None and bridge.shown is not None:
                shown = bridge.shown
                out["play"] = {
                    "step": shown.step,
                    "moves_left": item.task.max_steps - shown.step,
                    "previous_action": shown.previous_action,
                    "text": (
                        prompts.next_turn_text(shown.previous_action)
                        if shown.previous_action
                        else prompts.start_frame_text()
                    ),
                    "frame": "data:image/png;base64," + base64.b64encode(shown.png).decode(),
                    "applied": list(bridge.applied),
                }
            if bridge is not None and bridge.ended:
                out["over"] = {
                    "steps": self._last_steps,
                    "error": bridge.error,
                    "applied": list(bridge.applied),
                }
                if self._written is not None and bridge.error is None:
                    out["over"]["written"] = str(self._written)
                    out["over"]["next"] = next_commands(self.run_dir, self.recorded)
            return out

    def demo_mp4(self, index: int) -> bytes:
        """The MP4 of demonstration ``index`` of the current task's package."""
        from vical.demos import load_demo_clip

        with self._lock:
            item = self._item()
        if item is None:
            raise Refused("no task is open")
        clips = item.task.variant.demos
        if not 0 <= index < len(clips):
            raise Refused(f"the task has {len(clips)} demonstration(s); no video {index}")
        return load_demo_clip(item.task, clips[index]).mp4

    # -- what the page does ----------------------------------------------------------
    def start(self) -> None:
        """Begin the current task's episode; return once its first frame is ready."""
        with self._lock:
            if self._bridge is not None:
                raise Refused("an episode is already under way")
            item = self._item()
            if item is None:
                raise Refused("every task of this session is done")
            extra = (SET_START,) if item.record == "start" else ()
            bridge = Bridge(item.task.action_names, extra)
            agent = HumanAgent(bridge, self.participant)
            job = EpisodeJob(
                task_id=item.task.id,
                run_index=item.run_index,
                agent=AGENT_NAME,
                agent_kwargs={},
                run_seed=0,
                run_dir=str(self.run_dir),
                frames=self.frames,
                demos=True,
            )
            self._current, self._bridge = item, bridge
            self._last_steps = 0
            self._written = None
            target = self._recording if self.record is not None else self._episode
            self._thread = threading.Thread(
                target=target, args=(job, agent, bridge, item), daemon=True
            )
            self._thread.start()
        bridge.wait_first()

    def _episode(self, job: EpisodeJob, agent: HumanAgent, bridge: Bridge, item: Item) -> None:
        try:
            name = run_episode(job, agent=agent)
        except SessionStopped:
            bridge.finish("the session stopped; this episode will be played again")
        except Exception as e:  # shown on the page; the folder keeps no half episode
            bridge.finish(f"{type(e).__name__}: {e}")
        else:
            with self._lock:
                self.done.add(name)
                self._last_steps = agent.turns
            bridge.finish()

    def _recording(self, job: EpisodeJob, agent: HumanAgent, bridge: Bridge, item: Item) -> None:
        assert self.provenance is not None and self.writer is not None
        try:
            if item.clip is not None:
                rec = record_demo(item.task, item.clip, agent, self.provenance)
            else:
                rec = record_start(item.task, agent, self.provenance)
            written = self.writer(self.run_dir, rec)
            save_recording(self.run_dir, rec)
        except SessionStopped:
            bridge.finish("the session stopped; this recording will be made again")
        except Exception as e:  # shown on the page; nothing is written
            bridge.finish(f"{type(e).__name__}: {e}")
        else:
            with self._lock:
                self.done.add(item.name)
                self._last_steps = len(rec.actions)
                self.recorded.append(rec)
                self._written = written
            bridge.finish()

    def act(self, step: int, action: str, given: str) -> None:
        with self._lock:
            bridge = self._bridge
        if bridge is None or bridge.ended:
            raise Refused("no episode is under way: start one first")
        bridge.decide(step, action, given)

    def next(self) -> None:
        """Leave a finished episode and brief the next task."""
        with self._lock:
            if self._bridge is None or not self._bridge.ended:
                raise Refused("the episode is not over yet")
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._bridge = self._thread = self._current = None
