"""An HTTP world model served by the baseline server, end to end through `vical wm`."""

import json
import urllib.error
import urllib.request

import pytest
from conftest import build_wm_cases
from typer.testing import CliRunner

from vical.cli import app
from vical.serve.server import BaselineServer
from vical.wm.cases import load_cases
from vical.wm.evaluate import SCORES, evaluate, rescore
from vical.wm.models import HttpWorldModel

runner = CliRunner()


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    return build_wm_cases(tmp_path_factory.mktemp("wm-http-cases"), ("taxi",))


def _eval_over_http(cases_dir, out):
    """`vical wm eval --wm http` on the cases, served by a baseline server; it succeeds."""
    with BaselineServer() as server:
        res = runner.invoke(
            app,
            [
                "wm",
                "eval",
                "--wm",
                "http",
                "--endpoint",
                server.url,
                "--cases",
                str(cases_dir),
                "--out",
                str(out),
            ],
        )
    assert res.exit_code == 0, res.output
    return res


def _submit(run, key, bundle, *extra):
    """`vical wm submit` of a run folder into ``bundle``; it succeeds."""
    res = runner.invoke(
        app, ["wm", "submit", str(run), "--key", str(key), "--out", str(bundle), *extra]
    )
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.slow
def test_http_copy_last_matches_the_control(cases_dir, tmp_path):
    with BaselineServer() as server:
        via_http = evaluate(HttpWorldModel(server.url), cases_dir, tmp_path / "http")
    local = evaluate("copy-last", cases_dir, tmp_path / "local")
    assert via_http["model"] == "http"
    assert via_http["index"] == local["index"]
    assert rescore(tmp_path / "http", cases_dir) == []


@pytest.mark.slow
def test_blank_server_scores_low(cases_dir, tmp_path):
    with BaselineServer(wm="blank") as server:
        summary = evaluate(HttpWorldModel(server.url), cases_dir, tmp_path / "blank")
    assert summary["index"]["fidelity"]["mean"] < 20.0
    scores = [json.loads(x) for x in (tmp_path / "blank" / SCORES).read_text().splitlines()]
    assert len(scores) == len(load_cases(cases_dir))


def test_server_rejects_a_malformed_request():
    with BaselineServer() as server:
        req = urllib.request.Request(
            server.url + "/v1/wm/predict", data=b'{"protocol": "other/0"}', method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 400
        assert b"vical-wm/1" in e.value.read()


def test_cli_eval_report_verify(cases_dir, tmp_path):
    res = _eval_over_http(cases_dir, tmp_path / "run")
    assert "http (own intervention): WM index (action skill) 0.0, MSE skill 0.0" in res.output
    assert "FLAGGED: http ignores the action" in res.output
    res = runner.invoke(app, ["wm", "report", str(tmp_path / "run")])
    assert res.exit_code == 0 and "## t-taxi" in res.output
    res = runner.invoke(app, ["wm", "verify", str(tmp_path / "run"), "--cases", str(cases_dir)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["wm", "eval", "--wm", "http", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--endpoint" in res.output


def test_http_run_is_bundled_signed_and_verified(cases_dir, tmp_path):
    """eval over HTTP, `vical wm submit`, then `vical wm verify BUNDLE` re-scores it."""
    from vical.submit.keys import keygen

    key, pub = keygen(tmp_path / "key")
    _eval_over_http(cases_dir, tmp_path / "run")
    bundle = tmp_path / "wm.tar.gz"
    _submit(tmp_path / "run", key, bundle, "--team", "t")
    res = runner.invoke(
        app, ["wm", "verify", str(bundle), "--cases", str(cases_dir), "--pubkey", str(pub)]
    )
    assert res.exit_code == 0, res.output
    assert "PASS: 5 cases re-score exactly" in res.output


def test_a_bundle_claiming_a_better_score_is_rejected(cases_dir, tmp_path):
    from vical.submit.bundle import make_wm_bundle
    from vical.submit.keys import keygen
    from vical.submit.verify import VerifyError, verify_bundle

    key, pub = keygen(tmp_path / "key")
    run = tmp_path / "run"
    evaluate("copy-last", cases_dir, run)
    scores = [json.loads(x) for x in (run / SCORES).read_text().splitlines()]
    worst = min(scores, key=lambda x: x["score"])
    assert worst["score"] < 100.0
    worst["score"] = 100.0
    (run / SCORES).write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in scores))
    make_wm_bundle(run, key, tmp_path / "b.tar.gz", "t")
    with pytest.raises(VerifyError, match="vical wm verify"):
        verify_bundle(tmp_path / "b.tar.gz", pubkeys=[pub])  # an agent-run verification
    v = verify_bundle(tmp_path / "b.tar.gz", pubkeys=[pub], wm_cases=cases_dir, accept_wm=True)
    assert not v.ok
    bad = [e for e in v.episodes if not e.ok]
    assert [e.episode for e in bad] == [worst["case"]]
    assert "does not re-derive" in bad[0].problems[0]


def test_vical_verify_rebuilds_the_truth_from_the_simulators(tmp_path):
    """`vical verify BUNDLE` needs no case folder: it rebuilds the run's cases."""
    from vical.submit.keys import keygen
    from vical.wm.cases import build

    key, pub = keygen(tmp_path / "key")
    build(tmp_path / "cases", ["grid-navigation"], contexts=1)
    with BaselineServer() as server:
        evaluate(HttpWorldModel(server.url), tmp_path / "cases", tmp_path / "run")
    bundle = tmp_path / "wm.tar.gz"
    _submit(tmp_path / "run", key, bundle)
    res = runner.invoke(app, ["verify", str(bundle), "--pubkey", str(pub)])
    assert res.exit_code == 0, res.output
    assert "PASS: 5/5" in res.output
    res = runner.invoke(
        app,
        [
            "leaderboard",
            "add",
            str(bundle),
            "--pubkey",
            str(pub),
            "--submissions",
            str(tmp_path / "subs"),
        ],
    )
    assert res.exit_code == 1 and "vical wm verify" in res.output
