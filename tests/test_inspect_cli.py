"""The V-ICAL Inspect tasks as Inspect's own command line and limits treat them.

``-T tasks=`` arrives through Inspect's parser (a string, a list for a comma list or
a YAML list); ``inspect eval`` exits 1 when no V-ICAL sample completed; a sample cut
short by an Inspect limit is scored as the truncated episode it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval
from inspect_ai._util.config import parse_cli_args
from inspect_ai.log import read_eval_log

from vical.interop.inspect_exit import error_summary, in_inspect_command
from vical.interop.inspect_import import import_inspect_log
from vical.interop.inspect_tasks import STORE_KEY, vical
from vical.serve import BaselineServer

ROOT = Path(__file__).resolve().parents[1]


def _task_ids(task) -> list[str]:
    return [s.metadata["task_id"] for s in task.dataset]


@pytest.mark.parametrize(
    "arg",
    [
        "tasks=taxi/state1,cartpole/seed41",  # the comma list: Inspect makes it a list
        "tasks=[taxi/state1, cartpole/seed41]",  # a YAML list
        "tasks='taxi/state1,cartpole/seed41'",  # a quoted string, kept whole
    ],
)
def test_tasks_as_inspects_parser_hands_them_over(arg):
    value = parse_cli_args((arg,))["tasks"]
    task = vical(tasks=value)
    assert _task_ids(task) == ["taxi/state1", "cartpole/seed41"]
    assert task.metadata[STORE_KEY]["task_pattern"] == "taxi/state1,cartpole/seed41"


def test_one_task_pattern_and_a_glob():
    assert _task_ids(vical(tasks=parse_cli_args(("tasks=taxi/state1",))["tasks"])) == [
        "taxi/state1"
    ]
    assert len(_task_ids(vical(tasks="taxi/*"))) == 5


def test_a_bad_pattern_names_itself():
    with pytest.raises(ValueError, match="'nosuch/\\*' matches no task"):
        vical(tasks=["taxi/state1", "nosuch/*"])


def test_in_inspect_command_is_only_the_eval_commands():
    assert in_inspect_command(["/venv/bin/inspect", "eval", "vical/vical"])
    assert in_inspect_command(["inspect", "eval-retry", "x.eval"])
    assert not in_inspect_command(["inspect", "view"])
    assert not in_inspect_command(["/usr/bin/pytest", "eval"])
    assert not in_inspect_command([sys.argv[0]])  # this very process: pytest


def test_error_summary_keeps_the_providers_answer():
    message = (
        'ModelGenerateError(\'\\nRequest:\\n{\\n  "model": "x"\\n}\\n\\n'
        "BadRequestError(\\'Error code: 400 - invalid request\\')')"
    )
    assert error_summary(message) == "BadRequestError('Error code: 400 - invalid request')"
    assert error_summary("ValueError('plain')") == "ValueError('plain')"


def _inspect(args: list[str], server: BaselineServer, log_dir: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("inspect")
    if not exe.exists():
        exe = Path(shutil.which("inspect") or "inspect")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "VICAL_API_KEY": "none",
        "VICAL_BASE_URL": server.openai_base_url,
    }
    return subprocess.run(
        [str(exe), "eval", "vical/vical", *args, "--log-dir", str(log_dir), "--display", "plain"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=log_dir.parent,
    )


@pytest.mark.parametrize(
    "fail_on_error",
    [True, pytest.param(False, marks=pytest.mark.slow)],
    ids=["fail-on-error", "no-fail-on-error"],
)
def test_inspect_eval_exits_1_when_no_sample_completed(tmp_path, fail_on_error):
    extra = [] if fail_on_error else ["--no-fail-on-error"]
    with BaselineServer() as server:
        r = _inspect(
            [
                "--model",
                "openai-api/vical/fault-400",
                "-T",
                "tasks=taxi/state1,cliffwalking/base",
                *extra,
            ],
            server,
            tmp_path / "logs",
        )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert "vical/vical: none of its 2 sample(s) completed" in line
    assert str(tmp_path / "logs") in line
    if fail_on_error:
        assert "400 - invalid request (injected fault)" in line


@pytest.mark.slow  # a second `inspect` process; the fresh-venv test runs one too
def test_inspect_eval_exits_0_when_samples_completed(tmp_path):
    with BaselineServer() as server:
        r = _inspect(
            ["--model", "openai-api/vical/first", "-T", "tasks=taxi/state1", "-T", "demos=false"],
            server,
            tmp_path / "logs",
        )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "error:" not in r.stderr


@pytest.mark.parametrize(
    # the time limit leaves a loaded machine room for the first step, and the server's
    # delay (0.25 s a reply, 50 s for the 200-step budget) makes sure the limit ends it
    "limit, kind",
    [({"message_limit": 6}, "message"), ({"time_limit": 8}, "time")],
)
def test_a_sample_cut_short_by_a_limit_is_scored_as_its_truncated_episode(
    tmp_path, monkeypatch, limit, kind
):
    monkeypatch.setenv("VICAL_API_KEY", "k")
    with BaselineServer(delay=0.25 if kind == "time" else 0.0) as server:
        logs = inspect_eval(
            vical(tasks="taxi/state1", demos=False),
            model="openai-api/vical/random",
            model_base_url=server.openai_base_url,
            log_dir=str(tmp_path / "logs"),
            display="none",
            **limit,
        )
    ev = read_eval_log(logs[0].location)
    assert ev.status == "success"
    (sample,) = ev.samples
    assert sample.error is None and sample.limit is not None and sample.limit.type == kind
    data = sample.store[STORE_KEY]
    r = data["result"]
    assert data["cut_short"] == kind and 0 < r["steps"] < 200
    score = sample.scores["vical_scorer"]
    assert score.value == {"score": float(r["score"]), "passed": 0.0}
    assert score.metadata["cut_short"] == kind and score.metadata["failure_mode"] == "timeout"
    assert score.answer.split() == r["actions"]
    assert f"cut short by Inspect's {kind} limit after {r['steps']} step(s)" in score.explanation
    # the import takes only whole episodes: a truncated one is listed as unfinished
    with pytest.raises(Exception, match="no sample holds a finished episode"):
        import_inspect_log(Path(logs[0].location), tmp_path / "run")
