"""The scale-out options of the command line: a bad --shard, --executor or --ray-address is
one error line (exit 2) before anything runs; `vical merge` refuses mixed inputs."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from vical.cli import app
from vical.cli._common import OptionError
from vical.cli.scale import check_executor, shard_option

cli = CliRunner()


def _eval(tmp_path, *extra: str):
    return cli.invoke(
        app,
        [
            "eval",
            "--agent",
            "random",
            "--tasks",
            "taxi/state1",
            "--out",
            str(tmp_path / "r"),
            *list(extra),
        ],
    )


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--executor", "spark"], "--executor 'spark' is not one of: local, ray"),
        (["--ray-address", "127.0.0.1:6379"], "--ray-address is for --executor ray"),
        (["--shard", "2/2"], "--shard: shard 2/2: the index counts from 0"),
        (["--shard", "half"], "--shard: shard 'half' is not of the form I/N"),
    ],
)
def test_bad_scale_options_fail_before_the_run(tmp_path, extra, words):
    r = _eval(tmp_path, *extra)
    assert r.exit_code == 2, r.output
    assert words in r.output
    assert not (tmp_path / "r").exists()


def test_ray_executor_needs_the_package_and_an_address(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "ray" else find(n))
    with pytest.raises(OptionError, match=r"pip install 'vical\[ray\]'"):
        check_executor("ray", "127.0.0.1:6379")
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object())
    with pytest.raises(OptionError, match="needs the cluster's address"):
        check_executor("ray", None)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    check_executor("ray", None)  # the variable is enough
    check_executor("local", None)
    assert shard_option(None) is None and str(shard_option("1/3")) == "1/3"


def test_a_ray_cluster_it_cannot_use_is_one_error_line_before_any_progress(tmp_path, monkeypatch):
    """Nothing answers at the address (with the ray extra) or the package is missing
    (without it): either way one `error:` line, and no progress bar drawn first."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    r = _eval(tmp_path, "--executor", "ray", "--ray-address", "127.0.0.1:1", "--no-report")
    assert r.exit_code == 2, r.output
    (line,) = r.stderr.splitlines()  # the bar would be drawn on stderr, above the error
    if importlib.util.find_spec("ray") is None:
        assert line.startswith("error: --executor ray needs the Python package 'ray'")
    else:
        assert line.startswith("error: nothing answers at the Ray address '127.0.0.1:1'")


def test_merge_takes_folders_or_verdict_files_not_both(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "v.json").write_text("{}")
    r = cli.invoke(app, ["merge", str(tmp_path / "run"), str(tmp_path / "v.json"), "--out", "x"])
    assert r.exit_code == 2 and "not both" in r.output
    r = cli.invoke(app, ["merge", str(tmp_path / "nope"), "--out", "x"])
    assert r.exit_code == 2 and "no such shard folder or verdict file" in r.output
