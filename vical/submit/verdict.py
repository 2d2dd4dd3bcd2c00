"""What verification concludes: a refusal naming its check, or a verdict.

Every check of ``vical verify`` raises :class:`VerifyError` (one line, naming the
stage and what is wrong) or contributes to a :class:`Verdict` (one
:class:`EpisodeVerdict` per replayed episode or world-model case).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vical.errors import VicalError
from vical.run.results import EvalResult


class VerifyError(VicalError, ValueError):
    """A bundle failed a check; the message names the check and what is wrong."""

    exit_code = 1  # rejected (2 is kept for "could not run")

    def __init__(self, stage: str, msg: str):
        super().__init__(f"[{stage}] {msg}")
        self.stage = stage


def first_line(e: BaseException) -> str:
    """An exception's message in one line of at most 300 characters (its type's name
    when it has none)."""
    text = str(e).strip().splitlines()
    return " ".join(text[:3])[:300] if text else type(e).__name__


@dataclass
class EpisodeVerdict:
    episode: str
    ok: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    ok: bool
    manifest: dict[str, Any]
    episodes: list[EpisodeVerdict]
    partial: bool
    signer: str
    results: list[EvalResult] = field(default_factory=list)
    # the ablation condition the run declares and its logs were checked against:
    # {"rules": "basic" | "detailed", "demos": bool}
    condition: dict[str, Any] | None = None
    # the run's agent (a kind of vical.submit.kinds.AGENT_KINDS; None for a world-model
    # bundle) and whether its runs can ever be ranked (the references never are)
    agent: str | None = None
    rankable: bool = False
    # set when an episode's replay disagrees with its claims: the submitter's machine
    # (from the bundle's fingerprint, None when it has none) and this one's, each with
    # its self-check, so both sides can see whether the machines explain it
    machines: dict[str, Any] | None = None

    @property
    def mismatches(self) -> list[EpisodeVerdict]:
        return [e for e in self.episodes if not e.ok]
