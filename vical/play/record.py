"""``vical play --record demo|start``: a person records task material in the browser.

Two kinds of material can be recorded, each in place of what a program made:

``demo``   a demonstration clip (:class:`vical.spec.DemoClip`). The person plays
           from the clip's own start (a demo never starts from the opening a task is
           tested on) under the task's move budget; their moves become the clip's
           actions and the label is what the simulator says at the end. The clip keeps
           its id, so every task whose package shows it shows the person's play.
``start``  a start sequence (``init_actions`` of a ``human-init`` task). The person
           plays from the task's seed and initial skip and sets the start where the
           game should stand when the task begins (the page's "Set the start here",
           or the task's move budget used up); their moves become the task's
           ``init_actions``.

Either way the material carries its provenance, the ``human:`` source of
:func:`vical.spec.human_source`: the player's name, the date (passed in, never
read from a clock here) and the consent line the player agreed to. Nothing the
page says is trusted: the page sends moves only, the label comes from the
simulator, and before anything is written the clip is replayed to that label
(:func:`vical.demos.render.replay_clip`) and a start is replayed to the frame the
person last saw.

A :class:`Recording` is what a session hands to its writer (``vical play`` writes
it into a copy of the environment's task file in the output folder, ready for
``vical tasks check``); :func:`save_recording` keeps the raw record (the moves and
each decision's wall time) under ``<out>/recordings/``, which is also how a
session knows what is already recorded.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vical.agent import EpisodeContext, Observation
from vical.demos.render import clip_outcome, clip_task, replay_clip
from vical.envs import make_env
from vical.envs.core import frame_sha256
from vical.play.human import HumanAgent
from vical.spec import DemoClip, EnvSpec, TaskSpec, human_source

RECORD_KINDS: tuple[str, ...] = ("demo", "start")
# the page's "set the start here" answer in a start recording (never a game action)
SET_START = "(set the start here)"


class RecordingError(ValueError):
    """A recording that cannot be made or stored, with the reason."""


@dataclass(frozen=True)
class Provenance:
    """Who recorded, on which day, and the consent line they agreed to."""

    player: str
    consent: str
    date: datetime.date

    def __post_init__(self) -> None:
        self.source()  # a malformed name or an empty consent fails here, with the reason

    def source(self) -> str:
        """The ``human:`` source text (:func:`vical.spec.human_source`)."""
        return human_source(self.player, self.date, self.consent)


@dataclass(frozen=True)
class Recording:
    """One recorded clip or start sequence, checked by replay, not yet written."""

    kind: str  # "demo" or "start"
    task: TaskSpec
    actions: list[str]
    source: str
    clip: DemoClip | None = None  # demo: the new clip (the id of the one it replaces)
    decisions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def target(self) -> str:
        """What is replaced: ``clip <id>`` or ``the start of <task>``."""
        return f"clip {self.clip.id}" if self.clip is not None else f"the start of {self.task.id}"

    def document(self) -> dict[str, Any]:
        """The raw record as stored by :func:`save_recording`."""
        doc: dict[str, Any] = {"kind": self.kind, "task": self.task.id, "source": self.source}
        if self.clip is not None:
            doc["clip"] = self.clip.model_dump(mode="json")
        else:
            doc["init_actions"] = list(self.actions)
        doc["decisions"] = [
            {k: r.get(k) for k in ("step", "action", "input", "wall_seconds")}
            for r in self.decisions
        ]
        return doc


def chosen_clip(task: TaskSpec, clip_id: str | None) -> DemoClip:
    """The clip of ``task`` to re-record: ``clip_id``, or the first of its package."""
    clips = task.variant.demos
    if not clips:
        raise RecordingError(f"{task.id} has no demonstration clip to re-record")
    if clip_id is None:
        return clips[0]
    for c in clips:
        if c.id == clip_id:
            return c
    raise RecordingError(
        f"{task.id} has no clip {clip_id!r}; its clips are {', '.join(c.id for c in clips)}"
    )


def check_start_task(task: TaskSpec) -> None:
    """A start is recorded for a ``human-init`` task only (its kind says it has one)."""
    if task.variant.kind != "human-init":
        others = [v.variant for v in task.env.tasks if v.kind == "human-init"]
        hint = (
            f"{task.env.env}'s human-init tasks are {', '.join(others)}"
            if others
            else f"{task.env.env} has no human-init task"
        )
        raise RecordingError(
            f"{task.id} is a {task.variant.kind} task: a recorded start replaces the start "
            f"sequence of a human-init task ({hint})"
        )


def recording_task(task: TaskSpec, clip: DemoClip) -> TaskSpec:
    """The task as played for a demo recording: the clip's start, the task's move budget."""
    played = clip_task(task, clip)
    variant = played.variant.model_copy(update={"max_steps": task.max_steps})
    return TaskSpec(env=played.env, variant=variant)


def bare_start_task(task: TaskSpec) -> TaskSpec:
    """``task`` standing at its seed and initial skip, its start sequence left out."""
    variant = task.variant.model_copy(update={"init_actions": [], "init_source": None})
    return TaskSpec(env=task.env, variant=variant)


def recording_path(out: Path, task: TaskSpec, clip: DemoClip | None) -> Path:
    """Where the raw record of a clip (or, ``clip`` None, of a start) is kept."""
    env, _, variant = task.id.partition("/")
    what = clip.id if clip is not None else "start"
    return Path(out) / "recordings" / f"{env}__{variant}__{what}.yaml"


def _begin(agent: HumanAgent, played: TaskSpec) -> None:
    agent.start(
        EpisodeContext(
            task=played,
            run_index=0,
            seed=0,
            action_names=played.action_names,
            max_steps=played.max_steps,
        )
    )


def record_demo(
    task: TaskSpec, clip: DemoClip, agent: HumanAgent, provenance: Provenance
) -> Recording:
    """Play ``clip``'s start with the person behind ``agent``; the new clip, replayed."""
    played = recording_task(task, clip)
    env = make_env(played)
    actions: list[str] = []
    decisions: list[dict[str, Any]] = []
    try:
        frame = env.reset()
        _begin(agent, played)
        previous: str | None = None
        while not env.done:
            d = agent.act(Observation(env.steps, frame, frame_sha256(frame), previous))
            assert d.action is not None  # a person always answers with an action
            decisions += [r for r in d.records if r.get("type") == "decision"]
            s = env.step(d.action)
            frame, previous = s.frame, d.action
            actions.append(d.action)
        label = clip_outcome(env.outcome, env.passed())
    finally:
        env.close()
        agent.close()
    source = provenance.source()
    new = DemoClip.model_validate(
        {**clip.model_dump(mode="json"), "actions": actions, "label": label, "source": source}
    )
    replay_clip(task, new)  # raises ClipReplayError unless it replays to its label
    return Recording("demo", task, actions, source, clip=new, decisions=decisions)


