"""Labels a submitter writes (team, model, ...): normalised, visible, and look-alikes
flagged. Each case of the third verification pass as the schema's one-line refusal."""

from __future__ import annotations

import unicodedata

import pytest

from vical.submit.labels import check_submitter, mixed_script
from vical.submit.verdict import VerifyError

BASE = {"team": "Team A", "model": "gpt-x", "endpoint_kind": "openai-chat"}


@pytest.mark.parametrize(
    ("team", "reason"),
    [
        ("a" + "\u0301" * 70, "stacks more than 2 combining marks on one character"),
        ("\u3164\u3164", "contains character U+3164 (shown as nothing)"),
        ("\u115f", "contains character U+115F (shown as nothing)"),
        ("a\u200bb", "contains character U+200B (Cf)"),
        ("a\u00a0b", "contains character U+00A0 (Zs)"),
        ("a\u2028b", "contains character U+2028 (Zl)"),
        ("\u2800", "contains character U+2800 (shown as nothing)"),
        ("\uff21\uff22", "is not in Unicode normal form NFKC"),
        ("e\u0301", "is not in Unicode normal form NFKC"),
        ("---", "holds no letter or digit"),
    ],
)
def test_invisible_stacked_or_unnormalised_labels_are_refused(team, reason):
    with pytest.raises(VerifyError) as e:
        check_submitter({**BASE, "team": team})
    msg = str(e.value)
    assert msg == f"[manifest] field 'submitter.team' {reason}" or (
        msg.startswith("[manifest] field 'submitter.team' ") and reason in msg
    ), msg


@pytest.mark.parametrize(
    "team", ["Team A", "Équipe Ω-7", "東京チーム", "서울 팀", "Команда", "e\u0301"[:1] + "x"]
)
def test_ordinary_names_in_any_script_pass(team):
    check_submitter({**BASE, "team": unicodedata.normalize("NFKC", team)})


def test_mixed_script_look_alikes_are_flagged():
    assert mixed_script("Anthr\u043epic")  # a Cyrillic o in a Latin word
    assert mixed_script("G\u03bfogle Labs")  # a Greek omicron
    assert not mixed_script("Anthropic")
    assert not mixed_script("Команда A")  # two scripts, each word in one
    assert not mixed_script("東京チーム")  # Chinese characters and katakana: one word of Japanese
