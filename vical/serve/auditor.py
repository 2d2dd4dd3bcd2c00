"""The server as a trajectory auditor: verdicts for ``vical audit`` requests.

An audit request is recognised by one of its text parts being exactly the JSON
object ``{"audit_context": {...}}`` (see :mod:`vical.audit.prompt`): the
criterion (``information_transfer`` or ``failure_attribution``) and how the
episode ended (``outcome``: ``score``, ``passed``, ``failure_mode``). Such a
request is answered with a verdict instead of a move, in one of these modes:

``valid``
    a verdict in the exact format, labels drawn at random but consistent with
    the outcome (``none`` for an episode passed with the full score, a stage
    other than ``none`` for one the model ended with no legal action);
``malformed``
    a reply breaking the format: prose around the JSON, plain text, a missing
    judgment, an extra key, a label outside its set, or an empty justification;
``contradictory``
    a well-formed attribution that contradicts the outcome (a failure stage for
    a perfect episode, ``none`` for one ended with no legal action); where the
    outcome allows no contradiction (any transfer request, any other episode)
    the reply is valid;
``mixed``
    one of the three above, drawn per request.

Every draw comes from a generator seeded by the server seed and the raw
request body, so the same request always gets the same verdict, and a
follow-up (which carries the earlier reply) gets a fresh draw. The mode is the
server's ``auditor`` setting (``--auditor``, default ``valid``), or the model
name ``auditor-<mode>`` for that request.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from vical.serve.conversation import Conversation

AUDITOR_MODES = ("valid", "malformed", "contradictory", "mixed")
CONTEXT_KEY = "audit_context"
_MODEL_PREFIX = "auditor-"
_RULES = ("successful", "unsuccessful")
_STRATEGIES = ("correct", "underfit", "overfit")
_STAGES = ("knowledge_induction", "state_grounding", "planning", "action_commitment", "none")
_FAILURE_STAGES = _STAGES[:-1]
MALFORMED_KINDS = ("prose", "plain", "missing", "extra", "label", "empty")


def check_auditor_mode(mode: str) -> str:
    if mode not in AUDITOR_MODES:
        raise ValueError(f"unknown auditor mode {mode!r}; known: {', '.join(AUDITOR_MODES)}")
    return mode


def audit_context(conv: Conversation) -> dict[str, Any] | None:
    """The audit context a request carries, or None for an ordinary request."""
    for text in conv.texts:
        if not text.startswith('{"' + CONTEXT_KEY + '"'):
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get(CONTEXT_KEY), dict):
            return dict(obj[CONTEXT_KEY])
    return None


def is_auditor_model(model: str) -> bool:
    """Whether ``model`` names an auditor mode (``auditor-<mode>``)."""
    return model.startswith(_MODEL_PREFIX) and model[len(_MODEL_PREFIX) :] in AUDITOR_MODES


def request_mode(model: str, default: str) -> str:
    """The mode for a request: ``auditor-<mode>`` by model name, else ``default``."""
    if model.startswith(_MODEL_PREFIX) and model[len(_MODEL_PREFIX) :] in AUDITOR_MODES:
        return model[len(_MODEL_PREFIX) :]
    return default


def _judgment(label: str, why: str) -> dict[str, str]:
    return {"label": label, "justification": why}


def _verdict(
    criterion: str, outcome: dict[str, Any], rng: random.Random, contradict: bool
) -> dict[str, Any]:
    if criterion == "information_transfer":
        return {
            "rule_transfer": _judgment(rng.choice(_RULES), "Baseline auditor: drawn at random."),
            "strategy_transfer": _judgment(
                rng.choice(_STRATEGIES), "Baseline auditor: drawn at random."
            ),
        }
    perfect = bool(outcome.get("passed")) and float(outcome.get("score") or 0.0) >= 100.0
    no_action = outcome.get("failure_mode") == "invalid_action"
    if perfect:
        stage = rng.choice(_FAILURE_STAGES) if contradict else "none"
    elif no_action:
        stage = "none" if contradict else rng.choice(_FAILURE_STAGES)
    else:
        stage = rng.choice(_STAGES)
    return {"player_failure_stage": _judgment(stage, "Baseline auditor: drawn at random.")}


def _spoil(verdict: dict[str, Any], kind: str) -> str:
    first = next(iter(verdict))
    if kind == "prose":
        return "Here is my verdict:\n" + json.dumps(verdict)
    if kind == "plain":
        return f"The {first.replace('_', ' ')} looks {verdict[first]['label']} to me."
    if kind == "missing":
        return json.dumps({first: verdict[first]} if len(verdict) > 1 else {})
    if kind == "extra":
        return json.dumps({**verdict, "confidence": "high"})
    if kind == "label":
        return json.dumps({**verdict, first: _judgment("partially", "Somewhere in between.")})
    return json.dumps({**verdict, first: _judgment(verdict[first]["label"], "")})


def auditor_answer(ctx: dict[str, Any], mode: str, raw: bytes, seed: int) -> tuple[str, str]:
    """(reply text, visible reasoning) for an audit request in ``mode``."""
    digest = hashlib.sha256(f"{seed}|auditor|".encode() + raw).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    if mode == "mixed":
        mode = rng.choice(AUDITOR_MODES[:3])
    criterion = str(ctx.get("criterion"))
    outcome = ctx.get("outcome") if isinstance(ctx.get("outcome"), dict) else {}
    verdict = _verdict(criterion, outcome or {}, rng, contradict=mode == "contradictory")
    if mode == "malformed":
        kind = rng.choice(MALFORMED_KINDS)
        return _spoil(verdict, kind), f"Auditor mode malformed ({kind}) for {criterion}."
    return json.dumps(verdict), f"Auditor mode {mode} for {criterion}."