def record_start(task: TaskSpec, agent: HumanAgent, provenance: Provenance) -> Recording:
    """Play from ``task``'s seed until the person sets the start; the new start, replayed.

    The moves are applied as a stored start sequence is (before the task begins:
    no scoring state, only the game's own end stops it); a move that ends the game
    fails the recording, as the start would never play.
    """
    check_start_task(task)
    played = bare_start_task(task)
    env = make_env(played, starts="replayed")
    actions: list[str] = []
    decisions: list[dict[str, Any]] = []
    try:
        frame = env.reset(begin=False)
        last = frame_sha256(frame)
        _begin(agent, played)
        previous: str | None = None
        while len(actions) < task.max_steps:
            d = agent.act(Observation(len(actions), frame, last, previous))
            assert d.action is not None
            if d.action == SET_START:
                break
            decisions += [r for r in d.records if r.get("type") == "decision"]
            if env.decide(d.action, started=False, record=False).ending is not None:
                raise RecordingError(
                    f"{task.id}: the game ended at move {len(actions) + 1} ({d.action}) of the "
                    "start sequence; a start must leave the game running: record it again"
                )
            frame, previous = env.adapter.frame().copy(), d.action
            last = frame_sha256(frame)
            actions.append(d.action)
    finally:
        env.close()
        agent.close()
    if not actions:
        raise RecordingError(
            f"{task.id}: the start was set before any move; a start sequence holds at least one"
        )
    source = provenance.source()
    variant = type(task.variant).model_validate(
        {**task.variant.model_dump(mode="json"), "init_actions": actions, "init_source": source}
    )
    new = TaskSpec(env=task.env, variant=variant)
    check = make_env(new, starts="replayed")
    try:
        again = check.reset(begin=False)
    finally:
        check.close()
    if frame_sha256(again) != last:
        raise RecordingError(
            f"{task.id}: the recorded start does not replay to the frame played last; "
            "the game is not deterministic from this seed"
        )
    return Recording("start", new, actions, source, decisions=decisions)


def adopted_demos(spec: EnvSpec, new: DemoClip) -> dict[str, list[DemoClip]]:
    """``spec``'s demos lists with ``new`` in place of the clip of the same id.

    Every task that lists the clip gets the recording, and each is replayed to
    check the label, so the task file is only written when all of them hold.
    """
    demos: dict[str, list[DemoClip]] = {}
    users = 0
    for v in spec.tasks:
        clips = []
        for c in v.demos:
            if c.id == new.id:
                users += 1
                replay_clip(TaskSpec(env=spec, variant=v), new)
                clips.append(new)
            else:
                clips.append(c)
        demos[v.variant] = clips
    if not users:
        raise RecordingError(f"no task of {spec.env} lists clip {new.id!r} any more")
    return demos


def save_recording(out: Path, rec: Recording) -> Path:
    """Keep the raw record under ``<out>/recordings/`` (atomic); return its path."""
    path = recording_path(out, rec.task, rec.clip)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(rec.document(), sort_keys=False, allow_unicode=True))
    tmp.replace(path)
    return path


def next_commands(out: Path, recordings: list[Recording]) -> list[str]:
    """The commands that take a folder of recorded task files on: pack, check, a run."""
    envs = sorted({r.task.env.env for r in recordings})
    tasks = sorted({r.task.id for r in recordings})
    overlay = f"VICAL_TASKS_DIR={out}"
    return [
        f"{overlay} vical demos pack " + " ".join(f"--env {e}" for e in envs),
        f"vical tasks check {out}",
        f"{overlay} vical eval --agent random --tasks {','.join(tasks)}",
    ]
