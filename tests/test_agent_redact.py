"""Secret redaction: the functions themselves, then end to end over real HTTP.

The end-to-end tests point every backend at the baseline server through an
endpoint that carries ``user:secret@`` and use the ``401-echo`` fault, whose
error message repeats the credential the request carried; neither the key
nor the URL password may appear in any record, in the settings or in the
preflight error.
"""

from __future__ import annotations

import json

import pytest
from agent_support import CLI_KWARGS, play

from vical.agent import get_agent
from vical.agent.failures import PreflightError
from vical.agent.redact import MASK, redact_argv, redact_text, redact_url
from vical.serve import BaselineServer
from vical.spec import get_task

TASK = get_task("taxi/state1")
BACKENDS = ["openai-chat", "openai-responses", "gemini", "openrouter"]

# ------------------------------------------------------------------ redact_url


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://user:secret@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://token@api.example.org/v1", "https://api.example.org/v1"),
        (
            "https://h.example/v1beta?key=AIzaSy123&alt=json",
            f"https://h.example/v1beta?key={MASK}&alt=json",
        ),
        (
            "https://h.example/x?api_key=a&apikey=b&token=c&access_token=d&sig=e&page=2",
            f"https://h.example/x?api_key={MASK}&apikey={MASK}&token={MASK}"
            f"&access_token={MASK}&sig={MASK}&page=2",
        ),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        (None, None),
    ],
)
def test_redact_url(url, expected):
    assert redact_url(url) == expected


def test_redact_url_keeps_parameter_names_and_case_of_the_rest():
    out = redact_url("https://U:P@Host.Example:9/Path/?KEY=zz&Mode=Fast#frag")
    assert out == f"https://Host.Example:9/Path/?KEY={MASK}&Mode=Fast#frag"


# ------------------------------------------------------------------ redact_text


def test_redact_text_removes_given_secrets_and_recognisable_credentials():
    text = (
        "bad key sk-live-0123456789 (received Authorization: Bearer sk-other-999888777); "
        "x-goog-api-key: AIzaAbCdEf0123; {'api-key': 'azure-key-55'}; "
        "see https://bob:hunter22@proxy.example/v1?key=qwerty123&x=1 or Basic dXNlcjpwdw=="
    )
    out = redact_text(text, ["sk-live-0123456789"])
    for leaked in (
        "sk-live-0123456789",
        "sk-other-999888777",
        "AIzaAbCdEf0123",
        "azure-key-55",
        "hunter22",
        "bob:",
        "qwerty123",
        "dXNlcjpwdw==",
    ):
        assert leaked not in out, leaked
    assert "bad key ***" in out
    assert "Authorization: Bearer ***" in out
    assert "https://proxy.example/v1?key=***&x=1" in out


def _b64(text: str, urlsafe: bool = False) -> str:
    import base64

    enc = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return enc(text.encode()).decode("ascii")


SECRET = "sk-proj-Zq8xW2vKp4Lm9Tr7Yb3Nc6"
BODY = SECRET.removeprefix("sk-proj-")


@pytest.mark.parametrize(
    "form",
    [
        pytest.param(SECRET.upper(), id="upper-case"),
        pytest.param(SECRET.lower(), id="lower-case"),
        pytest.param(BODY, id="without-prefix"),
        pytest.param(BODY.upper(), id="without-prefix-upper-case"),
        pytest.param(SECRET.removeprefix("sk-"), id="without-sk-only"),
        pytest.param(_b64(SECRET), id="base64"),
        pytest.param(_b64(SECRET, urlsafe=True), id="base64-urlsafe"),
        pytest.param(_b64(BODY), id="base64-without-prefix"),
    ],
)
def test_redact_text_finds_the_secret_in_the_forms_it_travels_in(form):
    text = f"upstream said: invalid credential {form!s} (request 42)"
    out = redact_text(text, [SECRET])
    assert form not in out
    assert out.startswith("upstream said: invalid credential ") and "(request 42)" in out
    assert MASK in out


@pytest.mark.parametrize("lead", ["", "a", "ab", '{"api":"x","k":"'])
def test_redact_text_masks_a_base64_secret_inside_a_longer_encoded_blob(lead):
    """A secret encoded with other bytes before it (a JSON body, a Basic pair) starts at
    any of three byte offsets; the part of the encoding that is the secret's own goes."""
    blob = _b64(lead + SECRET + '"}')
    out = redact_text(f"echo {blob} end", [SECRET])
    import base64

    decoded = base64.b64decode(blob)
    assert SECRET.encode() in decoded  # the blob did carry it
    assert MASK in out and blob not in out
    # what is left of the blob no longer holds more than a few characters of the key
    for piece in out.removeprefix("echo ").removesuffix(" end").split(MASK):
        rest = base64.b64decode(piece + "=" * (-len(piece) % 4), validate=False) if piece else b""
        assert SECRET[4:12].encode() not in rest


