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
    assert len(lines) == 5 and lines[0].startswith("taxi/state1\t")
    r = runner.invoke(app, ["tasks", "list", "--json", "--tasks", "cartpole/*"])
    rows = json.loads(r.stdout)
    assert next(x["id"] for x in rows) == "cartpole/seed41" and rows[0]["actions"] == 2


def test_tasks_digest_is_the_task_data_version():
    from vical.spec import tasks_digest

    r = runner.invoke(app, ["tasks", "digest"])
    assert r.exit_code == 0, r.output
    assert r.stdout.split()[0] == tasks_digest()
    # the first release's task data had another digest (CHANGELOG: breaking change)
    assert not tasks_digest().startswith("4cd5de3a6196")


def test_tasks_show_writes_png(tmp_path):
    out = tmp_path / "start.png"
    r = runner.invoke(app, ["tasks", "show", "taxi/state1", "--png", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Pickup" in r.stdout


def test_tasks_show_prints_where_every_number_comes_from():
    from vical.cli import number_sources
    from vical.spec import get_task

    r = runner.invoke(app, ["tasks", "show", "assault/base"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    part = out[out.index("where the numbers come from") :]
    assert all(len(line) <= 80 for line in part.splitlines())
    flat = " ".join(part.split())
    assert "seed 41: paper: Table 8" in flat and "max steps 48: paper: Table 7" in flat
    assert "frame skip 2: paper: Table 7" in flat and "action steps 2: paper: Table 7" in flat
    assert "scoring target reward = 63: paper: Table 7" in flat
    assert "scoring target pass_reward = 63: calibrated:" in flat
    assert "scoring.time_bonus_weight = 20: calibrated:" in flat
    assert "tags:" in flat and "init sequence: none" in flat
    # a human-init task shows its sequence's source; per-task params show theirs
    t = get_task("trondead/level2-a")
    r = runner.invoke(app, ["tasks", "show", t.id])
    flat = " ".join(r.stdout.split())
    assert " ".join(t.variant.init_source.split()) in flat
    assert "task param level = 2: paper: Table 7" in flat
    assert "task target reward = 80: calibrated:" in flat
    # numbers the paper does not list are not labelled as paper
    rows = dict(number_sources(get_task("enduro/open-a")))
    assert rows["initial skip 0"].startswith("none stored")
    for task_id in ("riverraid/s1-fuel200", "taxi/state1", "alien/base"):
        assert all(
            src.startswith(("paper:", "calibrated:", "none stored"))
            for _, src in number_sources(get_task(task_id))
        )


def test_unknown_task_names_value_and_fix():
    r = runner.invoke(app, ["tasks", "show", "taxi/nope"])
    assert r.exit_code == 2 and "taxi/nope" in r.output and "state1" in r.output
    r = runner.invoke(app, ["eval", "--tasks", "zzz/*"])
    assert r.exit_code == 2 and "vical tasks list" in r.output


def test_eval_then_report(tmp_path):
    out = tmp_path / "run"
    r = runner.invoke(
        app,
        [
            "eval",
            "--tasks",
            "taxi/state1,acrobot/rest",
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
    r = runner.invoke(app, ["eval", "--agent", "nope", "--tasks", "taxi/state1"])
    assert r.exit_code == 2 and "random" in r.output


# ---------------------------------------------------------------------------
# VicalError: one error line and its exit code, from one handler
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["tasks", "list", "--tasks", "zzz/*"], "task pattern 'zzz/*' matches no task"),
        (["eval", "--tasks", "zzz/*"], "task pattern 'zzz/*' matches no task"),
        (["tasks", "show", "taxi/nope"], "unknown task 'taxi/nope'"),
        (["dataset", "stats", "--tasks", "nope*"], "task pattern 'nope*' matches no task"),
    ],
)
def test_task_data_errors_end_as_one_error_line_with_status_2(args, needle):
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert isinstance(r.exception, SystemExit)  # no traceback
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


def test_the_root_group_turns_any_vical_error_into_its_exit_code():
    import typer

    from vical.cli import _RootGroup
    from vical.errors import VicalError

    class Busy(VicalError):
        exit_code = 3

    probe = typer.Typer(cls=_RootGroup)

    @probe.command("busy")
    def busy() -> None:
        raise Busy("the folder [b]x[/b] is in use")

    @probe.command("bug")
    def bug() -> None:
        raise ValueError("not a VicalError")

    r = runner.invoke(probe, ["busy"])
    assert r.exit_code == 3 and isinstance(r.exception, SystemExit)
    assert r.stderr == "error: the folder [b]x[/b] is in use\n"  # printed as is, no markup
    r = runner.invoke(probe, ["bug"])
    assert isinstance(r.exception, ValueError)  # other exceptions are not swallowed


def test_a_folder_without_task_files_is_one_error_line(tmp_path):
    import os
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "vical.cli", "tasks", "list"],
        capture_output=True,
        text=True,
        env={**os.environ, "VICAL_TASKS_DIR": str(tmp_path)},
        timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr == f"error: {tmp_path}: no task files (*.yaml) found\n"
