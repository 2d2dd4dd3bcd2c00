"""The human agent: an :class:`~vical.agent.Agent` whose decisions come from a browser.

The episode runner (:func:`vical.run.runner.run_episode`) runs in its own thread
and calls :meth:`HumanAgent.act` once per decision, exactly as it calls a model
backend. ``act`` hands the observation to a :class:`Bridge` and blocks until the
page sends one action for that very step; the HTTP thread that delivered the
action then waits for the next observation (or the end of the episode) and
answers the page with it. So one key press is one decision, a press for a frame
already decided is refused, and the episode is written by the same code as any
``vical eval`` episode. (The page queues the keys pressed while a move is
pending and sends them one per new frame, so no press is lost; the bridge keeps
the actions taken, ``applied``, for the page to list.)

What the person sees is what a model sees: frames only, never a reward, score or
pass flag (the runner's step records hold those; they never reach the page).
Each decision record carries the wall time from the moment the frame was handed
to the page to the moment the action arrived, and how the action was given.
"""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass
from typing import Any

from vical.agent import Agent, Decision, EpisodeContext, Observation

AGENT_NAME = "human"


class SessionStopped(Exception):
    """The session ended (server stopped, page closed the episode) while a decision was due."""


class Refused(Exception):
    """An action the bridge cannot take now (wrong step, unknown name, nothing to decide)."""


@dataclass(frozen=True)
class Shown:
    """One observation as the page gets it."""

    step: int
    png: bytes
    previous_action: str | None


def encode_png(frame: Any) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


class Bridge:
    """Hands observations from the episode thread to the page, and actions back.

    ``version`` grows by one whenever something the page shows changes (a new
    observation, the end of the episode), so a waiting request knows when to answer.
    ``extra``: answers the page may give besides the task's actions (a start
    recording's "set the start here"); they are not moves, so ``applied`` omits them.
    """

    def __init__(self, action_names: list[str], extra: tuple[str, ...] = ()) -> None:
        self.action_names = list(action_names)
        self.extra = tuple(extra)
        self._cond = threading.Condition()
        self.version = 0
        self.shown: Shown | None = None
        self._shown_at = 0.0
        self._action: tuple[str, str] | None = None
        self.ended = False
        self.error: str | None = None
        self._stopped = False
        self.applied: list[str] = []  # the actions taken so far, in order (the page lists them)

    # -- the episode thread's side -----------------------------------------------
    def show(self, obs: Observation) -> tuple[str, str, float]:
        """Publish ``obs`` and wait for the page's action: (action, input, seconds taken)."""
        png = encode_png(obs.frame)
        with self._cond:
            self.shown = Shown(obs.step, png, obs.previous_action)
            self._shown_at = time.monotonic()
            self._action = None
            self.version += 1
            self._cond.notify_all()
            while self._action is None and not self._stopped:
                self._cond.wait()
            if self._action is None:
                raise SessionStopped("the session stopped before this decision was made")
            action, given = self._action
            self._action = None
            if action in self.action_names:
                self.applied.append(action)
            taken = time.monotonic() - self._shown_at
            self.shown = None
            return action, given, taken

    def finish(self, error: str | None = None) -> None:
        """The episode thread is done (written, or failed with ``error``)."""
        with self._cond:
            self.ended = True
            self.error = error
            self.shown = None
            self.version += 1
            self._cond.notify_all()

    # -- the HTTP side ----------------------------------------------------------------
    def decide(self, step: int, action: str, given: str, timeout: float = 60.0) -> None:
        """Deliver the action for ``step``; return once the page has something new to show."""
        if action not in self.action_names and action not in self.extra:
            raise Refused(f"{action!r} is not one of this task's actions: {self.action_names}")
        with self._cond:
            if self.shown is None or self._action is not None:
                raise Refused("no decision is due: wait for the next frame")
            if self.shown.step != step:
                raise Refused(f"the frame on screen is step {self.shown.step}, not step {step}")
            self._action = (action, given)
            seen = self.version
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.version != seen, timeout=timeout)

    def wait_first(self, timeout: float = 60.0) -> None:
        """Wait until the episode shows its first frame or ends."""
        with self._cond:
            self._cond.wait_for(lambda: self.shown is not None or self.ended, timeout=timeout)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


class HumanAgent(Agent):
    """A person at the browser. ``participant`` identifies them in the run's settings."""

    name = AGENT_NAME
    # the page plays the demonstration videos itself; start() needs no rendered package
    uses_demos = False

    def __init__(self, bridge: Bridge, participant: str) -> None:
        self.bridge = bridge
        self.participant = participant
        self.turns = 0
        self._task = ""

    def start(self, ctx: EpisodeContext) -> None:
        self.turns = 0
        self._task = ctx.task.id

    def act(self, obs: Observation) -> Decision:
        records: list[dict[str, Any]] = []
        if self.turns == 0:
            records.append(
                {
                    "type": "agent_session",
                    "backend": AGENT_NAME,
                    "settings": self.settings(),
                    "task": self._task,
                }
            )
        self.turns += 1
        action, given, taken = self.bridge.show(obs)
        records.append(
            {
                "type": "decision",
                "step": obs.step,
                "action": action,
                "failure": None,
                "input": given,
                "wall_seconds": round(taken, 3),
            }
        )
        return Decision(action=action, records=records)

    def settings(self) -> dict[str, Any]:
        return {"participant": self.participant}
