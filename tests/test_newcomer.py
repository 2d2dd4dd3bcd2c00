"""Rough edges a new user meets, each held here: what a reference run suggests next,
the report's warning for rows over different tasks and its note on how columns
average, the same exit status from `verify` and `leaderboard add` for a missing key
(and the keyring folder that README names), `submit --endpoint`'s one error line,
a dataset card of a partial build that does not claim the paper's figures, and a
page server that stays quiet when a browser goes away mid-reply."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vical.cli import app
from vical.cli.report import coverage_warning
from vical.demos.stats import demo_stats, stats_table
from vical.spec import TASKS_DIR, all_tasks, select_tasks

ROOT = Path(__file__).resolve().parents[1]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "random"
    r = CliRunner().invoke(
        app, ["eval", "--agent", "random", "--tasks", "taxi/state1", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    return out, r.output


def test_a_reference_run_suggests_comparing_not_submitting(reference_run):
    out, output = reference_run
    flat = _flat(output)
    assert "vical submit" not in flat
    assert f"next: compare a model's run with this reference: vical report RUN --random {out}" in (
        flat
    )


def test_the_report_says_how_columns_average(reference_run):
    _, output = reference_run
    assert "each environment weighs the same" in _flat(output)
    assert "means over episodes" in _flat(output)


def test_rows_over_different_tasks_are_warned_of(reference_run, tmp_path):
    out, _ = reference_run
    other = tmp_path / "other"
    r = CliRunner().invoke(
        app,
        ["eval", "--agent", "random", "--tasks", "taxi/state1,taxi/state2", "--out", str(other)],
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        app, ["report", str(other), "--random", str(out), "--out", str(tmp_path / "rep")]
    )
    assert r.exit_code == 0, r.output
    flat = _flat(r.output)
    assert "warning: these runs played different tasks (other: 2 task(s)" in flat
    assert "(random ref.): 1 task(s)" in flat
    assert coverage_warning({"a": {"x"}, "b": {"x"}}) is None


def test_verify_and_leaderboard_add_agree_on_a_missing_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no submissions/keys/*.pub here
    bundle = tmp_path / "b.tar.gz"
    bundle.write_bytes(b"not checked before the key")
    codes = {}
    for cmd in (["verify", str(bundle)], ["leaderboard", "add", str(bundle)]):
        r = CliRunner().invoke(app, cmd)
        codes[cmd[0]] = r.exit_code
        assert "no trusted public key" in _flat(r.output), r.output
    assert codes == {"verify": 2, "leaderboard": 2}
    missing = tmp_path / "none.pub"
    for cmd in (["verify"], ["leaderboard", "add"]):
        r = CliRunner().invoke(app, [*cmd, str(bundle), "--pubkey", str(missing)])
        assert r.exit_code == 2 and "no such public key file" in r.output


def test_the_keyring_folder_exists():
    keys = ROOT / "submissions" / "keys"
    assert keys.is_dir() and (keys / "README.md").is_file()
    assert not list(keys.glob("*.pub"))  # the folder ships without anyone's key


def test_submit_endpoint_without_the_hub_is_one_error_line(tmp_path):
    key = tmp_path / "team.key"
    r = CliRunner().invoke(app, ["keygen", "--out", str(key)])
    assert r.exit_code == 0, r.output
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "80",
    }
    cmd = ["submit", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--key", str(key)]
    p = subprocess.run(
        [sys.executable, "-m", "vical.cli", *cmd],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    lines = p.stderr.strip().splitlines()
    assert p.returncode != 0 and len(lines) == 1, p.stderr
    assert lines[0].startswith("error: could not fetch dataset") and "--dataset DIR" in lines[0]


def test_a_partial_dataset_card_does_not_claim_the_papers_figures():
    part = stats_table(demo_stats(select_tasks("taxi/state1")))
    rows = {ln.split("|")[1].strip(): ln.split("|")[4].strip() for ln in part.splitlines()[2:]}
    assert rows["tasks with 1 clip"] == "equal over all 342 tasks (this build: 1)"
    assert rows["clip assignments"] == "equal over all 342 tasks (this build: 1)"
    assert "equal" not in rows.values()
    full = stats_table(demo_stats(all_tasks(TASKS_DIR)))  # the built-in tasks' card
    card = (ROOT / "dataset_card" / "README.md").read_text()
    assert full in card  # the published card: every target held, as before


def test_a_browser_leaving_mid_reply_leaves_no_traceback(capfd):
    from vical.view.web import LocalServer

    body = b"x" * 20_000_000
    server = LocalServer(lambda path, query: (200, "video/mp4", body), lambda path, b: None)
    server.start()
    try:
        base = threading.active_count()
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(f"GET /v.mp4 HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # a reset, as a browser cancelling a download sends
        while threading.active_count() > base:  # the handler thread has finished
            threading.Event().wait(0.01)
        with socket.create_connection(("127.0.0.1", server.port)) as s2:  # still serving
            s2.sendall(f"GET /x HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
            assert s2.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        server.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err


def test_readme_says_what_ci_run_installs_beyond_the_test_command():
    """README's second command is the suite; what `.ci/run` adds (system packages) is
    named next to it, with the time it takes."""
    import re

    ci = (ROOT / ".ci" / "run").read_text()
    installed = {p for group in re.findall(r"need\+=\(([^)]*)\)", ci) for p in group.split()}
    installed -= {"chromium-driver", "runc"}  # chromium's companion; a fallback runtime
    readme = (ROOT / "README.md").read_text()
    start = readme.index("**Run the tests**")
    part = readme[start : readme.index("vical is the reproducible distribution")]
    assert "pytest -n 2" in part and "pytest -n 2" in ci
    missing = [p for p in sorted(installed) if f"`{p}`" not in part]
    assert not missing, missing
    assert "skipped" in part
    # the time it states is the recorded one (tests/data/durations.json, nox -s durations)
    import json

    wall = json.loads((ROOT / "tests" / "data" / "durations.json").read_text())["wall_seconds"]
    assert f"took {round(wall / 60)} minutes" in " ".join(part.split()), part
