"""`vical wm eval` from the command line: what it can check before the model runs is refused
as one error line, before any progress is shown."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vical.cli import app

runner = CliRunner()


def _eval(tmp_path, cases, *extra: str):
    out = tmp_path / "run"
    args = ["wm", "eval", "--cases", str(cases), "--out", str(out), *extra]
    return runner.invoke(app, args), out


def test_a_missing_case_folder_is_one_error_line_and_no_progress_bar(tmp_path):
    missing = tmp_path / "no-cases"
    r, out = _eval(tmp_path, missing, "--wm", "copy-last")
    assert r.exit_code == 2
    assert r.stdout == ""  # no progress bar, not even an empty one
    assert r.stderr == (
        f"error: {missing / 'cases.jsonl'}: no world-model cases here; "
        f"build them with `vical wm build --out {missing}`\n"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (
            ["--wm", "copy-last", "--scenarios", "nope"],
            "scenarios ['nope'] are not in this case set",
        ),
        (["--wm", "no_such_module_here:X"], "world model 'no_such_module_here:X' cannot be loaded"),
    ],
)
def test_an_unknown_scenario_or_model_class_is_refused_before_the_bar(tmp_path, extra, words):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "cases.jsonl").write_text("")  # a case folder without cases
    r, out = _eval(tmp_path, cases, *extra)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: ")
    assert words in r.stderr
    assert not out.exists()
