"""Each model backend through its official SDK against the baseline server.

openai-chat and openai-responses (``openai``), gemini (``google-genai`` with
``http_options.base_url``) and openrouter (``openai`` with ``video_url``
parts), each on a real task with real demonstration clips, over real HTTP.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import urllib.request

import pytest
from agent_support import CLI_KWARGS, data_url_bytes, demo_clips, play
from conftest import HANG

from vical.agent import get_agent
from vical.agent.base import agent_names
from vical.agent.bodies import payload_sha256
from vical.agent.replay import iter_requests, replay_requests
from vical.serve import BaselineServer
from vical.spec import get_task

TASK = get_task("taxi/state1")
BACKENDS = ["openai-chat", "openai-responses", "gemini", "openrouter"]
VIDEO_NATIVE = {"gemini", "openrouter"}


@pytest.fixture(scope="module")
def demos():
    return demo_clips(TASK, [["Up", "Right", "Down"], ["Left"]])


@pytest.fixture
def server():
    with BaselineServer(record_bodies=True, retry_after=0.3) as s:
        yield s


def make(backend, server, model="random", **kw):
    endpoint = server.url if backend == "gemini" else server.openai_base_url
    args = {**CLI_KWARGS, "endpoint": endpoint, "model": model, "retry_base_delay": 0.001}
    args.update(kw)
    return get_agent(backend, **args)


# ------------------------------------------------------------------ reading wire bodies


def _b64(text: str) -> bytes:
    if "-" in text or "_" in text:
        return base64.urlsafe_b64decode(text)
    return base64.b64decode(text)


def wire_turns(backend: str, body: dict) -> list[tuple[str, list[tuple[str, object]]]]:
    """(role, [(kind, text-or-bytes)]) per message of a received body, any API."""
    out = []
    if backend == "gemini":
        for c in body["contents"]:
            parts = []
            for p in c["parts"]:
                if "text" in p:
                    parts.append(("text", p["text"]))
                else:
                    blob = p.get("inlineData") or p["inline_data"]
                    mime = blob.get("mimeType") or blob["mime_type"]
                    parts.append((mime, _b64(blob["data"])))
            out.append(("assistant" if c["role"] == "model" else c["role"], parts))
        return out
    items = body["input"] if backend == "openai-responses" else body["messages"]
    for m in items:
        content = m["content"]
        if isinstance(content, str):
            out.append((m["role"], [("text", content)]))
            continue
        parts = []
        for p in content:
            if p["type"] in ("text", "input_text"):
                parts.append(("text", p["text"]))
            elif p["type"] == "image_url":
                parts.append(data_url_bytes(p["image_url"]["url"]))
            elif p["type"] == "input_image":
                parts.append(data_url_bytes(p["image_url"]))
            elif p["type"] == "video_url":
                parts.append(data_url_bytes(p["video_url"]["url"]))
        out.append((m["role"], parts))
    return out


def payload_turns(backend: str, payload: dict) -> list:
    """The same view of a re-rendered payload (gemini payloads hold raw bytes)."""
    if backend != "gemini":
        return wire_turns(backend, payload)
    out = []
    for c in payload["contents"]:
        parts = []
        for p in c["parts"]:
            if "text" in p:
                parts.append(("text", p["text"]))
            else:
                parts.append((p["inline_data"]["mime_type"], p["inline_data"]["data"]))
        out.append(("assistant" if c["role"] == "model" else c["role"], parts))
    return out


# ------------------------------------------------------------------ tests


def test_all_backends_registered():
    assert set(BACKENDS) <= set(agent_names())


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_plays_with_demos_in_its_transport(backend, server, demos, tmp_path):
    agent = make(backend, server, temperature=0.0, max_output_tokens=200)
    played = play(agent, TASK, tmp_path, max_decisions=3, demos=demos)
    assert len(played.actions) == 3 and all(a in TASK.action_names for a in played.actions)
    entries = server.requests
    assert [e["status"] for e in entries] == [200, 200, 200]
    assert all(e["n_system"] == 0 for e in entries)
    first = wire_turns(backend, entries[0]["body"])
    assert [role for role, _ in first] == ["user"]
    parts = first[0][1]
    media = [(k, v) for k, v in parts if k != "text"]
    texts = [v for k, v in parts if k == "text"]
    if backend in VIDEO_NATIVE:
        assert media[:-1] == [("video/mp4", d.mp4) for d in demos]
        assert not any("pictures are the frames" in t for t in texts)
        assert entries[0]["n_videos"] == len(demos)
    else:
        assert media[:-1] == [("image/jpeg", f) for d in demos for f in d.frames_jpeg]
        for i, d in enumerate(demos, start=1):
            assert any(f"{d.n_frames} pictures are the frames of video {i}" in t for t in texts)
        assert entries[0]["n_videos"] == 0
    assert media[-1][0] == "image/jpeg"  # the live start frame: one JPEG
    # later turns: previous action + exactly one JPEG, whole history kept
    for k in (1, 2):
        prev = wire_turns(backend, entries[k - 1]["body"])
        cur = wire_turns(backend, entries[k]["body"])
        assert cur[: len(prev)] == prev
        (r_role, r_parts), (u_role, u_parts) = cur[len(prev) :]
        assert r_role == "assistant" and r_parts[0][1].startswith(
            f"[Action:{played.actions[k - 1]}]"
        )
        assert u_role == "user" and played.actions[k - 1] in u_parts[0][1]
        assert [kind for kind, _ in u_parts if kind != "text"] == ["image/jpeg"]
    # the settings reach the wire in the provider's own form
    body = entries[0]["body"]
    if backend == "gemini":
        gen = body["generationConfig"]
        assert gen["temperature"] == 0.0
        assert 200 in (gen.get("maxOutputTokens"), gen.get("max_output_tokens"))
    elif backend == "openai-responses":
        assert body["temperature"] == 0.0 and body["max_output_tokens"] == 200
    elif backend == "openrouter":
        assert body["temperature"] == 0.0 and body["max_tokens"] == 200
    else:
        assert body["temperature"] == 0.0 and body["max_completion_tokens"] == 200
    usage = [r["usage"] for r in played.records if r["type"] == "response"]
    assert len(usage) == 3 and all(u["input_tokens"] > 0 for u in usage)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reasoning_effort_and_visible_reasoning(backend, server, tmp_path):
    agent = make(backend, server, reasoning_effort="low")
    played = play(agent, TASK, tmp_path, max_decisions=1)
    body = server.requests[0]["body"]
    if backend == "gemini":
        thinking = body["generationConfig"].get("thinkingConfig") or body["generationConfig"].get(
            "thinking_config"
        )
        assert "LOW" in json.dumps(thinking)
    elif backend == "openai-chat":
        assert body["reasoning_effort"] == "low"
    else:
        assert body["reasoning"] == {"effort": "low"}
    resp = next(r for r in played.records if r["type"] == "response")
    assert resp["reasoning"] and resp["reasoning"].startswith("Read 1 image(s)")


@pytest.mark.parametrize("backend", BACKENDS)
def test_extra_body_is_merged(backend, server, tmp_path):
    extra = {"generationConfig": {"topK": 3}} if backend == "gemini" else {"top_p": 0.5, "seed": 11}
    played = play(
        make(backend, server, extra_body=json.dumps(extra)), TASK, tmp_path, max_decisions=1
    )
    assert played.actions
    body = server.requests[0]["body"]
    if backend == "gemini":
        assert body["generationConfig"]["topK"] == 3
    else:
        assert body["top_p"] == 0.5 and body["seed"] == 11


@pytest.mark.parametrize("backend", BACKENDS)
def test_malformed_answers_end_in_invalid_action(backend, server, tmp_path):
    played = play(make(backend, server, model="fault-malformed"), TASK, tmp_path)
    assert played.decisions[-1].failure == "invalid_action"
    assert len(server.requests) == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_429_honours_retry_after(backend, server, tmp_path):
    played = play(make(backend, server, model="fault-429-2"), TASK, tmp_path, max_decisions=1)
    assert played.actions
    errors = [r for r in played.records if r["type"] == "api_error"]
    assert [e["status"] for e in errors] == [429, 429]
    assert all(e["retry_after"] == 0.3 and e["wait_s"] >= 0.3 for e in errors)


@pytest.mark.parametrize("backend", BACKENDS)
def test_context_length_error_is_token_overflow(backend, server, tmp_path):
    played = play(
        make(backend, server, model="fault-context-length-after-1"),
        TASK,
        tmp_path,
        max_decisions=4,
    )
    assert len(played.actions) == 1
    assert played.decisions[-1].failure == "token_overflow"
    assert [e["status"] for e in server.requests] == [200, 400]


@pytest.mark.parametrize("backend", BACKENDS)
def test_replay_matches_the_wire(backend, server, demos, tmp_path):
    agent = make(backend, server, model="fault-malformed-1", temperature=0.5)
    played = play(agent, TASK, tmp_path, max_decisions=2, demos=demos[:1])
    assert len(played.actions) == 2
    sent = [e["body"] for e in server.requests]
    replayed = list(iter_requests(tmp_path))
    assert len(replayed) == len(sent) == 3
    logged = [r["request_sha256"] for r in played.records if r["type"] == "request"]
    assert [r.sha256 for r in replayed] == logged
    for r, body in zip(replayed, sent, strict=True):
        assert payload_turns(backend, r.payload) == wire_turns(backend, body)
        assert payload_sha256(r.payload) == r.sha256
    if backend != "gemini":
        # the openai SDK sends the body as rendered: byte-for-byte the same JSON
        assert replay_requests(tmp_path) == sent


def test_cli_kwargs_are_exactly_accepted(server):
    for backend in BACKENDS:
        endpoint = server.url if backend == "gemini" else server.openai_base_url
        agent = get_agent(
            backend,
            endpoint=endpoint,
            model="random",
            api_key_env=None,
            temperature=0.7,
            max_output_tokens=512,
            reasoning_effort="high",
            extra_body={"a": 1},
            seed=5,
        )
        s = agent.settings()
        assert s["backend"] == backend and s["endpoint"] == endpoint
        assert (s["model"], s["temperature"], s["max_output_tokens"]) == ("random", 0.7, 512)
        assert (s["reasoning_effort"], s["extra_body"], s["seed"]) == ("high", {"a": 1}, 5)
        json.dumps(s)  # manifest-ready
        agent.close()


# ------------------------------------------------------------------ the server itself


def test_server_rejects_undecodable_images(server):
    import openai

    client = openai.OpenAI(base_url=server.openai_base_url, api_key="x", max_retries=0)
    bogus = "data:image/jpeg;base64," + base64.b64encode(b"not a jpeg").decode()
    with pytest.raises(openai.BadRequestError, match="could not be decoded"):
        client.chat.completions.create(
            model="random",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Legal actions: A, B"},
                        {"type": "image_url", "image_url": {"url": bogus}},
                    ],
                }
            ],
        )
    ok = client.chat.completions.create(
        model="first", messages=[{"role": "user", "content": "Legal actions: A, B"}]
    )
    assert ok.choices[0].message.content.startswith("[Action:A]")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_runs_as_a_module():
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vical.serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "OpenAI-compatible base URL" in proc.stdout.readline() + proc.stdout.readline()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
            ids = [m["id"] for m in json.load(r)["data"]]
        assert ids == ["random", "first", "expert"]
    finally:
        proc.terminate()
        proc.wait(timeout=HANG)


# ------------------------------------------------------------------ through the episode runner


def test_eval_through_the_runner_matches_random_shape_and_never_stores_the_key(
    tmp_path, monkeypatch
):
    from vical.run.runner import RunOptions, run_eval

    secret = "sk-vical-e2e-" + "41c7d02b" * 4
    monkeypatch.setenv("VICAL_E2E_KEY", secret)
    with BaselineServer(record_bodies=True) as s:
        kwargs = {
            **CLI_KWARGS,
            "endpoint": s.openai_base_url,
            "model": "random",
            "api_key_env": "VICAL_E2E_KEY",
        }
        summary = run_eval(
            [TASK],
            tmp_path / "http",
            agent="openai-chat",
            agent_kwargs=kwargs,
            options=RunOptions(workers=1, progress=False),
        )
        sent = [e["body"] for e in s.requests]
    assert summary.finished == 1 and not summary.failed
    run_eval(
        [TASK], tmp_path / "local", agent="random", options=RunOptions(workers=1, progress=False)
    )
    (http_ep,) = (tmp_path / "http" / "episodes").iterdir()
    (local_ep,) = (tmp_path / "local" / "episodes").iterdir()
    http_res = json.loads((http_ep / "eval_result.json").read_text())
    local_res = json.loads((local_ep / "eval_result.json").read_text())
    assert http_res.keys() == local_res.keys()
    assert http_res["steps"] == len(sent) and http_res["usage"]["input_tokens"] > 0
    assert replay_requests(http_ep) == sent
    for f in (tmp_path / "http").rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


@pytest.mark.parametrize("backend", ["gemini", "openai-chat"])
def test_real_demo_package_reaches_the_server(backend, server, tmp_path):
    demos_mod = pytest.importorskip("vical.demos")
    package = demos_mod.load_demo_package(TASK)
    assert package, "taxi/state1 has demonstration clips"
    played = play(make(backend, server), TASK, tmp_path, max_decisions=1, demos=package)
    assert played.actions
    parts = wire_turns(backend, server.requests[0]["body"])[0][1]
    media = [(k, v) for k, v in parts if k != "text"]
    if backend == "gemini":
        assert media[:-1] == [("video/mp4", d.mp4) for d in package]
    else:
        assert media[:-1] == [("image/jpeg", f) for d in package for f in d.frames_jpeg]
    session = next(r for r in played.records if r["type"] == "agent_session")
    assert [d["clip_id"] for d in session["demos"]] == [d.clip_id for d in package]


@pytest.mark.parametrize("task_id", ["cliffwalking/base", "cartpole/seed42"])
def test_expert_over_http_passes_what_it_passes_in_process(task_id, server, tmp_path):
    experts = pytest.importorskip("vical.demos.experts")
    task = get_task(task_id)
    ctl = experts.controller_for(task.env)
    if ctl is not None:
        from vical.authoring.experts import run_policy

        local = run_policy(task, ctl)
    else:
        local = experts.bfs_expert(task)
    assert local is not None and local.passed
    played = play(make("openai-chat", server, model="expert"), task, tmp_path, max_decisions=100)
    assert played.actions == local.actions
    assert played.score == local.score
    notes = [r["reasoning"] for r in played.records if r["type"] == "response"]
    assert all("Expert:" in n and "fallback" not in n for n in notes)


def test_bad_options_fail_before_any_request(server):
    with pytest.raises(ValueError, match="thinking level"):
        make("gemini", server, reasoning_effort="lots")
    with pytest.raises(ValueError, match="extra-body"):
        make("openai-chat", server, extra_body="{not json")
    assert server.requests == []


# ------------------------------------------------------------------ broken infrastructure

BROKEN = ["not-json", "html", "binary", "null", "schemaless", "empty-body"]
# what each backend's message names (the gemini SDK hides the body of a non-JSON reply)
BROKEN_WORDS = {
    "not-json": "not JSON",
    "html": "not JSON",
    "binary": "not",
    "null": "",
    "schemaless": "",
    "empty-body": "",
}


@pytest.mark.parametrize("kind", BROKEN)
@pytest.mark.parametrize("backend", BACKENDS)
def test_malformed_server_replies_are_retried_then_api_error(backend, kind, server, tmp_path):
    played = play(make(backend, server, model=f"fault-{kind}"), TASK, tmp_path)
    assert played.decisions[-1].failure == "api_error"  # never invalid_action, never a crash
    assert len(server.requests) == 4  # transport retries, like any infrastructure failure
    errors = [r for r in played.records if r["type"] == "api_error"]
    assert len(errors) == 4
    for e in errors:
        assert (e["kind"], e["reason"], e["status"]) == ("retryable", "malformed_reply", None)
        assert e["message"].startswith("malformed reply: ")
        assert BROKEN_WORDS[kind] in e["message"]
        assert len(e["message"]) < 300
    assert not [r for r in played.records if r["type"] == "response"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_malformed_reply_is_absorbed(backend, server, tmp_path):
    played = play(
        make(backend, server, model="fault-schemaless-1"), TASK, tmp_path, max_decisions=2
    )
    assert len(played.actions) == 2
    rec = next(r for r in played.decisions[0].records if r["type"] == "decision")
    assert rec["transport_retries"] == 1 and rec["format_retries"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_fault_rate_mid_run_spares_the_preflight(backend, tmp_path):
    with BaselineServer(fault_rate=1.0, fault_kinds=("html",)) as s:
        agent = make(backend, s, transport_retries=1)
        agent.preflight()
        played = play(agent, TASK, tmp_path, max_decisions=2)
        assert played.decisions[-1].failure == "api_error"
        assert [r["status"] for r in s.requests] == [200, 200, 200]
        assert [r["fault"] for r in s.requests] == [None, "html", "html"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_timeout_reaches_every_sdk(backend, server, tmp_path):
    agent = make(backend, server, model="fault-hang", request_timeout=0.3, transport_retries=1)
    assert agent.settings()["request_timeout"] == 0.3
    played = play(agent, TASK, tmp_path)  # a timeout that did not reach the SDK hangs
    assert played.decisions[-1].failure == "api_error"
    reasons = [r["reason"] for r in played.records if r["type"] == "api_error"]
    assert reasons == ["timeout", "timeout"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_reply_is_capped_for_every_backend(backend, server, tmp_path):
    from vical.agent.wire import MAX_REPLY_CHARS

    played = play(make(backend, server, model="fault-huge"), TASK, tmp_path, max_decisions=1)
    assert played.actions
    (resp,) = [r for r in played.records if r["type"] == "response"]
    assert len(resp["text"]) == MAX_REPLY_CHARS and resp["text_truncated_from"] > 5_000_000
    assert (tmp_path / "log.jsonl").stat().st_size < 1_000_000


@pytest.mark.parametrize("backend", BACKENDS)
def test_preflight_reports_a_malformed_endpoint_in_the_backend_terms(backend, server):
    from vical.agent.failures import PreflightError

    label = {
        "openai-chat": "OpenAI chat completions",
        "openrouter": "OpenAI chat completions",
        "openai-responses": "OpenAI Responses API",
        "gemini": "Gemini generateContent",
    }[backend]
    with pytest.raises(PreflightError, match=f"did not answer like an? {label} server"):
        make(backend, server, model="fault-null").preflight()
    assert len(server.requests) == 2  # one retry
