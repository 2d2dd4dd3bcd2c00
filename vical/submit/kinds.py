"""Every kind of bundle, agent and world model that verification knows, in one place.

Verification is default-deny: a bundle's ``kind``, a run's ``agent`` and a coupled
run's world model must each be declared here, with how their records are checked,
how their actions are re-derived and whether they can ever be ranked. Anything
else is refused with one line naming it; nothing is checked on a looser path for
being unknown. The registry imports nothing it declares: a protocol backend's
module is imported by :func:`protocol_backend` when a bundle names it, in the
verifying process itself (an ``inspect`` run verifies in a fresh process without
``vical.interop`` having been imported first).

Agent kinds (``records``):

- ``protocol``: a backend that speaks the request protocol
  (:class:`vical.agent.protocol.ProtocolAgent`); its log opens each episode with an
  ``agent_session`` record and every request is rebuilt from the task data, the
  declared condition and the logged replies (:mod:`vical.submit.logcheck`);
- ``seeded``: the ``random`` reference; its log holds decisions only, and every
  action is re-derived from the episode seed
  (:func:`vical.run.episode.episode_seed`) as :class:`vical.agent.backends.random.RandomAgent`
  draws it;
- ``plan``: the expert reference (``vical baseline expert``); decisions only, each
  action re-derived from the plan file packaged with vical
  (:data:`vical.agent.plans.DEFAULT_PLANS`), which the run's settings must name by
  sha256;
- ``human``: a person at ``vical play``; a session record, then decisions (key
  pressed, time taken) whose actions only the replay can check.

The references (random, plan) and human play are never ranked, whatever a bundle's
labels say.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from vical.submit.verdict import VerifyError

if TYPE_CHECKING:
    from vical.agent.protocol import ProtocolAgent

Records = Literal["protocol", "seeded", "plan", "human"]
K = TypeVar("K")


@dataclass(frozen=True)
class AgentKind:
    """One agent a run bundle may name (see the module docstring)."""

    name: str
    records: Records
    derive: str  # how its actions are re-derived, in words (docs and messages)
    ranked: bool  # whether a complete run under the default condition can be ranked
    module: str | None = None  # the module registering a protocol backend

    @property
    def session(self) -> bool:
        """Whether its log holds an ``agent_session`` record before the first decision."""
        return self.records in ("protocol", "human")


def _protocol(name: str, module: str) -> AgentKind:
    return AgentKind(
        name,
        "protocol",
        "every request rebuilt from the task data, the condition and the logged replies",
        True,
        module,
    )


AGENT_KINDS: dict[str, AgentKind] = {
    k.name: k
    for k in (
        AgentKind("random", "seeded", "each action drawn again from the episode seed", False),
        AgentKind("plan", "plan", "each action read again from the packaged plan file", False),
        # a person at `vical play`: the keys pressed cannot be re-derived, only replayed
        AgentKind("human", "human", "actions taken as logged (the replay checks them)", False),
        _protocol("openai-chat", "vical.agent.backends.openai_chat"),
        _protocol("openai-responses", "vical.agent.backends.openai_responses"),
        _protocol("gemini", "vical.agent.backends.gemini"),
        _protocol("openrouter", "vical.agent.backends.openrouter"),
        _protocol("inspect", "vical.interop.inspect_agent"),
    )
}


@dataclass(frozen=True)
class WorldModelKind:
    """A world model a coupled run (``vical wm couple``) may declare, and what of its
    imagined frames verification re-derives."""

    name: str
    derive: str


WORLD_MODEL_KINDS: dict[str, WorldModelKind] = {
    k.name: k
    for k in (
        WorldModelKind("simulator", "every imagined frame played again in the simulator"),
        WorldModelKind("copy-last", "every imagined frame must be the current frame"),
        WorldModelKind("http", "imagined frames taken as logged (PNG and pixel sha256 checked)"),
    )
}

# bundle kinds: a run (the manifest has no kind, or "run") and a world-model evaluation;
# only runs reach the leaderboard
BUNDLE_KINDS = ("run", "wm")


def bundle_kind(manifest: dict[str, Any]) -> str:
    """The bundle's kind ("run" or "wm"); :class:`VerifyError` for any other."""
    kind = manifest.get("kind", "run")
    if kind not in BUNDLE_KINDS:
        raise VerifyError(
            "manifest",
            f"bundle kind {str(kind)[:40]!r} is not one vical verifies ({', '.join(BUNDLE_KINDS)})",
        )
    return str(kind)


def _declared(kinds: dict[str, K], name: Any, role: str, what: str) -> K:
    """The entry of ``kinds`` named ``name``, or :class:`VerifyError` naming the name's
    ``role`` in the run manifest and every declared name."""
    kind = kinds.get(name) if isinstance(name, str) else None
    if kind is None:
        raise VerifyError(
            "agent",
            f"run/manifest.json: {role} {str(name)[:40]!r} is not {what} vical can verify "
            f"({', '.join(sorted(kinds))})",
        )
    return kind


def agent_kind(name: Any) -> AgentKind:
    """The declared kind of agent ``name``; :class:`VerifyError` when there is none."""
    return _declared(AGENT_KINDS, name, "agent", "a kind")


def world_model_kind(name: Any) -> WorldModelKind:
    """The declared world model ``name``; :class:`VerifyError` when there is none."""
    return _declared(WORLD_MODEL_KINDS, name, "world model", "one")


def is_ranked_agent(name: Any) -> bool:
    """Whether runs of agent ``name`` can ever be ranked (unknown: never)."""
    kind = AGENT_KINDS.get(name) if isinstance(name, str) else None
    return kind is not None and kind.ranked


def protocol_backend(kind: AgentKind) -> type[ProtocolAgent]:
    """The :class:`vical.agent.protocol.ProtocolAgent` class of a protocol kind, its module
    imported here; :class:`VerifyError` when it cannot be loaded."""
    from vical.agent.base import _REGISTRY
    from vical.agent.protocol import ProtocolAgent

    assert kind.module is not None
    try:
        importlib.import_module(kind.module)
    except Exception as e:  # an SDK that is not installed here
        raise VerifyError(
            "agent", f"backend {kind.name!r} cannot be loaded here: {type(e).__name__}: {e}"[:300]
        ) from None
    cls = _REGISTRY.get(kind.name)
    if not (isinstance(cls, type) and issubclass(cls, ProtocolAgent)):
        raise VerifyError("agent", f"backend {kind.name!r} does not speak the request protocol")
    return cls
