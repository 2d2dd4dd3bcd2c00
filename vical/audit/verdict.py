"""The auditor's answer: the two criteria, their labels, and the strict reading of a reply.

Two criteria are judged for every episode, each in its own request, so that
neither judgment can lean on the other (paper Appendix 3.1):

* **information transfer** (:data:`TRANSFER`) answers with two judgments:
  ``rule_transfer`` (``successful`` or ``unsuccessful``) and
  ``strategy_transfer`` (``correct``, ``underfit`` or ``overfit``; ``correct``
  is the successful outcome, the other two are kinds of unsuccessful transfer
  and are merged in the tables). There is no "not applicable": when the
  demonstrations show no rule beyond the text rules, rule transfer is
  ``successful`` (the paper's rubric folds that case in), and every task has
  at least one demonstrated strategy;
* **sequential failure attribution** (:data:`ATTRIBUTION`) answers with one
  judgment, ``player_failure_stage``: the most upstream stage whose deficiency
  explains the decisive unsuccessful or clearly suboptimal behaviour, one of
  ``knowledge_induction``, ``state_grounding``, ``planning``,
  ``action_commitment``, or ``none``.

Every judgment is an object ``{"label": …, "justification": …}`` with a
non-empty justification. A reply is accepted only when it is exactly that JSON
object (one optional Markdown code fence around it is tolerated): no other
text, no missing, renamed or extra keys, no repeated key, no label outside its
set. A reply that fails is a :class:`VerdictError`; nothing is ever guessed
or repaired.

A structurally valid verdict can still contradict what the episode itself
proves. Two cases are rejected the same way (:func:`contradiction`):

* a failure stage other than ``none`` for an episode that passed with the full
  score of 100: there is no unsuccessful or suboptimal outcome for a stage to
  explain;
* ``none`` for an episode that ended because the model gave no legal action
  after the format retries (``invalid_action``): that ending is itself a
  consequential deficiency of the model.

``none`` on an episode that simply failed is *not* a contradiction: the
paper allows it when the outcome is explained by the environment, a tool or
missing evidence, and the auditor sees more than the score.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TRANSFER = "information_transfer"
ATTRIBUTION = "failure_attribution"
CRITERIA = (TRANSFER, ATTRIBUTION)

RULE_LABELS = ("successful", "unsuccessful")
STRATEGY_LABELS = ("correct", "underfit", "overfit")
STAGES = ("knowledge_induction", "state_grounding", "planning", "action_commitment", "none")

# the judgments each criterion returns, and the labels each allows
JUDGMENTS: dict[str, dict[str, tuple[str, ...]]] = {
    TRANSFER: {"rule_transfer": RULE_LABELS, "strategy_transfer": STRATEGY_LABELS},
    ATTRIBUTION: {"player_failure_stage": STAGES},
}
JUDGMENT_FIELDS = ("label", "justification")
FULL_SCORE = 100.0

# what went wrong with a reply (VerdictError.kind)
NOT_JSON = "not_json"
SCHEMA = "schema"
LABEL = "label"
EMPTY_JUSTIFICATION = "empty_justification"
CONTRADICTION = "contradiction"
ERROR_KINDS = (NOT_JSON, SCHEMA, LABEL, EMPTY_JUSTIFICATION, CONTRADICTION)

_FENCE = re.compile(r"^```(?:json|JSON)?[ \t]*\n(.*)\n```$", re.DOTALL)


class VerdictError(ValueError):
    """A reply that is not an acceptable verdict; ``kind`` is one of :data:`ERROR_KINDS`."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class EpisodeFacts:
    """What the episode's result proves, against which a verdict is checked."""

    score: float
    passed: bool
    failure_mode: str | None

    @property
    def perfect(self) -> bool:
        return self.passed and self.score >= FULL_SCORE


