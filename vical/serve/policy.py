"""The policies behind the model names: ``random``, ``first`` and ``expert``."""

from __future__ import annotations

import hashlib
import random
import re
import threading

from vical.agent.prompts import find_actions_line
from vical.serve.conversation import Conversation
from vical.spec.families import FAMILIES

POLICIES = ("random", "first", "expert")
_ENV_ID_RE = re.compile(r"\(environment id: ([^)]+)\)")


def legal_actions(conv: Conversation) -> list[str] | None:
    """The actions on the first ``Legal actions:`` line of the prompt, or None."""
    legal = None
    for t in conv.texts:
        legal = find_actions_line(t)
        if legal:
            break
    return legal


class ExpertPolicy:
    """Scripted experts behind the ``expert`` model name.

    The task is recognised from the prompt's environment id and the start
    frame (compared with each candidate task's start frame, encoded the way
    the protocol encodes frames); the moves applied so far are read from the
    later turns. A game with a scripted controller (its game module's
    ``controller``: the Classic Control games) gets it, run on
    a fresh environment replayed through those moves; grid worlds (Toy Text,
    MiniGrid) follow a shortest passing plan found by breadth-first search.
    Anywhere else, or off the plan, the answer falls back to the random
    policy, and the reasoning line says so.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._start_frames: dict[str, dict[str, str]] = {}  # paper id -> {jpeg sha: task id}
        self._plans: dict[str, list[str] | None] = {}

    def _identify(self, conv: Conversation) -> str | None:
        from vical.agent.media import encode_jpeg
        from vical.envs import make_env
        from vical.spec import all_tasks

        m = next((m for t in conv.texts if (m := _ENV_ID_RE.search(t))), None)
        start = conv.start_frame
        if m is None or start is None:
            return None
        paper_id = m.group(1)
        with self.lock:
            if paper_id not in self._start_frames:
                table: dict[str, str] = {}  # start frame sha256 -> task id
                for task in all_tasks():
                    if task.env.paper_id == paper_id:
                        with make_env(task) as env:
                            jpeg = encode_jpeg(env.reset())
                        table.setdefault(hashlib.sha256(jpeg).hexdigest(), task.id)
                self._start_frames[paper_id] = table
            return self._start_frames[paper_id].get(hashlib.sha256(start).hexdigest())

    def action(self, conv: Conversation) -> tuple[str | None, str]:
        """(action or None, a note for the reasoning line)."""
        from vical.spec import get_task

        task_id = self._identify(conv)
        if task_id is None:
            return None, "Expert: task not recognised."
        task = get_task(task_id)
        moves = conv.moves()
        try:
            from vical.demos.experts import bfs_expert, controller_for
        except ImportError:
            return None, "Expert: vical.demos is not available."
        ctl = controller_for(task.env)
        if ctl is not None:
            from vical.envs import make_env

            with make_env(task) as env:
                env.reset()
                for a in moves:
                    env.step(a)
                return ctl(env), f"Expert: controller on {task_id}."
        if not FAMILIES[task.env.family].searchable:
            return None, f"Expert: no expert for {task_id}."
        with self.lock:
            if task_id not in self._plans:
                found = bfs_expert(task)
                self._plans[task_id] = found.actions if found else None
            plan = self._plans[task_id]
        if plan is None or moves != plan[: len(moves)] or len(moves) >= len(plan):
            return None, f"Expert: off the plan for {task_id}."
        return plan[len(moves)], f"Expert: plan step {len(moves) + 1}/{len(plan)} on {task_id}."


def pick_action(
    conv: Conversation, legal: list[str], seed: int, experts: ExpertPolicy
) -> tuple[str, str, str | None]:
    """(action, the policy that chose it, the expert's note or None) for a request.

    The model name picks the policy (``first``, ``expert``, anything else
    ``random``). The random choice, also the fallback of an expert with no
    legal answer, is seeded by ``seed`` and the conversation's content
    (:meth:`Conversation.content_digest`: texts, frames, turn), so the same
    conversation always gets the same answer, whichever client or API sent it.
    """
    policy = conv.model if conv.model in ("first", "expert") else "random"
    action = None
    note = None
    if policy == "first":
        action = legal[0]
    elif policy == "expert":
        action, note = experts.action(conv)
    if action is None or action not in legal:
        policy = "random" if policy != "expert" else "expert (random fallback)"
        digest = hashlib.sha256(f"{seed}|".encode() + conv.content_digest()).digest()
        action = random.Random(int.from_bytes(digest[:8], "big")).choice(legal)
    return action, policy, note