def test_redact_argv_masks_a_key_shaped_value_in_upper_case():
    assert redact_argv(["vical", "eval", SECRET.upper(), "HF_" + "A1b2C3d4" * 3]) == [
        "vical",
        "eval",
        MASK,
        MASK,
    ]


def test_redact_text_leaves_ordinary_text_and_short_secrets_alone():
    text = "[Action:Up]\nThe key to this level is the door; x marks the spot."
    assert redact_text(text, ["x", "", None]) == text
    assert redact_text(None, ["whatever"]) is None
    assert redact_text("", ["whatever"]) == ""


def test_redact_text_is_fast_on_a_megabyte_of_adversarial_text():

    junk = ("Bearer " + " " * 20 + "://" + "a" * 300 + "?key" + "x" * 50) * 3000
    redact_text(junk, ["secret-value-1"])  # backtracking would hang: the guard fails it


# ------------------------------------------------------------------ redact_argv


def test_redact_argv():
    argv = [
        "vical",
        "eval",
        "--endpoint",
        "http://u:pw123@host:1/v1?key=abc",
        "--endpoint=https://a:b@c.example/v1",
        "--api-key",
        "sk-raw-key-value",
        "--token=tok-123456",
        "--api-key-env",
        "MY_KEY",
        "--max-output-tokens",
        "300",
        "OPENAI_API_KEY=sk-assign-000111",
        "AIzaSyA0123456789abcdefghijk",
        "taxi/state1",
    ]
    out = redact_argv(argv)
    assert out == [
        "vical",
        "eval",
        "--endpoint",
        f"http://host:1/v1?key={MASK}",
        "--endpoint=https://c.example/v1",
        "--api-key",
        MASK,
        f"--token={MASK}",
        "--api-key-env",
        "MY_KEY",
        "--max-output-tokens",
        "300",
        f"OPENAI_API_KEY={MASK}",
        MASK,
        "taxi/state1",
    ]
    assert argv[3].startswith("http://u:pw123@")  # the input is not modified


# ------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def server():
    with BaselineServer(record_bodies=True) as s:
        yield s


def _endpoint(server, backend: str) -> str:
    host = server.url.split("://", 1)[1]
    base = f"http://user:secret@{host}"
    return base if backend == "gemini" else base + "/v1"


KEY = "sk-redact-me-" + "5a7c" * 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_echoed_key_and_url_password_never_reach_records(backend, server, tmp_path, monkeypatch):
    monkeypatch.setenv("VICAL_REDACT_KEY", KEY)
    agent = get_agent(
        backend,
        **{
            **CLI_KWARGS,
            "endpoint": _endpoint(server, backend),
            "model": "fault-401-echo",
            "api_key_env": "VICAL_REDACT_KEY",
            "retry_base_delay": 0.001,
        },
    )
    played = play(agent, TASK, tmp_path, max_decisions=1)
    assert played.decisions[-1].failure == "api_error"
    errors = [r for r in played.records if r["type"] == "api_error"]
    assert errors and errors[0]["status"] == 401
    assert MASK in errors[0]["message"]  # the echo was there, and was masked
    # the server really did receive (and echo) the key: the test is not vacuous
    assert any(r.get("model") == "fault-401-echo" and r["status"] == 401 for r in server.requests)
    with pytest.raises(PreflightError) as e:
        agent.preflight()
    blob = json.dumps(
        {"records": played.records, "settings": agent.settings(), "preflight": str(e.value)}
    )
    log = (tmp_path / "log.jsonl").read_text()
    for text in (blob, log):
        assert KEY not in text
        assert "secret" not in text
        assert "user:" not in text
    assert agent.settings()["endpoint"] == redact_url(_endpoint(server, backend))
    agent.close()


def test_an_endpoint_with_credentials_still_works(server, tmp_path):
    """Redaction is for records only: the SDK client is given the endpoint as written."""
    agent = get_agent(
        "openai-chat",
        **{**CLI_KWARGS, "endpoint": _endpoint(server, "openai-chat"), "model": "first"},
    )
    played = play(agent, TASK, tmp_path, max_decisions=1)
    assert played.actions == [TASK.action_names[0]]
    assert "user:secret" not in json.dumps(played.records)
