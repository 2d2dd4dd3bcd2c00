"""One error base class, one home for failure modes and episode names, and what a
missing optional SDK looks like from the command line."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from vical.errors import (
    AgentConfigError,
    MissingDependency,
    RunFolderError,
    TaskDataError,
    VicalError,
    import_optional,
)
from vical.outcomes import (
    AGENT_FAILURES,
    ENVIRONMENT_FAILURES,
    FAILURE_MODES,
    INFRASTRUCTURE_FAILURES,
    FailureMode,
    episode_name,
    parse_episode_name,
)

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# the error classes
# ---------------------------------------------------------------------------
def test_existing_errors_are_vical_errors_and_keep_their_builtin_base():
    from vical.agent.base import UnknownAgent
    from vical.agent.failures import ApiKeyMissing, PreflightError
    from vical.run import runner
    from vical.spec import TaskSpecError

    assert issubclass(TaskSpecError, TaskDataError) and issubclass(TaskSpecError, ValueError)
    assert runner.RunFolderError is RunFolderError and issubclass(RunFolderError, ValueError)
    for cls in (ApiKeyMissing, PreflightError):
        assert issubclass(cls, AgentConfigError) and issubclass(cls, RuntimeError)
    assert issubclass(UnknownAgent, AgentConfigError) and issubclass(UnknownAgent, ValueError)
    assert issubclass(MissingDependency, ImportError)
    for cls in (TaskSpecError, RunFolderError, ApiKeyMissing, PreflightError, MissingDependency):
        assert issubclass(cls, VicalError) and cls.exit_code == 2


def test_a_bad_task_id_raises_a_task_data_error_that_old_code_still_catches():
    from vical.spec import get_task, select_tasks

    with pytest.raises(TaskDataError, match="taxi/nope"):
        get_task("taxi/nope")
    with pytest.raises(ValueError, match="matches no task"):
        select_tasks("zzz/*")


def test_unknown_agent_is_an_agent_config_error():
    from vical.agent import get_agent

    with pytest.raises(AgentConfigError, match=r"unknown agent 'nope'.*random"):
        get_agent("nope")


def test_missing_dependency_names_package_and_extra():
    e = MissingDependency("google-genai", "api", "backend gemini")
    assert (e.package, e.extra, e.exit_code) == ("google-genai", "api", 2)
    assert str(e) == (
        "backend gemini needs the Python package 'google-genai', which is not installed; "
        "install it with: pip install 'vical[api]'"
    )
    assert "\n" not in str(e)


def test_import_optional_translates_only_the_absence_of_the_module(tmp_path, monkeypatch):
    with pytest.raises(MissingDependency, match=r"pip install 'vical\[api\]'") as info:
        import_optional("vical_absent_sdk.sub", package="absent-sdk", extra="api", needed_for="x")
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    # an installed package whose own import fails is a bug in it, not a missing extra
    pkg = tmp_path / "vical_broken_sdk"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import vical_no_such_helper_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        import_optional("vical_broken_sdk", package="broken", extra="api", needed_for="x")
    assert not isinstance(info.value, MissingDependency)
    assert info.value.name == "vical_no_such_helper_module"
    assert import_optional("json", package="json", extra="api", needed_for="x") is json


def test_the_install_hint_names_an_extra_that_installs_the_sdks():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {re.split(r"[<>=\[ ;]", req, maxsplit=1)[0] for req in extras["api"]}
    assert {"openai", "google-genai"} <= names


# ---------------------------------------------------------------------------
# failure modes and episode names
# ---------------------------------------------------------------------------
def test_failure_modes_are_the_strings_results_have_always_held():
    assert [m.value for m in FAILURE_MODES] == [
        "timeout",
        "invalid_action",
        "token_overflow",
        "early_termination",
        "api_error",
    ]
    assert {"invalid_action", "token_overflow", "api_error"} == AGENT_FAILURES
    assert {"api_error"} == INFRASTRUCTURE_FAILURES
    assert {"timeout", "early_termination"} == ENVIRONMENT_FAILURES
    assert set(FAILURE_MODES) == ENVIRONMENT_FAILURES | AGENT_FAILURES
    for m in FailureMode:
        assert m == m.value and hash(m) == hash(m.value)
        assert f"{m}" == str(m) == m.value and json.dumps(m) == json.dumps(m.value)


def _result(**over):
    base = {
        "schema_version": 1,
        "task_id": "taxi/state1",
        "env": "taxi",
        "variant": "state1",
        "run_index": 0,
        "agent": "random",
        "seed": 1,
        "score": 0.0,
        "passed": False,
        "outcome": "Time Out",
        "failure_mode": "timeout",
        "steps": 3,
        "max_steps": 3,
        "actions": ["Up", "Up", "Up"],
        "frame_hashes": [],
        "tags": {},
        "progress": {},
        "usage": {},
        "cost_usd": None,
        "wall_seconds": 1.0,
        "agent_seconds": 0.5,
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:00:01+00:00",
        "vical_version": "0",
        "files": {},
    }
    return {**base, **over}


@pytest.mark.parametrize("mode", [None, *(m.value for m in FailureMode)])
def test_result_files_round_trip_byte_for_byte(mode):
    from vical.run.results import EvalResult

    text = json.dumps(_result(failure_mode=mode, passed=mode is None), indent=2)
    r = EvalResult.model_validate_json(text)
    assert r.failure_mode == mode
    assert r.model_dump_json(indent=2) == text
    assert r.infrastructure_failure == (mode == "api_error")


def test_a_result_with_an_unknown_failure_mode_is_rejected():
    from pydantic import ValidationError

    from vical.run.results import EvalResult

    with pytest.raises(ValidationError, match="failure_mode"):
        EvalResult.model_validate(_result(failure_mode="crashed"))


def test_a_decision_accepts_only_agent_failures():
    from vical.agent.base import Decision

    d = Decision(None, failure="token_overflow")
    assert d.failure is FailureMode.TOKEN_OVERFLOW
    with pytest.raises(ValueError, match="unknown failure mode 'timeout'"):
        Decision(None, failure="timeout")


def test_episode_names_round_trip_for_every_task():
    from vical.spec import select_tasks

    names = set()
    for t in select_tasks(None):
        for k in (0, 7, 12):
            name = episode_name(t.id, k)
            assert name == f"{t.env.env}__{t.variant.variant}__r{k}"
            assert parse_episode_name(name) == (t.id, k)
            names.add(name)
    assert len(names) == 3 * len(select_tasks(None))


@pytest.mark.parametrize("bad", ["taxi", "/state1", "taxi/", "taxi/a/b"])
def test_episode_name_rejects_what_is_not_a_task_id(bad):
    with pytest.raises(ValueError, match="env/variant"):
        episode_name(bad, 0)


@pytest.mark.parametrize(
    "bad", ["taxi__state1", "taxi__state1__r", "taxi__state1__r01", "taxi__state1__r-1", "x__r0"]
)
def test_parse_episode_name_rejects_other_folder_names(bad):
    with pytest.raises(ValueError, match="not an episode name"):
        parse_episode_name(bad)


def test_low_modules_import_nothing_from_vical():
    for name in ("errors.py", "outcomes.py"):
        tree = ast.parse((ROOT / "vical" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("vical"), (name, node.module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("vical") for a in node.names), name


def test_the_episode_name_is_spelled_once_outside_submit_and_envs():
    spelled = []
    for p in sorted((ROOT / "vical").rglob("*.py")):
        rel = p.relative_to(ROOT / "vical").as_posix()
        if rel == "outcomes.py" or rel.startswith(("submit/", "envs/")):
            continue
        if re.search(r"__r\{", p.read_text()):
            spelled.append(rel)
    assert spelled == []


# ---------------------------------------------------------------------------
# a missing SDK, seen from the command line (the import is blocked in a child)
# ---------------------------------------------------------------------------
_BLOCKING_CLI = textwrap.dedent(
    """
    import sys

    BLOCKED = tuple(sys.argv[1].split(","))

    class Absent:
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Absent())
    for mod in list(sys.modules):
        if any(mod == b or mod.startswith(b + ".") for b in BLOCKED):
            del sys.modules[mod]
    sys.argv = ["vical", *sys.argv[2:]]
    from vical.cli import main

    main()
    """
)


@pytest.mark.parametrize(
    ("backend", "blocked", "package"),
    [
        ("openai-chat", "openai", "openai"),
        ("openai-responses", "openai", "openai"),
        ("openrouter", "openai", "openai"),
        ("gemini", "google.genai", "google-genai"),
    ],
)
def test_eval_without_the_sdk_says_which_extra_to_install(tmp_path, backend, blocked, package):
    out = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": "k", "OPENROUTER_API_KEY": "k", "GEMINI_API_KEY": "k"}
    args = ["eval", "--agent", backend, "--model", "m", "--tasks", "taxi/state1"]
    r = subprocess.run(
        [sys.executable, "-c", _BLOCKING_CLI, blocked, *args, "--out", str(out), "--no-report"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        f"error: backend {backend} needs the Python package {package!r}, which is not "
        "installed; install it with: pip install 'vical[api]'"
    ]
    assert "Traceback" not in r.stderr and not out.exists()


def test_the_report_colours_and_lists_every_failure_mode():
    from vical.report.plots import MODE_COLORS

    assert {m.value for m in FailureMode} | {"passed", "unknown"} == set(MODE_COLORS)
    assert all(type(k) is str for k in MODE_COLORS)


@pytest.mark.parametrize(
    ("outcome", "passed", "agent", "mode"),
    [
        ("Victory", True, None, None),
        ("Time Out", True, None, None),
        ("Time Out", False, None, "timeout"),
        ("Terminated", False, None, "early_termination"),
        (None, False, None, "early_termination"),
        (None, False, "token_overflow", "token_overflow"),
        ("Victory", True, "api_error", "api_error"),
    ],
)
def test_episode_failure_is_the_runners_rule(outcome, passed, agent, mode):
    from vical.outcomes import episode_failure

    got = episode_failure(outcome, passed, agent)
    assert got == mode and (got is None or isinstance(got, FailureMode))
