"""``vical play --record-demo``: a person re-records a demonstration clip in the browser.

A demonstration clip is data: a start state, actions and a terminal label (see
:class:`vical.spec.DemoClip`). Recording one keeps the clip's own start state (a
demo never starts from the opening a task is tested on) and replaces its actions
with the person's, played under the task's move budget; the label is what the
simulator says at the end. Before the recording is written it is replayed with
:func:`vical.demos.render.replay_clip`, so a recording that does not reproduce
its label is never stored.

A recording is a YAML file, ``<out>/recordings/<env>__<variant>__<clip>.yaml``:
the task, the clip it re-records, the participant, the new clip and each
decision's wall time. It is not a result: nothing of it enters a run folder.
:func:`adopted_demos` puts a recording into an environment's demos lists (every
task that shares the clip gets the new one, checked by replay on each), which the
``vical play --adopt`` command writes into the task file; from there
``vical demos render`` and ``vical dataset build`` render it like any clip.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from vical.agent import EpisodeContext, Observation
from vical.demos.render import clip_outcome, clip_task, replay_clip
from vical.envs import make_env
from vical.envs.core import frame_sha256
from vical.play.human import HumanAgent
from vical.spec import DemoClip, EnvSpec, TaskSpec


class RecordingError(ValueError):
    """A recording that cannot be stored or adopted, with the reason."""


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


def recording_task(task: TaskSpec, clip: DemoClip) -> TaskSpec:
    """The task as played for a recording: the clip's start, the task's move budget."""
    played = clip_task(task, clip)
    variant = played.variant.model_copy(update={"max_steps": task.max_steps})
    return TaskSpec(env=played.env, variant=variant)


def recording_path(out: Path, task: TaskSpec, clip: DemoClip) -> Path:
    env, _, variant = task.id.partition("/")
    return Path(out) / "recordings" / f"{env}__{variant}__{clip.id}.yaml"


def record(task: TaskSpec, clip: DemoClip, agent: HumanAgent, out: Path) -> Path:
    """Play ``clip``'s start with the person behind ``agent``; write and return the recording."""
    played = recording_task(task, clip)
    env = make_env(played)
    actions: list[str] = []
    decisions: list[dict[str, Any]] = []
    try:
        frame = env.reset()
        agent.start(
            EpisodeContext(
                task=played,
                run_index=0,
                seed=0,
                action_names=played.action_names,
                max_steps=played.max_steps,
            )
        )
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
    new = DemoClip.model_validate(
        {
            **clip.model_dump(mode="json"),
            "actions": actions,
            "label": label,
            "source": f"human: participant {agent.participant}, recorded with vical play "
            f"(re-recording of clip {clip.id})",
        }
    )
    replay_clip(task, new)  # raises ClipReplayError unless it replays to its label
    doc = {
        "task": task.id,
        "replaces": clip.id,
        "participant": agent.participant,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "clip": new.model_dump(mode="json"),
        "decisions": [
            {k: r.get(k) for k in ("step", "action", "input", "wall_seconds")} for r in decisions
        ],
    }
    path = recording_path(out, task, clip)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    tmp.replace(path)
    return path


def read_recording(path: Path) -> tuple[str, DemoClip]:
    """(task id, recorded clip) of a recording file."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
        return str(doc["task"]), DemoClip.model_validate(doc["clip"])
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as e:
        raise RecordingError(f"{path} is not a vical play recording ({e})") from None


def adopted_demos(path: Path, spec: EnvSpec) -> dict[str, list[DemoClip]]:
    """``spec``'s demos lists with the recorded clip in place of the clip it re-records.

    Every task that lists the clip gets the recording, and each is replayed to
    check the label, so the task file is only written when all of them hold.
    """
    task_id, new = read_recording(path)
    env, _, _ = task_id.partition("/")
    if env != spec.env:
        raise RecordingError(f"{path} records a clip of {env}, not of {spec.env}")
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
