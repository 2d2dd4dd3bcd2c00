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
    assert "tags:" in flat and "start sequence: none" in flat
    # a human-init task shows its sequence's source; per-task params show theirs
    t = get_task("trondead/level2-a")
    r = runner.invoke(app, ["tasks", "show", t.id])
    flat = " ".join(r.stdout.split())
    assert "origin generated): " + " ".join(t.variant.init_source.split()) in flat
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


def test_tasks_show_says_who_made_the_start_and_every_demo_clip():
    """The start sequence's origin and text, and each demo clip's origin and source, in
    the text and in --json (Figure 5's sequence is the paper's, the clips are programs')."""
    from vical.spec import get_task

    t = get_task("asterix/lanes")
    r = runner.invoke(app, ["tasks", "show", t.id])
    assert r.exit_code == 0, r.output
    out = r.stdout
    part = out[out.index("who made the start and the demonstrations") :]
    assert all(len(line) <= 80 for line in part.splitlines())
    flat = " ".join(part.split())
    assert f"start sequence ({len(t.variant.init_actions)} actions; origin paper): paper:" in flat
    assert len(t.variant.demos) >= 2
    for clip in t.variant.demos:
        head = f"demo clip {clip.id} ({clip.label}; origin {clip.origin}): "
        assert head + " ".join(clip.source.split()) in flat
    assert {c.origin for c in t.variant.demos} == {"search", "scripted"}

    r = runner.invoke(app, ["tasks", "show", t.id, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["id"] == t.id and doc["start"]["origin"] == "paper"
    assert doc["start"]["actions"] == list(t.variant.init_actions)
    assert [(d["id"], d["origin"]) for d in doc["demos"]] == [
        (c.id, c.origin) for c in t.variant.demos
    ]
    assert any(n["number"].startswith("seed ") for n in doc["numbers"])
    # a generated start says so; a task without a start sequence has none
    doc = json.loads(runner.invoke(app, ["tasks", "show", "trondead/level2-a", "--json"]).stdout)
    assert doc["start"]["origin"] == "generated"
    assert doc["start"]["source"].startswith("generated: ")
    doc = json.loads(runner.invoke(app, ["tasks", "show", "taxi/state1", "--json"]).stdout)
    assert doc["start"] is None and {d["origin"] for d in doc["demos"]} == {"scripted"}


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


def test_the_root_group_gives_every_command_the_signal_contract():
    """Inside any command SIGTERM has a handler (it means what Ctrl-C means), and an
    interrupt the command lets through, as KeyboardInterrupt or as the pool's
    Interrupted, ends as one `interrupted:` line naming the signal, with status 130."""
    import signal

    import typer

    from vical.cli import _RootGroup
    from vical.run.pool import Interrupted

    probe = typer.Typer(cls=_RootGroup)
    seen = {}

    @probe.command("look")
    def look() -> None:
        seen["term"] = signal.getsignal(signal.SIGTERM)
        seen["int"] = signal.getsignal(signal.SIGINT)

    @probe.command("ctrl-c")
    def ctrl_c() -> None:
        raise KeyboardInterrupt

    @probe.command("pool")
    def pool() -> None:
        raise Interrupted(signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    before_int = signal.getsignal(signal.SIGINT)
    assert runner.invoke(probe, ["look"]).exit_code == 0
    assert callable(seen["term"]) and seen["term"] is seen["int"]
    assert seen["term"] not in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler)
    assert signal.getsignal(signal.SIGTERM) == before  # given back without a signal
    for name, sig in (("ctrl-c", "SIGINT"), ("pool", "SIGTERM")):
        try:
            r = runner.invoke(probe, [name])
        finally:
            signal.signal(signal.SIGINT, before_int)  # interrupted() ignored further ones
            signal.signal(signal.SIGTERM, before)
        assert r.exit_code == 130 and isinstance(r.exception, SystemExit), r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"interrupted: {sig}: stopped"), r.stderr


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


# ---------------------------------------------------------------------------
# options: each command's values in one frozen dataclass, checked where it is built
# ---------------------------------------------------------------------------
def _api(**changes):
    from dataclasses import replace

    from vical.cli import ApiOptions

    api = ApiOptions(
        endpoint="http://127.0.0.1:1/v1",
        model="m",
        api_key_env=None,
        temperature=None,
        max_output_tokens=None,
        reasoning_effort=None,
        extra_body=None,
        rate_limit=None,
        request_timeout=120.0,
        max_retry_after=120.0,
        transport_retries=3,
    )
    return replace(api, **changes)


def test_eval_options_check_the_agent_then_frames_then_the_api_options(tmp_path):
    from vical.cli import EvalOptions
    from vical.cli._common import OptionError

    base = {"tasks": None, "out": tmp_path, "runs": 1, "seed": 7, "workers": None}
    assert EvalOptions(**base, frames="none").agent_kwargs == {"seed": 7}
    with pytest.raises(OptionError, match=r"^unknown agent 'nope'; available: .*random"):
        EvalOptions(**base, frames="most", agent="nope")
    bad_json = _api(model=None, extra_body="{x")
    with pytest.raises(OptionError, match=r"^--frames 'most' is not one of: none, failed, all$"):
        EvalOptions(**base, frames="most", agent="openai-chat", api=bad_json)
    with pytest.raises(OptionError, match=r"^--extra-body is not valid JSON"):
        EvalOptions(**base, frames="all", agent="openai-chat", api=bad_json)
    with pytest.raises(OptionError, match=r"^--model is required for the openai-chat backend$"):
        EvalOptions(**base, frames="all", agent="openai-chat", api=_api(model=None))
    with pytest.raises(OptionError, match=r"^--model is required for the gemini backend$"):
        EvalOptions(**base, frames="all", agent="gemini")
    opts = EvalOptions(
        **base, frames="failed", agent="openai-chat", api=_api(extra_body='{"top_p": 0.9}')
    )
    assert opts.agent_kwargs["seed"] == 7 and opts.agent_kwargs["model"] == "m"
    assert opts.agent_kwargs["extra_body"] == {"top_p": 0.9}
    # the random agent ignores the API options, even unusable ones
    assert EvalOptions(**base, frames="all", api=bad_json).agent_kwargs == {"seed": 7}


@pytest.mark.parametrize("argv", [["eval"], ["baseline", "random"]])
def test_a_bad_frames_mode_is_refused_alike_by_both_commands_before_task_lookup(argv):
    r = runner.invoke(app, [*argv, "--frames", "most", "--tasks", "zzz/*"])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    assert r.stderr == "error: --frames 'most' is not one of: none, failed, all\n"
    assert r.stdout == ""


def test_no_frames_overrides_frames_before_the_check():
    r = runner.invoke(
        app, ["eval", "--no-frames", "--frames", "most", "--agent", "openai-chat", "-t", "taxi"]
    )
    assert r.exit_code == 2
    assert r.stderr == "error: --model is required for the openai-chat backend\n"


def test_start_up_loads_no_heavy_or_optional_package():
    """`vical --help` imports typer and rich only; each command imports what it calls."""
    import subprocess
    import sys

    code = "import sys, vical.cli; print('\\n'.join(sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.split())
    heavy = {
        *("pydantic", "numpy", "PIL", "yaml", "matplotlib", "gymnasium", "pygame"),
        *("cryptography", "docker", "openai", "google.genai", "datasets", "pyarrow"),
        *("vical.spec", "vical.envs", "vical.agent", "vical.run", "vical.report"),
        *("vical.submit", "vical.serve", "vical.dataset", "vical.demos", "vical.authoring"),
    }
    assert not heavy & loaded
    assert "vical.cli.eval" in loaded and "typer" in loaded  # the probe saw the package


def test_submit_with_an_endpoint_runs_the_image_with_its_options_then_bundles(
    tmp_path, monkeypatch
):
    """The container itself is tested in test_submit.py (it needs an engine); here, which
    option reaches which argument, and that --tasks makes the bundle partial."""
    from vical.run import RunOptions, run_eval
    from vical.spec import select_tasks
    from vical.submit import container
    from vical.submit.keys import keygen

    run = tmp_path / "run"
    run_eval(select_tasks("taxi/state1"), run, options=RunOptions(workers=1, progress=False))
    key, _ = keygen(tmp_path / "key")
    seen = {}

    def fetch_dataset(local):
        seen["local"] = local
        return tmp_path / "fetched"

    def run_in_image(**kw):
        seen.update(kw)
        kw["on_line"]("a line the image printed")
        return run

    monkeypatch.setattr(container, "fetch_dataset", fetch_dataset)
    monkeypatch.setattr(container, "run_in_image", run_in_image)
    bundle = tmp_path / "b.tar.gz"
    args = ["submit", "--key", str(key), "--endpoint", "http://h/v1", "--model", "m"]
    args += ["--backend", "gemini", "--api-key-env", "K", "--dataset", str(tmp_path / "ds")]
    args += ["--image", "img:1", "--tasks", "taxi/state1", "--workdir", str(tmp_path / "w")]
    r = runner.invoke(app, [*args, "--out", str(bundle)])
    assert r.exit_code == 0, r.output
    assert "a line the image printed" in r.stdout
    flat = r.stdout.replace("\n", "")  # the console wraps a long temporary path at 80 columns
    assert f"bundle {bundle}: " in flat and ", partial, " in flat
    assert seen["local"] == tmp_path / "ds" and seen["dataset"] == tmp_path / "fetched"
    assert (seen["endpoint"], seen["model"], seen["backend"]) == ("http://h/v1", "m", "gemini")
    assert (seen["api_key_env"], seen["image"], seen["tasks"]) == ("K", "img:1", "taxi/state1")
    assert seen["out"].parent == tmp_path / "w" and seen["out"].name.startswith("submit-")
    r = runner.invoke(app, ["submit", "--key", str(key), "--endpoint", "http://h/v1"])
    assert r.exit_code == 2 and "--endpoint and --model" in r.stderr


def test_report_help_says_where_the_report_goes():
    r = runner.invoke(app, ["report", "--help"], env={"COLUMNS": "80"})
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "into ./report/ (under the current directory) for several" in text
    assert "into the run folder for one run" in text
