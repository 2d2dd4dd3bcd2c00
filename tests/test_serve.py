"""The baseline server's fault injection and its command line, over real HTTP.

Requests go through plain ``urllib`` (to see the exact bytes a fault sends)
or through the ``openai`` SDK; the server runs in a thread on a free port.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from conftest import HANG
from PIL import Image
from typer.testing import CliRunner

from vical.agent.parse import parse_action
from vical.cli import app
from vical.serve import (
    FAULT_KINDS,
    HUGE_CHARS,
    BaselineServer,
    build_parser,
    parse_fault_kinds,
)

LEGAL_LINE = "Legal actions: Up, Down"


def _png() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 10, 10)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def chat_body(model: str, image: bool = False) -> dict:
    content: list[dict] = [{"type": "text", "text": LEGAL_LINE}]
    if image:
        content.append({"type": "image_url", "image_url": {"url": _png()}})
    return {"model": model, "messages": [{"role": "user", "content": content}]}


def post(url: str, body: dict, headers: dict | None = None, timeout: float = 10):
    """(status, content type, raw body bytes) of one POST."""
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


@pytest.fixture
def server():
    with BaselineServer(record_bodies=True) as s:
        yield s


# ------------------------------------------------------------------ broken 200 replies


@pytest.mark.parametrize(
    "kind, ctype, check",
    [
        ("not-json", "text/plain", lambda b: b == b"OK"),
        ("html", "text/html", lambda b: b.lstrip().lower().startswith(b"<!doctype html")),
        ("null", "application/json", lambda b: json.loads(b) is None),
        ("schemaless", "application/json", lambda b: json.loads(b) == {}),
        ("empty-body", "application/json", lambda b: b == b""),
    ],
)
def test_broken_bodies_are_status_200_with_what_they_promise(server, kind, ctype, check):
    status, got_type, body = post(
        server.openai_base_url + "/chat/completions", chat_body(f"fault-{kind}")
    )
    assert status == 200
    assert got_type.split(";")[0] == ctype
    assert check(body), body[:100]


def test_binary_fault_is_json_typed_but_not_utf8(server):
    status, ctype, body = post(
        server.openai_base_url + "/responses",
        {
            "model": "fault-binary",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": LEGAL_LINE}]}],
        },
    )
    assert status == 200 and ctype == "application/json" and body
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")


def test_broken_bodies_on_the_gemini_route(server):
    url = server.url + "/v1beta/models/fault-null:generateContent"
    status, _, body = post(url, {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    assert status == 200 and body == b"null"


# ------------------------------------------------------------------ 401-echo and huge


@pytest.mark.parametrize(
    "headers, path_suffix, secret",
    [
        ({"Authorization": "Bearer sk-echo-me-123456"}, "", "sk-echo-me-123456"),
        ({"x-goog-api-key": "AIza-echo-me-999"}, "", "AIza-echo-me-999"),
        ({}, "?key=query-key-777", "query-key-777"),
    ],
)
def test_401_echo_repeats_the_credential_it_received(server, headers, path_suffix, secret):
    url = server.openai_base_url + "/chat/completions" + path_suffix
    status, _, body = post(url, chat_body("fault-401-echo"), headers)
    assert status == 401
    assert secret in json.loads(body)["error"]["message"]


def test_huge_reply_is_a_legal_marker_line_then_megabytes(server):
    status, _, body = post(server.openai_base_url + "/chat/completions", chat_body("fault-huge"))
    assert status == 200
    msg = json.loads(body)["choices"][0]["message"]
    text = msg["content"]
    assert len(text) > HUGE_CHARS
    assert parse_action(text, ["Up", "Down"]).action in ("Up", "Down")
    assert len(msg["reasoning_content"]) > HUGE_CHARS


# ------------------------------------------------------------------ hang


def test_hang_never_answers_and_stop_releases_it_quickly():
    s = BaselineServer().start()
    outcome: dict = {}

    def call():
        t0 = time.perf_counter()
        try:
            outcome["reply"] = post(
                s.openai_base_url + "/chat/completions", chat_body("fault-hang"), timeout=30
            )
        except Exception as e:  # the dropped connection
            outcome["error"] = type(e).__name__
        outcome["elapsed"] = time.perf_counter() - t0

    t = threading.Thread(target=call)
    t.start()
    time.sleep(1.0)
    assert "elapsed" not in outcome  # still waiting for an answer
    assert [r["fault"] for r in s.requests] == ["hang"]
    s.stop()
    t.join(timeout=HANG)  # a hang guard, not a speed bound
    assert not t.is_alive()
    assert "reply" not in outcome  # dropped, never answered
    assert outcome["elapsed"] < 15


def test_hang_times_out_a_client_with_a_short_timeout(server):
    with pytest.raises((TimeoutError, urllib.error.URLError, OSError)):
        post(server.openai_base_url + "/chat/completions", chat_body("fault-hang"), timeout=0.5)


# ------------------------------------------------------------------ fault rate on image turns only


def test_fault_rate_hits_image_turns_but_never_text_only_requests():
    with BaselineServer(fault_rate=1.0, fault_kinds=("not-json",)) as s:
        url = s.openai_base_url + "/chat/completions"
        for _ in range(5):
            status, ctype, body = post(url, chat_body("random"))
            assert status == 200 and ctype == "application/json"
            assert json.loads(body)["choices"][0]["message"]["content"].startswith("[Action:")
        for _ in range(3):
            status, ctype, body = post(url, chat_body("random", image=True))
            assert status == 200 and ctype == "text/plain" and body == b"OK"
        assert [r["fault"] for r in s.requests] == [None] * 5 + ["not-json"] * 3


def test_model_name_faults_apply_to_text_only_requests(server):
    status, _, _ = post(server.openai_base_url + "/chat/completions", chat_body("fault-500"))
    assert status == 500


def test_model_name_fault_counts(server):
    url = server.openai_base_url + "/chat/completions"
    got = [post(url, chat_body("fault-empty-body-2"))[2] for _ in range(3)]
    assert got[:2] == [b"", b""]
    assert json.loads(got[2])["choices"][0]["message"]["content"].startswith("[Action:")


# ------------------------------------------------------------------ kinds and flags


def test_unknown_fault_kinds_are_named_with_the_known_ones():
    with pytest.raises(ValueError) as e:
        parse_fault_kinds("429, bogus ,not-json,nope")
    msg = str(e.value)
    assert "'bogus'" in msg and "'nope'" in msg and "'429'" not in msg
    for k in FAULT_KINDS:
        assert k in msg
    with pytest.raises(ValueError, match="known kinds"):
        BaselineServer(fault_kinds=("hangs",))
    assert parse_fault_kinds(" hang,401-echo ") == ("hang", "401-echo")


def test_server_parser_reads_the_fault_flags():
    args = build_parser().parse_args(
        ["--fault-rate", "0.25", "--fault-kinds", "429,binary", "--retry-after", "7.5"]
    )
    assert (args.fault_rate, args.fault_kinds, args.retry_after) == (0.25, ("429", "binary"), 7.5)
    defaults = build_parser().parse_args([])
    assert (defaults.fault_rate, defaults.fault_kinds, defaults.retry_after) == (
        0.0,
        ("malformed",),
        1.0,
    )


def test_serve_baseline_rejects_an_unknown_fault_kind():
    result = CliRunner().invoke(app, ["serve-baseline", "--fault-kinds", "500,teapot"])
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "'teapot'" in out and "empty-body" in out


def test_serve_baseline_rejects_an_unknown_auditor_mode():
    result = CliRunner().invoke(app, ["serve-baseline", "--auditor", "lenient"])
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "--auditor 'lenient'" in out and "contradictory" in out


def test_serve_baseline_help_lists_the_flags():
    result = CliRunner().invoke(app, ["serve-baseline", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    flags = ("--fault-rate", "--fault-kinds", "--retry-after", "--host", "--port", "--seed")
    for flag in (*flags, "--wm", "--auditor"):
        assert flag in result.output
    assert "401-echo" in result.output and "hang" in result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_baseline_command_injects_faults_with_its_retry_after():
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from vical.cli import main; main()",
            "serve-baseline",
            "--port",
            str(port),
            "--fault-rate",
            "1",
            "--fault-kinds",
            "429",
            "--retry-after",
            "42",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        banner = proc.stdout.readline() + proc.stdout.readline() + proc.stdout.readline()
        assert f"127.0.0.1:{port}" in banner
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        status, _, _ = post(url, chat_body("random"))
        assert status == 200  # text only: never hit
        req = urllib.request.Request(
            url,
            data=json.dumps(chat_body("random", image=True)).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 429 and e.value.headers["Retry-After"] == "42"
    finally:
        proc.terminate()
        proc.wait(timeout=HANG)


def test_local_servers_reply_without_nagles_delay():
    """Every local HTTP server sets TCP_NODELAY on its connections: their handlers
    write the headers and the body in two sends, and with Nagle's algorithm on the
    body waited for the client's delayed ACK (about 40 ms a reply; the effect is
    measured by benchmarks/latency_bound.py, not asserted here)."""
    from vical.audit.label import _handler as label_handler
    from vical.view.web import LocalServer

    with BaselineServer() as s:
        assert s._httpd.RequestHandlerClass.disable_nagle_algorithm is True
    page = LocalServer(lambda path, query: (200, "text/plain", b""), lambda path, body: None)
    try:
        assert page.httpd.RequestHandlerClass.disable_nagle_algorithm is True
    finally:
        page.httpd.server_close()
    assert label_handler(None).disable_nagle_algorithm is True  # type: ignore[arg-type]


def test_serve_baseline_names_its_models_refuses_others_and_stops_on_sigterm():
    """The banner states the model names served; another name gets the provider's 404
    (OpenAI's model_not_found, Gemini's NOT_FOUND); SIGTERM stops it as Ctrl-C does."""
    import os
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "vical.cli", "serve-baseline", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        banner: list[str] = []
        reader = threading.Thread(
            target=lambda: banner.extend(proc.stdout.readline() for _ in range(5)), daemon=True
        )
        reader.start()
        reader.join(20)  # a banner of fewer lines fails here instead of blocking
        assert len(banner) == 5, banner
        url = banner[0].split()[-1]
        assert banner[3] == (
            "  Models: random, first, expert, fault-<kind>[-<when>], auditor-<mode>;\n"
        )
        assert "any other name: 404 (model not found)" in banner[4]
        assert all(len(line.rstrip("\n")) <= 80 for line in banner[3:])
        status, _, raw = post(url + "/v1/chat/completions", chat_body("gpt-4o"))
        body = json.loads(raw)
        assert status == 404
        assert body["error"]["code"] == "model_not_found"
        assert "`gpt-4o` does not exist" in body["error"]["message"]
        assert "random, first, expert" in body["error"]["message"]
        gemini = {"contents": [{"role": "user", "parts": [{"text": "Legal actions: A, B"}]}]}
        status, _, raw = post(url + "/v1beta/models/gemini-x:generateContent", gemini)
        body = json.loads(raw)
        assert status == 404 and body["error"]["status"] == "NOT_FOUND"
        assert body["error"]["message"].startswith("models/gemini-x is not found")
        for served in ("first", "fault-malformed", "auditor-valid"):
            assert post(url + "/v1/chat/completions", chat_body(served))[0] == 200, served
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG)  # a hang guard, not a speed bound
        assert proc.returncode == 0 and out.rstrip().endswith("stopped"), err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_serve_baseline_any_model_answers_every_name():
    with BaselineServer(any_model=False) as strict, BaselineServer() as lenient:
        status, _, raw = post(strict.url + "/v1/responses", {"model": "m", "input": "hi"})
        assert status == 404 and json.loads(raw)["error"]["code"] == "model_not_found"
        assert post(lenient.url + "/v1/chat/completions", chat_body("m"))[0] == 200
    from vical.cli.serve import ServeOptions

    assert "--any-model" in ServeOptions("h", 1, 0, 0, 0, (), 1, any_model=True).argv()
