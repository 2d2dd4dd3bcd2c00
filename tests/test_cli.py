"""The command line, end to end through the console script's app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vical.cli import app

runner = CliRunner()


def test_tasks_list_json_and_text():
    r = runner.invoke(app, ["tasks", "list", "--tasks", "taxi"])
    assert r.exit_code == 0
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 5 and lines[0].startswith("taxi/state0\t")
    r = runner.invoke(app, ["tasks", "list", "--json", "--tasks", "cartpole/*"])
    rows = json.loads(r.stdout)
    assert next(x["id"] for x in rows) == "cartpole/seed41" and rows[0]["actions"] == 2


def test_tasks_show_writes_png(tmp_path):
    out = tmp_path / "start.png"
    r = runner.invoke(app, ["tasks", "show", "taxi/state0", "--png", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Pickup" in r.stdout


def test_unknown_task_names_value_and_fix():
    r = runner.invoke(app, ["tasks", "show", "taxi/nope"])
    assert r.exit_code == 2 and "taxi/nope" in r.output and "state0" in r.output
    r = runner.invoke(app, ["eval", "--tasks", "zzz/*"])
    assert r.exit_code == 2 and "vical tasks list" in r.output


def test_eval_then_report(tmp_path):
    out = tmp_path / "run"
    r = runner.invoke(
        app,
        [
            "eval",
            "--tasks",
            "taxi/state0,acrobot/rest",
            "--runs",
            "2",
            "--out",
            str(out),
            "--workers",
            "1",
        ],
    )
    assert r.exit_code == 0, r.output
    assert (out / "report.json").exists() and (out / "report.md").exists()
    assert "All" in r.stdout
    r = runner.invoke(app, ["report", str(out), str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert len(data["runs"]) == 2 and data["runs"][0]["n_episodes"] == 4


@pytest.mark.parametrize("env", ["cliffwalking", "pong", "multiroom"])
def test_sheet(tmp_path, env):
    from PIL import Image

    from vical.spec import select_tasks

    out = tmp_path / "sheet.png"
    r = runner.invoke(app, ["tasks", "sheet", "--env", env, "--out", str(out)])
    assert r.exit_code == 0, r.output
    n = len(select_tasks(env))
    assert f"{n} start frames" in r.stdout
    w, h = Image.open(out).size
    assert w >= min(n, 5) * 200 and h > 100


def test_unknown_backend_lists_choices():
    r = runner.invoke(app, ["eval", "--agent", "nope", "--tasks", "taxi/state0"])
    assert r.exit_code == 2 and "random" in r.output
