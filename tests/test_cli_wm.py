"""`vical wm eval` from the command line: what it can check before the model runs is refused
as one error line, before any progress is shown."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

# tests.conftest, not conftest: a subprocess imports this module by its package path
from tests.conftest import HANG
from vical.cli import app
from vical.wm.models import Simulator

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


# ------------------------------------------------------------------ stopping a run


class SlowSimulator(Simulator):
    """A world model (`--wm tests.test_cli_wm:SlowSimulator`): the simulator's frames
    (so SDL starts, as for any pygame-drawn game), a second per case."""

    def predict(self, request, case):
        import time

        frames = super().predict(request, case)
        time.sleep(1.0)
        return frames


@pytest.fixture(scope="module")
def taxi_cases(tmp_path_factory):
    from tests.conftest import build_wm_cases

    return build_wm_cases(tmp_path_factory.mktemp("wm") / "cases", ["taxi"])


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_wm_eval_stops_on_a_signal_and_says_what_is_left(tmp_path, taxi_cases, sig):
    """SIGTERM (a container's stop) and SIGINT stop `vical wm eval` within 10 s with
    status 130 and one line naming what was done; no half-written file is left."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "run"
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "vical.cli", "wm", "eval", "--cases", str(taxi_cases)),
            *("--out", str(out), "--wm", "tests.test_cli_wm:SlowSimulator"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        # the manifest is written before any prediction; a context's five cases take
        # five seconds, so a signal a second later comes while the model predicts
        while not (out / "manifest.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        time.sleep(1.0)
        assert proc.poll() is None
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=HANG)  # a hang guard, not a speed bound
        assert proc.returncode == 130, err
        assert err.startswith("\ninterrupted: ") and "cases predicted, not scored" in err
        assert "run the same command again" in err and "Traceback" not in err
        assert not (out / "summary.json").exists() and not list(out.rglob("*.tmp"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_wm_build_stops_on_a_signal_leaving_the_previous_folder(tmp_path, sig):
    """`vical wm build -j 2` stops within 10 s of SIGTERM/SIGINT with status 130; the
    previous case folder is as it was and no temporary folder is left."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "wm"
    out.mkdir()
    (out / "cases.jsonl").write_text("previous\n")
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "vical.cli", "wm", "build", "--out", str(out), "-j", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not [p for p in tmp_path.iterdir() if p.name.startswith(".wm-")]:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        time.sleep(2.0)  # the workers are simulating
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=HANG)  # a hang guard, not a speed bound
        assert proc.returncode == 130, err
        assert "interrupted: nothing written" in err and "Traceback" not in err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["wm"]
        assert sorted(p.name for p in out.iterdir()) == ["cases.jsonl"]
        assert (out / "cases.jsonl").read_text() == "previous\n"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
