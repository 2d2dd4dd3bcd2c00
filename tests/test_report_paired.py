"""`vical report` intervals and `vical report A B --paired`, on hand-built run folders."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.test_report_html import runs  # noqa: F401 - the hand-built runs fixture
from vical.cli import app

runner = CliRunner()


def _flat(text: str) -> str:
    """Console text without rich's panel borders and line wrapping."""
    return " ".join(text.replace("│", " ").split())


def test_report_shows_intervals_in_every_format(runs):  # noqa: F811
    root, a, b, rand = runs
    out = root / "rep"
    r = runner.invoke(app, ["report", str(a), str(b), "--random", str(rand), "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads((out / "report.json").read_text())
    iv = data["runs"][0]["intervals"]["All"]["score"]
    # model-a: taxi 100, pong 20, berzerk 30 -> All 50; resampling 3 environments
    # can only give means between the smallest and the largest
    assert iv["estimate"] == pytest.approx(50.0)
    assert 20.0 <= iv["low"] < 50.0 < iv["high"] <= 100.0
    assert iv["resamples"] == 10_000 and iv["level"] == 0.95 and iv["clusters"] == 3
    # a column with one environment (Sport: pong) has no interval
    assert data["runs"][0]["intervals"]["Sport"]["score"]["low"] is None
    assert data["random"]["intervals"]["All"]["pass_rate"]["estimate"] == 0.0
    md = (out / "report.md").read_text()
    assert "Table 1 uncertainty: 95% intervals" in md
    row = next(line for line in md.splitlines() if line.startswith("| model-a (openai-chat) | ["))
    assert f"[{iv['low']:.1f}, {iv['high']:.1f}]" in row
    html = (out / "report.html").read_text()
    assert 'id="t-table1_intervals"' in html and f"[{iv['low']:.1f}, {iv['high']:.1f}]" in html
    assert f"model-a: All S 50.0 [{iv['low']:.1f}, {iv['high']:.1f}]" in _flat(r.stdout)
    assert "paired" not in data  # only with --paired


def test_paired_cli(runs):  # noqa: F811
    root, a, b, _ = runs
    out = root / "paired"
    r = runner.invoke(app, ["report", str(a), str(b), "--paired", "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = _flat(r.stdout)
    assert "Paired: model-a minus model-b" in text
    # differences per environment: taxi 100-40, pong 20-60, berzerk 30-10 -> All 40/3
    assert "+13.3" in text
    assert "3 matched episodes over 3 tasks" in text
    data = json.loads((out / "report.json").read_text())
    p = data["paired"]
    assert (p["a"], p["b"], p["matched_episodes"], p["only_a"], p["only_b"]) == (
        "model-a",
        "model-b",
        3,
        0,
        0,
    )
    s = p["columns"]["All"]["score"]
    assert s["estimate"] == pytest.approx(40 / 3)
    assert -40.0 <= s["low"] < 40 / 3 < s["high"] <= 60.0
    # pass rate: taxi +100, pong -100, berzerk 0 -> 0
    assert p["columns"]["All"]["pass_rate"]["estimate"] == pytest.approx(0.0)
    assert p["columns"]["Sport"]["score"]["estimate"] == pytest.approx(-40.0)
    md = (out / "report.md").read_text()
    assert "## Paired comparison: model-a minus model-b" in md
    assert "| All | +13.3 |" in md


def test_paired_matches_by_task_and_run(runs):  # noqa: F811
    root, a, _, rand = runs
    r = runner.invoke(
        app, ["report", str(a), str(rand), "--paired", "--no-html", "--out", str(root / "p2")]
    )
    assert r.exit_code == 0, r.output
    p = json.loads((root / "p2" / "report.json").read_text())["paired"]
    # the random reference has runs 0-2 of each task, model-a only run 0
    assert (p["matched_episodes"], p["only_a"], p["only_b"]) == (3, 0, 6)
    # random run 0 scored 5 everywhere: taxi 95, pong 15, berzerk 25
    assert p["columns"]["All"]["score"]["estimate"] == pytest.approx((95 + 15 + 25) / 3)


def test_paired_needs_two_runs(runs):  # noqa: F811
    root, a, b, rand = runs
    r = runner.invoke(app, ["report", str(a), "--paired", "--out", str(root / "x")])
    assert r.exit_code == 2
    assert "--paired compares exactly two run folders" in _flat(r.output)
    r = runner.invoke(app, ["report", str(a), str(b), str(rand), "--paired"])
    assert r.exit_code == 2 and "got 3" in _flat(r.output)
