"""The agent contract the episode runner talks to, and the backend registry.

A backend is a class registered by name with :func:`register_agent`; its
module is imported lazily by :func:`get_agent`, so a backend's SDK is only
needed when it is used. The runner calls ``preflight`` once before the first
episode (a no-op unless the backend talks to a model), ``start`` once per
episode, then ``act`` once per decision, and writes every record an agent returns to the
episode's ``log.jsonl``.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from vical.errors import AgentConfigError
from vical.outcomes import AGENT_FAILURES, FailureMode  # what a Decision's failure may be
from vical.spec import TaskSpec


class UnknownAgent(AgentConfigError, ValueError):
    """No backend is registered or declared under the name asked for."""


@dataclass(frozen=True)
class EpisodeContext:
    """What an agent learns at the start of an episode."""

    task: TaskSpec
    run_index: int
    seed: int
    action_names: list[str]
    max_steps: int
    demos: list[Any] = field(default_factory=list)
    rules: str = "basic"  # which rules text the first turn carries: basic or detailed


@dataclass(frozen=True)
class Imagined:
    """A world model's imagined rollout of one candidate action (``vical wm couple``):
    the frames it predicts after each action of ``intervention``, with their sha256."""

    action: str
    intervention: tuple[str, ...]
    frames: tuple[npt.NDArray[np.uint8], ...]
    frame_sha256: tuple[str, ...]


@dataclass(frozen=True)
class Observation:
    """One decision point: the current frame and the previous action.

    ``imagined``: in a coupled run, the world model's rollout of each candidate
    action from this frame, which a model backend shows with the frame; empty
    otherwise.
    """

    step: int
    frame: npt.NDArray[np.uint8]
    frame_sha256: str
    previous_action: str | None
    imagined: tuple[Imagined, ...] = ()


@dataclass
class Decision:
    """An agent's answer. ``action`` is None when ``failure`` ends the episode."""

    action: str | None
    failure: FailureMode | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    # media referenced by records: sha256 -> (bytes, mime type); stored once per episode
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.action is None) == (self.failure is None):
            raise ValueError("a Decision has exactly one of action or failure")
        if self.failure is not None:
            if self.failure not in AGENT_FAILURES:
                known = ", ".join(sorted(AGENT_FAILURES))
                raise ValueError(f"unknown failure mode {self.failure!r}; known: {known}")
            self.failure = FailureMode(self.failure)


class Agent(ABC):
    """A policy behind the protocol. Subclasses are registered by name."""

    name: str = "agent"
    # whether start() needs the rendered demonstration package (the random reference does not)
    uses_demos: bool = True

    @abstractmethod
    def start(self, ctx: EpisodeContext) -> None:
        """Begin an episode."""

    @abstractmethod
    def act(self, obs: Observation) -> Decision:
        """Choose the next action."""

    def settings(self) -> dict[str, Any]:
        """Settings recorded in the run manifest (never secrets)."""
        return {}

    def preflight(self) -> None:  # noqa: B027 - optional hook
        """Check, before the first episode, that the agent can work at all.

        The default does nothing (an agent without a remote model has nothing
        to check). A model backend sends one tiny request and raises
        :class:`vical.agent.failures.PreflightError` with a one-line reason
        when the endpoint, the key or the model is wrong.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and connections."""


_REGISTRY: dict[str, Callable[..., Agent]] = {}
# backend name -> module that registers it (imported on first use)
_MODULES: dict[str, str] = {
    "random": "vical.agent.backends.random",
    "plan": "vical.agent.backends.plan",  # the expert reference: plans made offline
    "openai-chat": "vical.agent.backends.openai_chat",
    "openai-responses": "vical.agent.backends.openai_responses",
    "gemini": "vical.agent.backends.gemini",
    "openrouter": "vical.agent.backends.openrouter",
}


AgentClass = TypeVar("AgentClass", bound=type[Agent])


def register_agent(name: str, module: str | None = None) -> Callable[[AgentClass], AgentClass]:
    """Class decorator: make a backend available as ``--agent``/``--backend`` NAME."""

    def deco(cls: AgentClass) -> AgentClass:
        _REGISTRY[name] = cls
        cls.name = name
        if module:
            _MODULES[name] = module
        return cls

    return deco


def declare_backend(name: str, module: str) -> None:
    """Declare where a backend lives so that it can be imported lazily."""
    _MODULES[name] = module


def agent_names() -> list[str]:
    return sorted(set(_MODULES) | set(_REGISTRY))


def get_agent(name: str, **kwargs: Any) -> Agent:
    """Instantiate a registered backend by name, importing its module on first use."""
    if name not in _REGISTRY:
        mod = _MODULES.get(name)
        if mod is None:
            raise UnknownAgent(f"unknown agent {name!r}; available: {', '.join(agent_names())}")
        importlib.import_module(mod)
    return _REGISTRY[name](**kwargs)
