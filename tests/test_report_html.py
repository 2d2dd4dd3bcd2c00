"""`vical report` end to end on hand-built run folders: JSON, Markdown, HTML in headless Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from vical.cli import app
from vical.run.results import EvalResult, atomic_write_json

runner = CliRunner()

# env -> (types, memory, dynamics, actions)
ENVS = {
    "taxi": (["Maze"], "Single", "Static", ["Up", "Down", "Left", "Right", "Pickup", "Dropoff"]),
    "pong": (["Sport"], "Multiple", "Dynamic", ["NOOP", "Up", "Down"]),
    "berzerk": (["Shooter", "Maze"], "Multiple", "Dynamic", ["Up", "Shoot", "Up+Shoot"]),
}


def _write_run(root: Path, name: str, agent: str, plan: dict, tokens: int, seed: int) -> Path:
    """plan: env -> list of (score, passed, mode, actions) for task v0 run k."""
    run = root / name
    rng = np.random.default_rng(seed)
    for env, episodes in plan.items():
        types, memory, dynamics, _ = ENVS[env]
        for k, (score, passed, mode, actions) in enumerate(episodes):
            d = run / "episodes" / f"{env}__v0__r{k}"
            (d / "frames").mkdir(parents=True)
            for i in range(len(actions) + 1):
                img = np.full((24, 32, 3), (i * 20) % 255, dtype=np.uint8)
                img[:, : i % 32] = rng.integers(0, 255, 3, dtype=np.uint8)
                Image.fromarray(img).save(d / "frames" / f"{i:04d}.png")
            recs = [
                {"type": "response", "step": i, "answer": f"[Action:{a}]", "text": f"[Action:{a}]"}
                for i, a in enumerate(actions)
            ]
            if agent != "random" and env == "pong":
                recs.append(
                    {"type": "response", "step": 0, "answer": "[Action:Up] no, [Action:Down]"}
                )
            (d / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
            atomic_write_json(
                d / "eval_result.json",
                EvalResult(
                    task_id=f"{env}/v0",
                    env=env,
                    variant="v0",
                    run_index=k,
                    agent=agent,
                    seed=k,
                    score=score,
                    passed=passed,
                    outcome="Victory" if passed else "Terminated",
                    failure_mode=None if passed else mode,
                    steps=len(actions),
                    max_steps=12,
                    actions=actions,
                    frame_hashes=["start"] + [f"f{i}" for i in range(len(actions))],
                    tags={"types": types, "memory": memory, "dynamics": dynamics},
                    usage={"input_tokens": tokens * len(actions), "output_tokens": 7}
                    if tokens
                    else {},
                    wall_seconds=0.1,
                    agent_seconds=0.1,
                    started_at="t",
                    finished_at="t",
                    vical_version="0",
                ),
            )
    return run


@pytest.fixture
def runs(tmp_path):
    model_a = _write_run(
        tmp_path,
        "model-a",
        "openai-chat",
        {
            "taxi": [(100, True, None, ["Down", "Left", "Pickup", "Right", "Dropoff"])],
            "pong": [(20, False, "early_termination", ["Up"] * 11 + ["Down"])],
            "berzerk": [(30, False, "timeout", ["Up+Shoot"] * 12)],
        },
        tokens=1000,
        seed=1,
    )
    model_b = _write_run(
        tmp_path,
        "model-b",
        "gemini",
        {
            "taxi": [(40, False, "timeout", ["Left"] * 12)],
            "pong": [(60, True, None, ["Up", "Down", "NOOP", "Up"])],
            "berzerk": [(10, False, "token_overflow", ["Shoot", "Up"])],
        },
        tokens=50,
        seed=2,
    )
    rand = _write_run(
        tmp_path,
        "random-ref",
        "random",
        {
            env: [(5.0 * (k + 1), False, "early_termination", acts[:3]) for k in range(3)]
            for env, (*_, acts) in ENVS.items()
        },
        tokens=0,
        seed=3,
    )
    return tmp_path, model_a, model_b, rand


HEADERS = [
    "Table 1: score S and pass rate P% by category",
    "Failure modes per run",
    "Game type and failure mode (Table 25)",
    "Episode length by run (Table 27)",
    "Episode length by environment (Table 28)",
    "Action-bias audit (Table 19)",
    "Model-specific limitations (Table 22)",
    "Difficulty strata (Eq. 2, Table 23)",
    "Task-attribute associations (Table 24)",
    "Demonstration context (Figure 6)",
    "Same-start-state trajectories",
    "φ_timeout",
    "Median [IQR]",
    "Largest excess",
    "Fixated failed runs",
]
FIGURES = [
    "failure_modes",
    "failure_by_type",
    "episode_length",
    "action_heatmaps",
    "strata",
    "associations",
    "demo_context",
    "trajectory_strips",
    "frame_strips",
]


def test_report_cli_writes_every_format(runs):
    root, a, b, rand = runs
    out = root / "rep"
    r = runner.invoke(app, ["report", str(a), str(b), "--random", str(rand), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "random-ref" in r.stdout and "model-b" in r.stdout and "All" in r.stdout
    data = json.loads((out / "report.json").read_text())
    assert [x["name"] for x in data["runs"]] == ["model-a", "model-b"]
    assert data["random"]["name"] == "random-ref"
    an = data["analyses"]
    # difficulty strata: taxi best 100 vs random mean 10 -> Δ 90 Easy; pong 60-10=50 Medium;
    # berzerk 30-10=20 Hard
    tiers = {s["env"]: (s["tier"], round(s["delta"], 6)) for s in an["strata"]}
    assert tiers == {"taxi": ("Easy", 90.0), "pong": ("Medium", 50.0), "berzerk": ("Hard", 20.0)}
    fix = {x["run"]: x["fixated"] for x in an["fixation"]}
    # model-a: pong 11/12 Up (91.7%, failed, 12 steps) and berzerk 12/12 -> 2; model-b: taxi 12 Left
    assert fix == {"model-a": 2, "model-b": 1, "random-ref": 0}
    assert an["log_audit"]["model-a"]["conflicting"] == 1
    assert set(data["figures"]) == set(FIGURES)
    for f in FIGURES:
        assert (out / "figures" / f"{f}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    for h in HEADERS:
        assert h in md, h
    assert "| Random reference: random-ref |" in md and "Random (paper)" in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(FIGURES)
    assert "http://" not in html and "https://" not in html  # self-contained


def test_report_links_a_viewer_exported_next_to_it(runs, tmp_path):
    root, a, _, _ = runs
    out = tmp_path / "rep"
    r = runner.invoke(app, ["report", str(a), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert 'id="viewer-link"' not in (out / "report.html").read_text()
    (out / "view").mkdir()
    (out / "view" / "index.html").write_text("<!doctype html>")
    r = runner.invoke(app, ["report", str(a), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert '<a id="viewer-link" href="view/index.html">' in (out / "report.html").read_text()


def test_report_errors_are_clear(runs, tmp_path):
    root, a, *_ = runs
    r = runner.invoke(app, ["report", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "no such run folder" in " ".join(r.output.split())
    r = runner.invoke(app, ["report", str(a), "--strip-task", "nope/x", "--out", str(root / "o")])
    assert r.exit_code == 2 and "--strip-task nope/x" in " ".join(r.output.split())


def test_single_run_without_random_has_no_strata(runs):
    root, a, *_ = runs
    r = runner.invoke(app, ["report", str(a), "--no-html"])
    assert r.exit_code == 0, r.output
    data = json.loads((a / "report.json").read_text())
    assert data["random"] is None and data["analyses"]["strata"] is None
    assert not (a / "report.html").exists()


def test_html_report_in_headless_chromium(runs, browser):
    root, a, b, rand = runs
    out = root / "rep"
    r = runner.invoke(app, ["report", str(a), str(b), "--random", str(rand), "--out", str(out)])
    assert r.exit_code == 0, r.output
    # the page must not need anything beside it: move it away from figures/
    alone = root / "alone"
    alone.mkdir()
    shutil.copy(out / "report.html", alone / "report.html")
    errors: list[str] = []
    failed: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("requestfailed", lambda req: failed.append(req.url))
    page.goto((alone / "report.html").as_uri())
    page.wait_for_load_state("load")
    text = page.inner_text("body")
    for h in HEADERS:
        assert h in text, h
    headers = page.locator("table thead th").all_inner_texts()
    for h in ("Model", "All S", "All P%", "Δ", "TV", "Bias?", "φ_timeout", "Early death"):
        assert h in headers, h
    for f in FIGURES:
        img = page.locator(f"#f-{f} img")
        assert img.count() == 1, f
        assert img.evaluate("el => el.complete && el.naturalWidth > 0"), f
    assert page.locator("table").count() >= 12
    # wide tables scroll inside their box; the page itself never scrolls sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    shot = root / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert not errors, errors
    assert not failed, failed
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_table1_shows_its_all_column_at_1280_px_without_scrolling(runs, browser):
    """A 1280-pixel window: Table 1's All S and All P% are inside the window and inside
    the table's box while the box is not scrolled; the page does not scroll sideways."""
    root, a, b, rand = runs
    out = root / "rep1280"
    r = runner.invoke(app, ["report", str(a), str(b), "--random", str(rand), "--out", str(out)])
    assert r.exit_code == 0, r.output
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / "report.html").as_uri())
    page.wait_for_load_state("load")
    table = page.locator("#t-table1")
    box = table.locator("xpath=..")
    assert box.evaluate("el => el.scrollLeft") == 0
    visible = box.bounding_box()
    assert visible is not None and visible["x"] + visible["width"] <= 1280
    headers = table.locator("thead th").all_inner_texts()
    for name in ("All S", "All P%"):
        col = headers.index(name) + 1
        for cell in (
            table.locator(f"thead th:nth-child({col})"),
            table.locator(f"tbody tr:first-child td:nth-child({col})"),
        ):
            bb = cell.bounding_box()
            assert bb is not None, name
            assert (
                visible["x"] <= bb["x"]
                and bb["x"] + bb["width"] <= visible["x"] + visible["width"] + 0.5
            ), (name, bb, visible)
            # the cell shown there is the All cell itself, not one painted over it
            hit = page.evaluate(
                "([x, y]) => document.elementFromPoint(x, y).textContent",
                [bb["x"] + bb["width"] / 2, bb["y"] + bb["height"] / 2],
            )
            assert hit == cell.inner_text(), (name, hit)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.screenshot(path=str(root / "report-1280.png"))