def strategy_binary(label: str) -> str:
    """A three-way strategy label as the binary outcome the tables use."""
    if label not in STRATEGY_LABELS:
        raise ValueError(f"unknown strategy-transfer label {label!r}; known: {STRATEGY_LABELS}")
    return "successful" if label == "correct" else "unsuccessful"


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise VerdictError(SCHEMA, f"the key {key!r} appears twice")
        seen[key] = value
    return seen


def _load_object(text: str) -> dict[str, Any]:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise VerdictError(NOT_JSON, "the reply is empty")
    try:
        obj = json.loads(body, object_pairs_hook=_no_repeats)
    except json.JSONDecodeError as e:
        raise VerdictError(
            NOT_JSON, f"the reply is not one JSON object ({e.msg} at character {e.pos})"
        ) from None
    if not isinstance(obj, dict):
        raise VerdictError(NOT_JSON, f"the reply is JSON {type(obj).__name__}, not an object")
    return obj


def _keys_exactly(obj: dict[str, Any], wanted: tuple[str, ...], where: str) -> None:
    missing = [k for k in wanted if k not in obj]
    extra = sorted(k for k in obj if k not in wanted)
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(repr(k) for k in missing))
        if extra:
            parts.append("unexpected " + ", ".join(repr(k) for k in extra))
        raise VerdictError(
            SCHEMA, f"{where}: {'; '.join(parts)} (expected exactly {', '.join(wanted)})"
        )


def parse_verdict(text: str, criterion: str) -> dict[str, dict[str, str]]:
    """The verdict a reply holds, ``{judgment: {"label", "justification"}}``.

    Raises :class:`VerdictError` naming the first problem found. The
    episode-level consistency check is :func:`contradiction`.
    """
    if criterion not in JUDGMENTS:
        raise ValueError(f"unknown criterion {criterion!r}; known: {', '.join(CRITERIA)}")
    spec = JUDGMENTS[criterion]
    obj = _load_object(text)
    _keys_exactly(obj, tuple(spec), "the verdict")
    out: dict[str, dict[str, str]] = {}
    for name, labels in spec.items():
        judgment = obj[name]
        if not isinstance(judgment, dict):
            raise VerdictError(
                SCHEMA, f"{name} is {type(judgment).__name__}, not an object with label and "
                "justification",
            )  # fmt: skip
        _keys_exactly(judgment, JUDGMENT_FIELDS, name)
        label, why = judgment["label"], judgment["justification"]
        if not isinstance(label, str) or label not in labels:
            raise VerdictError(LABEL, f"{name}.label is {label!r}; allowed: {', '.join(labels)}")
        if not isinstance(why, str) or not why.strip():
            raise VerdictError(
                EMPTY_JUSTIFICATION, f"{name}.justification must be a non-empty string"
            )
        out[name] = {"label": label, "justification": why.strip()}
    return out


def contradiction(
    criterion: str, verdict: dict[str, dict[str, str]], facts: EpisodeFacts
) -> str | None:
    """Why ``verdict`` contradicts what the episode proves, or None when it does not."""
    if criterion != ATTRIBUTION:
        return None
    stage = verdict["player_failure_stage"]["label"]
    if stage != "none" and facts.perfect:
        return (
            f"player_failure_stage is {stage!r}, but the episode passed with the full score; "
            "with no unsuccessful or suboptimal outcome the stage must be 'none'"
        )
    if stage == "none" and facts.failure_mode == "invalid_action":
        return (
            "player_failure_stage is 'none', but the episode ended because the model gave no "
            "legal action, which is itself a consequential deficiency"
        )
    return None


def check_verdict(text: str, criterion: str, facts: EpisodeFacts) -> dict[str, dict[str, str]]:
    """:func:`parse_verdict`, then :func:`contradiction` (a :class:`VerdictError` too)."""
    verdict = parse_verdict(text, criterion)
    why = contradiction(criterion, verdict, facts)
    if why is not None:
        raise VerdictError(CONTRADICTION, why)
    return verdict
