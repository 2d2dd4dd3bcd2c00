"""The submitter's labels: what verify cannot prove, shown as the team states it.

A bundle's ``submitter`` (team, model, endpoint kind, date, description, generation
settings) is checked against a strict schema before anything is shown
(:func:`check_submitter`): each label is a string of printable characters within
:data:`SUBMITTER_LIMITS`, in Unicode normal form NFKC, with no control, format or
invisible characters and no stacks of combining marks. A word mixing letters of two
scripts (a look-alike of a name) passes but is flagged on the board
(:func:`mixed_script`).
"""

from __future__ import annotations

import json
from typing import Any

from vical.submit.verdict import VerifyError

_SUBMITTER_FIELDS = ("team", "model", "endpoint_kind")
# what verify cannot prove, shown on the leaderboard as the team states it: a strict
# schema (type, length in characters, no control/format characters) for each field
SUBMITTER_LIMITS = {"team": 80, "model": 120, "endpoint_kind": 64, "date": 40, "description": 500}
MAX_GENERATION_BYTES = 16 * 1024  # the generation settings, as canonical JSON


def _label_problem(value: Any, limit: int) -> str | None:
    """Why ``value`` cannot be shown as a label (None when it can)."""
    import unicodedata

    if not isinstance(value, str):
        return f"is not a string ({type(value).__name__})"
    if not value.strip():
        return "is empty"
    if len(value) > limit:
        return f"is longer than {limit} characters"
    if value != value.strip():
        return "starts or ends with white space"
    run = 0
    for c in value:
        cat = unicodedata.category(c)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (cat == "Zs" and c != " "):
            return f"contains character U+{ord(c):04X} ({cat})"
        if c in INVISIBLE:
            return f"contains character U+{ord(c):04X} (shown as nothing)"
        run = run + 1 if cat in ("Mn", "Mc", "Me") else 0
        if run > MAX_COMBINING_RUN:
            return f"stacks more than {MAX_COMBINING_RUN} combining marks on one character"
    if unicodedata.normalize("NFKC", value) != value:
        return "is not in Unicode normal form NFKC (write it as its NFKC form)"
    if not any(unicodedata.category(c)[0] in "LN" for c in value):
        return "holds no letter or digit"
    return None


# characters that show as nothing although no category says so (fillers, blank patterns)
INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f\u17b4\u17b5\u180e")
MAX_COMBINING_RUN = 2  # more combining marks on one base than any script writes in a name


def label_scripts(value: str) -> set[str]:
    """The scripts of a label's letters (the first word of each letter's Unicode name:
    LATIN, CYRILLIC, GREEK, ...); digits, marks and punctuation belong to none."""
    import unicodedata

    out = set()
    for c in value:
        if unicodedata.category(c).startswith("L"):
            script = unicodedata.name(c, "UNKNOWN").split(" ")[0]
            out.add("CJK" if script in _EAST_ASIAN else script)
    return out


# scripts one word of Chinese, Japanese or Korean mixes by nature
_EAST_ASIAN = frozenset(
    {"CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL", "HALFWIDTH", "FULLWIDTH"}
)


def mixed_script(value: str) -> bool:
    """Whether a word of ``value`` mixes letters of two scripts (a look-alike of a name
    in one script, such as Cyrillic letters in a Latin word): flagged on the board."""
    import re

    return any(len(label_scripts(w)) > 1 for w in re.split(r"[\s\W_]+", value) if w)


def check_submitter(sub: dict[str, Any]) -> None:
    """The submitter's labels pass a strict schema, or :class:`VerifyError`.

    ``team``, ``model``, ``endpoint_kind`` (required), ``date`` (an ISO 8601 date or
    time) and ``description`` (optional) are strings of printable characters within
    :data:`SUBMITTER_LIMITS`; ``generation`` (optional) is a JSON object of at most
    :data:`MAX_GENERATION_BYTES`. Nothing else.
    """
    from datetime import datetime

    extra = sorted(str(k) for k in sub if k not in (*SUBMITTER_LIMITS, "generation"))
    if extra:
        raise VerifyError("manifest", f"unknown field 'submitter.{extra[0][:40]}'")
    for key, limit in SUBMITTER_LIMITS.items():
        if key not in sub and key not in _SUBMITTER_FIELDS:
            continue
        if key not in sub:
            raise VerifyError("manifest", f"field 'submitter.{key}' is missing")
        problem = _label_problem(sub[key], limit)
        if problem:
            raise VerifyError("manifest", f"field 'submitter.{key}' {problem}")
    if "date" in sub:
        try:
            datetime.fromisoformat(sub["date"])
        except ValueError:
            raise VerifyError(
                "manifest", "field 'submitter.date' is not an ISO 8601 date"
            ) from None
    if "generation" in sub:
        gen = sub["generation"]
        if not isinstance(gen, dict):
            raise VerifyError("manifest", "field 'submitter.generation' is not a JSON object")
        try:
            size = len(json.dumps(gen, sort_keys=True, allow_nan=False))
        except (ValueError, RecursionError):
            raise VerifyError(
                "manifest", "field 'submitter.generation' is not plain JSON"
            ) from None
        if size > MAX_GENERATION_BYTES:
            raise VerifyError(
                "manifest",
                f"field 'submitter.generation' is larger than {MAX_GENERATION_BYTES} bytes",
            )
