"""The closed-loop protocol, driven over real HTTP through the openai SDK.

Every test talks to the baseline server (``vical.serve``) running in
a thread on a free port; nothing of ours is patched. The server records the
JSON bodies it received, which is what the assertions read.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from agent_support import CLI_KWARGS, chat_user_texts, data_url_bytes, demo_clips, play

from vical.agent import get_agent
from vical.agent.credentials import is_local_endpoint
from vical.agent.failures import ApiKeyMissing, PreflightError
from vical.agent.media import encode_jpeg
from vical.agent.parse import (
    EMPTY,
    ILLEGAL,
    MISSING,
    NOT_ALONE,
    NOT_FIRST_LINE,
    find_markers,
    parse_action,
    parse_reply,
    split_think,
)
from vical.agent.replay import ReplayError, replay_requests
from vical.agent.wire import MAX_REPLY_CHARS
from vical.envs import make_env
from vical.serve import BaselineServer
from vical.spec import get_task

TASK = get_task("taxi/state1")
LEGAL = TASK.action_names


@pytest.fixture(scope="module")
def server():
    with BaselineServer(record_bodies=True, retry_after=1) as s:
        yield s


def chat_agent(server, model="random", **kw):
    args = {**CLI_KWARGS, "endpoint": server.openai_base_url, "model": model}
    args.update(kw)
    args.setdefault("retry_base_delay", 0.001)
    return get_agent("openai-chat", **args)


def bodies_for(server, model):
    return [r["body"] for r in server.requests if r.get("model") == model]


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    "text, action",
    [
        ("[Action:Down]", "Down"),
        ("[Action:Down]\nbecause the passenger is below", "Down"),
        ("\n  [Action: Pickup ]  \nreason", "Pickup"),
        ("**[action:Left]**", "Left"),
        ("<think>maybe Up</think>\n[Action:Up]\nok", None),  # raw text: think first
    ],
)
def test_parse_accepts_marker_on_first_line(text, action):
    if action is None:
        answer, thought = split_think(text)
        assert thought == "maybe Up"
        assert parse_action(answer, LEGAL).action == "Up"
    else:
        assert parse_action(text, LEGAL).action == action


@pytest.mark.parametrize(
    "text, error",
    [
        ("", EMPTY),
        ("   \n ", EMPTY),
        ("I go Down", MISSING),
        ("Thinking...\n[Action:Down]", NOT_FIRST_LINE),
        ("[Action:down]", ILLEGAL),  # names match exactly, case included
        ("[Action:Fly]", ILLEGAL),
    ],
)
def test_parse_rejects(text, error):
    p = parse_action(text, LEGAL)
    assert p.action is None and p.error == error


def test_parse_reports_conflicting_markers():
    p = parse_action("[Action:Down]\nor rather [Action:Up]", LEGAL)
    assert p.action == "Down" and p.conflicting and p.markers == ["Down", "Up"]
    assert not parse_action("[Action:Down]\nyes [Action:Down]", LEGAL).conflicting


def test_marker_scan_matches_the_marker_grammar_on_random_replies():
    """The linear scan finds exactly what the marker grammar (as a regular
    expression, fine on short texts) finds, on thousands of random replies built
    from the pieces that make markers ambiguous."""
    import random
    import re

    grammar = re.compile(r"\[\s*action\s*:\s*([^\]\n]*?)\s*\]", re.IGNORECASE)
    pieces = ["[", "]", " ", "\n", "\t", "action", "ACTION", ":", "Up", "x", "[Action:", " \n "]
    rng = random.Random(12)
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 24)))
        assert find_markers(text) == [m.group(1) for m in grammar.finditer(text)], repr(text)


@pytest.mark.parametrize(
    "text",
    [
        "[Action:" + " " * 1_000_000,
        "[action:" * 125_000,
        "[Action:x" + " " * 1_000_000,
        "[" * 1_000_000,
        "[Action:" + "\n" * 1_000_000,
        ("[action:x" + " " * 100 + "\n") * 9_000,
        "[ " * 500_000,
        "[Action:Up]" * 90_000,
    ],
    ids=[
        "spaces",
        "repeated-prefix",
        "unclosed-name",
        "brackets",
        "newlines",
        "lines",
        "bracket-space",
        "many-markers",
    ],
)
def test_marker_scan_is_linear_on_adversarial_megabyte_replies(text):
    """Work is counted, not timed: the scan passes over at most three characters
    per character of the reply, so a degenerate reply cannot freeze a worker."""
    work: list[int] = []
    find_markers(text, work)
    assert work[0] <= 3 * len(text) + 10
    assert parse_action(text, LEGAL).error is not None or text.startswith("[Action:Up]")


# ------------------------------------------------------------------ turn structure


def test_first_turn_carries_task_demos_frame_and_no_system_message(server, tmp_path):
    demos = demo_clips(TASK, [["Up", "Right"], ["Down"]])
    agent = chat_agent(server, model="turns-first")
    played = play(agent, TASK, tmp_path, max_decisions=3, demos=demos)
    assert len(played.actions) == 3
    bodies = bodies_for(server, "turns-first")
    assert len(bodies) == 3
    first = bodies[0]["messages"]
    assert [m["role"] for m in first] == ["user"]  # no system message
    texts = "\n".join(chat_user_texts(first[0]))
    assert TASK.env.paper_id in texts
    assert TASK.env.rules.basic.strip() in texts
    assert f"at most {TASK.max_steps} moves" in texts
    assert "Legal actions: " + ", ".join(LEGAL) in texts
    assert "[Action:<name>]" in texts
    assert "reward" not in texts.lower()
    # demonstrations as ordered JPEG frames, each clip introduced, then the start frame
    parts = first[0]["content"]
    images = [data_url_bytes(p["image_url"]["url"]) for p in parts if p["type"] == "image_url"]
    expected = [f for d in demos for f in d.frames_jpeg]
    assert [b for _, b in images[:-1]] == expected
    assert all(m == "image/jpeg" for m, _ in images)
    env = make_env(TASK)
    assert images[-1][1] == encode_jpeg(env.reset())  # the current start frame, last
    for i, d in enumerate(demos, start=1):
        assert f"The next {d.n_frames} pictures are the frames of video {i}" in texts
    # order: each intro sentence sits right before its clip's frames
    kinds = [p["type"] if p["type"] != "text" else p["text"][:16] for p in parts]
    first_img = kinds.index("image_url")
    assert parts[first_img - 1]["text"].startswith("The next 3 pictures")


def test_later_turns_append_previous_action_and_frame_keeping_history(server, tmp_path):
    agent = chat_agent(server, model="turns-later")
    played = play(agent, TASK, tmp_path, max_decisions=4)
    bodies = bodies_for(server, "turns-later")
    assert len(bodies) == 4
    for k in range(1, 4):
        prev, cur = bodies[k - 1]["messages"], bodies[k]["messages"]
        assert cur[: len(prev)] == prev  # whole history kept, unchanged
        reply, new = cur[len(prev) :]
        assert reply["role"] == "assistant"
        assert reply["content"].startswith(f"[Action:{played.actions[k - 1]}]")
        assert new["role"] == "user"
        assert played.actions[k - 1] in new["content"][0]["text"]
        assert [p["type"] for p in new["content"]].count("image_url") == 1
        assert all(m["role"] != "system" for m in cur)


def test_usage_latency_and_reasoning_are_recorded(server, tmp_path):
    played = play(chat_agent(server, model="turns-usage"), TASK, tmp_path, max_decisions=2)
    responses = [r for r in played.records if r["type"] == "response"]
    assert len(responses) == 2
    for r in responses:
        assert r["usage"]["input_tokens"] > 0 and r["usage"]["output_tokens"] > 0
        assert r["latency_s"] >= 0
        assert r["reasoning"].startswith("Read ")  # the server's visible reasoning
        assert r["text"].startswith("[Action:")
    for d in played.decisions:
        assert d.usage["input_tokens"] > 0


# ------------------------------------------------------------------ format retries


def test_malformed_answers_retry_three_times_then_invalid_action(server, tmp_path):
    played = play(chat_agent(server, model="fault-malformed"), TASK, tmp_path)
    d = played.decisions[-1]
    assert d.failure == "invalid_action" and played.actions == []
    bodies = bodies_for(server, "fault-malformed")
    assert len(bodies) == 4  # the first answer plus three retries
    last = bodies[-1]["messages"]
    retries = [m for m in last[1:] if m["role"] == "user"]
    assert len(retries) == 3
    for m in retries:
        text = "\n".join(chat_user_texts(m))
        assert "Legal actions: " + ", ".join(LEGAL) in text
    rec = next(r for r in d.records if r["type"] == "decision")
    assert rec["format_retries"] == 3 and rec["failure"] == "invalid_action"


def test_malformed_then_recovers(server, tmp_path):
    played = play(chat_agent(server, model="fault-malformed-2"), TASK, tmp_path, max_decisions=2)
    assert len(played.actions) == 2
    rec = next(r for r in played.decisions[0].records if r["type"] == "decision")
    assert rec["format_retries"] == 2
    parses = [r["parse"]["error"] for r in played.records if r["type"] == "response"]
    assert parses == [MISSING, MISSING, None, None]


def test_illegal_action_retry_names_the_bad_action(server, tmp_path):
    played = play(chat_agent(server, model="fault-illegal-1"), TASK, tmp_path, max_decisions=1)
    assert len(played.actions) == 1
    second = bodies_for(server, "fault-illegal-1")[1]["messages"]
    retry = "\n".join(chat_user_texts(second[-1]))
    assert "'Teleport' is not a legal action" in retry


def test_conflicting_markers_are_recorded(server, tmp_path):
    played = play(chat_agent(server, model="fault-conflict"), TASK, tmp_path, max_decisions=2)
    assert len(played.actions) == 2
    for d in played.decisions:
        rec = next(r for r in d.records if r["type"] == "decision")
        assert len(rec["conflicting_actions"]) == 1
        assert rec["conflicting_actions"][0][0] == d.action


# ------------------------------------------------------------------ transport retries


def test_429_waits_for_retry_after_and_resends_the_same_request(server, tmp_path):
    played = play(chat_agent(server, model="fault-429-once"), TASK, tmp_path, max_decisions=1)
    assert len(played.actions) == 1
    # the wait recorded is the server's Retry-After (1 s), although the base backoff is 1 ms
    err = next(r for r in played.records if r["type"] == "api_error")
    assert err["status"] == 429 and err["retry_after"] == 1.0 and err["wait_s"] >= 1.0
    rec = next(r for r in played.records if r["type"] == "decision")
    assert rec["transport_retries"] == 1 and rec["format_retries"] == 0
    statuses = [r["status"] for r in server.requests if r.get("model") == "fault-429-once"]
    assert statuses == [429, 200]
    b = bodies_for(server, "fault-429-once")
    assert b[0] == b[1]


def test_persistent_500_ends_with_api_error_after_three_retries(server, tmp_path):
    played = play(chat_agent(server, model="fault-500-always"), TASK, tmp_path)
    assert played.decisions[-1].failure == "api_error"
    statuses = [r["status"] for r in server.requests if r.get("model") == "fault-500-always"]
    assert statuses == [500] * 4
    waits = [r["wait_s"] for r in played.records if r["type"] == "api_error" and "wait_s" in r]
    assert len(waits) == 3 and all(w > 0 for w in waits)


def test_burst_of_500s_is_absorbed(server, tmp_path):
    played = play(chat_agent(server, model="fault-500-3"), TASK, tmp_path, max_decisions=2)
    assert len(played.actions) == 2
    rec = next(r for r in played.decisions[0].records if r["type"] == "decision")
    assert rec["transport_retries"] == 3


def test_client_errors_are_not_retried(server, tmp_path):
    played = play(chat_agent(server, model="fault-400"), TASK, tmp_path)
    assert played.decisions[-1].failure == "api_error"
    assert [r["status"] for r in server.requests if r.get("model") == "fault-400"] == [400]


def test_context_length_error_is_token_overflow_with_progress_kept(server, tmp_path):
    played = play(
        chat_agent(server, model="fault-context-length-after-2"),
        TASK,
        tmp_path,
        max_decisions=5,
    )
    assert len(played.actions) == 2
    assert played.decisions[-1].failure == "token_overflow"
    err = next(r for r in played.records if r["type"] == "api_error")
    assert err["kind"] == "context_length" and err["status"] == 400
    # the progress made stays with the env; one request only for the overflowing turn
    statuses = [
        r["status"] for r in server.requests if r.get("model") == "fault-context-length-after-2"
    ]
    assert statuses == [200, 200, 400]
    env = make_env(TASK)
    env.reset()
    for a in played.actions:
        env.step(a)
    assert played.score == env.score()


# ------------------------------------------------------------------ logs and replay


def test_media_stored_once_by_sha256(server, tmp_path):
    demos = demo_clips(TASK, [["Up"]])
    # Taxi at its start: bumping a wall repeats the same frame
    played = play(chat_agent(server, model="first"), TASK, tmp_path, max_decisions=4, demos=demos)
    assert len(played.actions) == 4
    files = sorted((tmp_path / "media").iterdir())
    for f in files:
        assert f.stem == hashlib.sha256(f.read_bytes()).hexdigest()
    emitted = [sha for d in played.decisions for sha in d.media]
    assert len(emitted) == len(set(emitted)) == len(files)
    refs = [
        p["sha256"]
        for r in played.records
        if r["type"] == "request"
        for m in r["append"]
        for p in m["content"]
        if "sha256" in p
    ]
    assert set(refs) == {f.stem for f in files}
    assert len(refs) > len(set(refs))  # some frame repeated, stored once


def test_replay_reproduces_the_exact_request_sequence(server, tmp_path):
    demos = demo_clips(TASK, [["Up", "Right"]])
    model = "fault-malformed-1"
    play(chat_agent(server, model=model), TASK, tmp_path / "a", max_decisions=3, demos=demos)
    model2 = "fault-429-once"  # counts already used above: use a fresh server for resends
    with BaselineServer(record_bodies=True, retry_after=0) as s2:
        agent = chat_agent(s2, model=model2, temperature=0.2, max_output_tokens=99)
        play(agent, TASK, tmp_path / "b", max_decisions=2, demos=demos)
        sent_b = [r["body"] for r in s2.requests]
    sent_a = bodies_for(server, model)
    assert len(sent_a) == 4  # one format retry
    assert replay_requests(tmp_path / "a") == sent_a
    assert len(sent_b) == 3  # one resend after the 429
    assert replay_requests(tmp_path / "b") == sent_b
    # a tampered media file is detected, not replayed
    victim = next((tmp_path / "a" / "media").iterdir())
    victim.write_bytes(b"tampered")
    with pytest.raises(ReplayError):
        replay_requests(tmp_path / "a")


# ------------------------------------------------------------------ keys and settings


def test_key_is_used_but_never_recorded(server, tmp_path, monkeypatch):
    secret = "sk-vical-test-" + "9f3c2e1d" * 4
    monkeypatch.setenv("VICAL_TEST_KEY", secret)
    agent = chat_agent(server, model="keyed", api_key_env="VICAL_TEST_KEY")
    played = play(agent, TASK, tmp_path, max_decisions=2)
    assert len(played.actions) == 2
    settings = agent.settings()
    assert settings["api_key_env"] == "VICAL_TEST_KEY"
    assert secret not in json.dumps(settings)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f
    assert set(CLI_KWARGS) - {"api_key_env"} <= set(settings)


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("VICAL_NO_SUCH_KEY", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(ApiKeyMissing, match="VICAL_NO_SUCH_KEY"):
        get_agent(
            "openai-chat",
            endpoint="https://api.example.org/v1",
            model="m",
            api_key_env="VICAL_NO_SUCH_KEY",
        )
    # an explicitly named variable must exist even for a local server
    with pytest.raises(ApiKeyMissing, match="VICAL_NO_SUCH_KEY"):
        get_agent(
            "openai-chat",
            endpoint="http://127.0.0.1:9/v1",
            model="m",
            api_key_env="VICAL_NO_SUCH_KEY",
        )
    # the default variable, unset, is an error for a remote endpoint ...
    with pytest.raises(ApiKeyMissing, match="OPENROUTER_API_KEY"):
        get_agent("openrouter", model="m")
    # ... and not for a local one
    assert get_agent("openrouter", endpoint="http://localhost:9/v1", model="m")


def test_model_is_required():
    with pytest.raises(ValueError, match="--model"):
        get_agent("openai-chat", endpoint="http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    "url, local",
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        (None, False),
    ],
)
def test_local_endpoint_detection(url, local):
    assert is_local_endpoint(url) is local


# ------------------------------------------------------------------ the answer contract


@pytest.mark.parametrize(
    "text, action",
    [
        ("`[Action:Up]`\nthe passenger is above", "Up"),
        ("[Action:Up].\nok", "Up"),
        ("  **[Action: Down]**!  \nok", "Down"),
        ("> [Action:Left]", "Left"),
        ("# [Action:Right]\n", "Right"),
        ("- [Action:Pickup];", "Pickup"),
    ],
)
def test_contract_tolerates_decoration_and_trailing_punctuation(text, action):
    assert parse_action(text, LEGAL).action == action


@pytest.mark.parametrize(
    "text, error, name",
    [
        ("I would never pick [Action:North]", NOT_ALONE, "North"),
        ("I would never pick [Action:Up]\nreally", NOT_ALONE, "Up"),
        ("[Action:Up] because the passenger is above", NOT_ALONE, "Up"),
        ("[Action:Up] [Action:Down]", NOT_ALONE, "Up"),
        ("**[Action:Up]** or maybe not", NOT_ALONE, "Up"),
        ("[Action:Up]x", NOT_ALONE, "Up"),
    ],
)
def test_contract_requires_the_first_line_to_be_the_marker(text, error, name):
    p = parse_action(text, LEGAL)
    assert p.action is None and p.error == error and p.name == name


@pytest.mark.parametrize(
    "text, action, error",
    [
        ("<think>[Action:South]", None, MISSING),
        ("<think>I should go [Action:Up]\n[Action:Up]\n", None, MISSING),
        ("  <THINK>plan</think>\n", None, MISSING),
        ("<think>plan: Down</think>\n[Action:Down]", "Down", None),
        ("[Action:Up]\n<think>late</think>", "Up", None),
        ("", None, EMPTY),
    ],
)
def test_unclosed_think_means_no_answer(text, action, error):
    p = parse_reply(text, LEGAL)
    assert (p.action, p.error) == (action, error)


def test_split_think_forms():
    assert split_think("<think>a</think>b") == ("b", "a")
    assert split_think("<think> all of it [Action:Up]") == ("", "all of it [Action:Up]")
    assert split_think("no tags <think>x") == ("no tags <think>x", None)


@pytest.mark.parametrize(
    "text",
    [
        "<think>" + "[Action:" * 125_000,
        "<think>" + " " * 1_000_000,
        "[Action:Up] " + "x" * 1_000_000,
        "**" * 500_000 + "[Action:Up]",
    ],
    ids=["unclosed-think-prefixes", "unclosed-think-spaces", "long-first-line", "stars"],
)
def test_whole_reply_parse_is_linear_on_megabyte_replies(text):
    answer, _ = split_think(text)
    work: list[int] = []
    find_markers(answer, work)
    assert work[0] <= 3 * len(text) + 10
    assert parse_reply(text, LEGAL).action in (None, "Up")


def test_prompts_state_the_contract_and_name_the_new_error():
    from vical.agent import prompts
    from vical.agent.parse import ParsedReply

    contract = prompts.answer_contract(LEGAL)
    assert "first line of your reply must be [Action:<name>]" in contract
    assert "lines after it" in contract
    retry = prompts.retry_text(ParsedReply(None, NOT_ALONE, name="Up"), LEGAL)
    assert "more than the [Action:<name>] marker" in retry


def test_baseline_answers_satisfy_the_contract(server, tmp_path):
    played = play(chat_agent(server, model="random"), TASK, tmp_path, max_decisions=3)
    for r in played.records:
        if r["type"] == "response":
            assert r["parse"]["error"] is None
            assert r["text"].split("\n", 1)[0] == f"[Action:{r['parse']['action']}]"


# ------------------------------------------------------------------ timeouts and Retry-After cap


def test_defaults_for_timeout_and_retry_after_cap(server):
    s = chat_agent(server).settings()
    assert s["request_timeout"] == 120.0 and s["max_retry_after"] == 120.0
    assert chat_agent(server)._client.timeout == 120.0


def test_retry_after_beyond_the_cap_ends_the_decision_at_once(tmp_path):
    with BaselineServer(retry_after=86400) as s:
        agent = chat_agent(s, model="fault-429-always")
        played = play(agent, TASK, tmp_path)  # a day-long wait would hang the test
        assert [r["status"] for r in s.requests] == [429]
    assert played.decisions[-1].failure == "api_error"
    (err,) = [r for r in played.records if r["type"] == "api_error"]
    assert err["retry_after"] == 86400.0 and "wait_s" not in err
    assert err["gave_up"] == "retry-after 86400 s exceeds the cap of 120 s"


def test_retry_after_within_a_raised_cap_is_waited_for(tmp_path):
    with BaselineServer(retry_after=1) as s:
        agent = chat_agent(s, model="fault-429-once", max_retry_after=0.5)
        played = play(agent, TASK, tmp_path, max_decisions=1)
        assert played.decisions[-1].failure == "api_error"
        assert "0.5 s" in next(r for r in played.records if r["type"] == "api_error")["gave_up"]
    with BaselineServer(retry_after=1) as s:
        agent = chat_agent(s, model="fault-429-once", max_retry_after=2)
        played = play(agent, TASK, tmp_path / "b", max_decisions=1)
        assert played.actions


def test_backoff_is_capped_by_retry_max_delay(server, tmp_path):
    agent = chat_agent(server, model="fault-500-always", retry_base_delay=5, retry_max_delay=0.05)
    played = play(agent, TASK, tmp_path)
    waits = [r["wait_s"] for r in played.records if "wait_s" in r]
    assert len(waits) == 3 and all(0 < w <= 0.05 for w in waits)


def test_a_hung_server_is_a_timeout_then_api_error(server, tmp_path):
    agent = chat_agent(server, model="fault-hang", request_timeout=0.3, transport_retries=1)
    played = play(agent, TASK, tmp_path)  # a timeout that did not reach the SDK hangs
    assert played.decisions[-1].failure == "api_error"
    errors = [r for r in played.records if r["type"] == "api_error"]
    assert [(e["kind"], e["reason"]) for e in errors] == [("retryable", "timeout")] * 2


# ------------------------------------------------------------------ size cap


def test_huge_replies_are_capped_in_log_history_and_replay(server, tmp_path):
    played = play(chat_agent(server, model="fault-huge"), TASK, tmp_path, max_decisions=2)
    assert len(played.actions) == 2
    log_size = (tmp_path / "log.jsonl").stat().st_size
    assert log_size < 2 * 4 * MAX_REPLY_CHARS + 200_000  # not the 20 MB the server sent
    responses = [r for r in played.records if r["type"] == "response"]
    for r in responses:
        assert len(r["text"]) == MAX_REPLY_CHARS
        assert r["text_truncated_from"] > 5_000_000
        assert len(r["reasoning"]) <= MAX_REPLY_CHARS
        assert r["reasoning_truncated_from"] > 5_000_000
    # the capped text is what went back to the model, and what replay re-renders
    sent = bodies_for(server, "fault-huge")
    echoed = sent[1]["messages"][1]
    assert echoed["role"] == "assistant" and echoed["content"] == responses[0]["text"]
    assert replay_requests(tmp_path) == sent


# ------------------------------------------------------------------ preflight


def test_preflight_passes_with_any_reply_text_and_sends_no_image(server):
    for model in ("random", "fault-malformed", "fault-empty"):
        chat_agent(server, model=model).preflight()
    body = bodies_for(server, "fault-malformed")[-1]  # this test's preflight (the last)
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert all(p["type"] == "text" for p in body["messages"][0]["content"])


def test_preflight_keeps_the_output_limit(server):
    chat_agent(server, model="pf-limit", max_output_tokens=16).preflight()
    (body,) = bodies_for(server, "pf-limit")
    assert body["max_completion_tokens"] == 16


@pytest.mark.parametrize(
    "model, needles",
    [
        ("fault-401-echo", ["HTTP 401", "$OPENAI_API_KEY", "--api-key-env"]),
        ("fault-not-json", ["did not answer like an OpenAI chat completions server"]),
        ("fault-400", ["HTTP 400"]),
        ("fault-hang", ["no reply within 0.3 s", "--request-timeout"]),
    ],
)
def test_preflight_failures_are_one_line_naming_endpoint_model_and_fix(server, model, needles):
    agent = chat_agent(server, model=model, request_timeout=0.3)
    with pytest.raises(PreflightError) as e:
        agent.preflight()
    msg = str(e.value)
    assert "\n" not in msg
    assert server.openai_base_url in msg and repr(model) in msg
    for n in needles:
        assert n in msg, msg


def test_preflight_retries_once_and_then_gives_up(server):
    agent = chat_agent(server, model="fault-500-1")
    agent.preflight()  # the first attempt fails, the retry passes
    assert [r["status"] for r in server.requests if r.get("model") == "fault-500-1"] == [500, 200]
    with pytest.raises(PreflightError, match="HTTP 500"):
        chat_agent(server, model="fault-500-always").preflight()
    n = [r["status"] for r in server.requests if r.get("model") == "fault-500-always"]
    assert n[-2:] == [500, 500]


def test_preflight_names_a_dead_endpoint():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    agent = get_agent(
        "openai-chat",
        **{**CLI_KWARGS, "endpoint": f"http://127.0.0.1:{port}/v1", "model": "m"},
        retry_base_delay=0.001,
    )
    with pytest.raises(PreflightError, match=r"cannot connect.*is the server running"):
        agent.preflight()


def test_preflight_404_points_at_model_and_endpoint(server):
    agent = get_agent(
        "openai-chat",
        **{**CLI_KWARGS, "endpoint": server.url + "/nowhere", "model": "m"},
        retry_base_delay=0.001,
    )
    with pytest.raises(PreflightError, match=r"HTTP 404.*check --model and --endpoint"):
        agent.preflight()


def test_base_agent_preflight_is_a_no_op():
    from vical.agent.base import Agent

    random_agent = get_agent("random", seed=1)
    assert random_agent.preflight() is None
    assert Agent.preflight is type(random_agent).preflight


# ------------------------------------------------------------------ one message outside a game


def _conversation(server, model, **kw):
    """An agent started on a conversation of its own, as the audit starts its auditor."""
    from vical.agent.base import EpisodeContext

    agent = chat_agent(server, model=model, **kw)
    agent.start(EpisodeContext(task=TASK, run_index=0, seed=0, action_names=[], max_steps=0))
    return agent


def _text(text):
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_ask_sends_one_message_with_its_media_and_the_conversation_goes_on(server):
    with pytest.raises(RuntimeError, match=r"call start\(\) before ask\(\)"):
        chat_agent(server, model="ask-early").ask(_text("too early"))
    agent = _conversation(server, "ask-conversation")
    jpeg = encode_jpeg(make_env(TASK).reset())
    sha = hashlib.sha256(jpeg).hexdigest()
    first = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What does this picture show?"},
            {"type": "image", "sha256": sha, "mime": "image/jpeg"},
        ],
    }
    one = agent.ask(first, {sha: (jpeg, "image/jpeg")})
    assert one.failure is None and one.reply is not None and one.reply.text
    assert [r["type"] for r in one.records] == ["request", "response"]
    assert one.records[0]["append"] == [first] and one.records[0]["step"] == 0
    assert one.usage["input_tokens"] > 0 and one.usage == one.records[1]["usage"]
    second = _text("And what should happen next?")  # the picture stays in the history
    two = agent.ask(second)
    assert two.failure is None
    assistant = {"role": "assistant", "content": [{"type": "text", "text": one.reply.text}]}
    assert two.records[0]["append"] == [assistant, second]
    b1, b2 = (b["messages"] for b in bodies_for(server, "ask-conversation"))
    assert [m["role"] for m in b1] == ["user"]  # no system message, no task introduction
    (image,) = [p for p in b1[0]["content"] if p["type"] == "image_url"]
    assert data_url_bytes(image["image_url"]["url"]) == ("image/jpeg", jpeg)
    assert [m["role"] for m in b2] == ["user", "assistant", "user"]
    assert b2[0] == b1[0] and b2[1]["content"] == one.reply.text
    assert chat_user_texts(b2[2]) == ["And what should happen next?"]
    # a message that names media the agent was never given, or is not the user's, is refused
    with pytest.raises(ValueError, match=r"media deadbeef.*pass its \(bytes, MIME type\)"):
        agent.ask({"role": "user", "content": [{"type": "image", "sha256": "deadbeef"}]})
    with pytest.raises(ValueError, match="not a 'assistant' one"):
        agent.ask(assistant)
    assert len(bodies_for(server, "ask-conversation")) == 2


def test_ask_retries_like_a_turn_and_keeps_a_failed_message_out_of_the_history():
    with BaselineServer(record_bodies=True, retry_after=0) as s:
        # transport retries: two 500s absorbed, the same body resent
        agent = _conversation(s, "fault-500-2")
        ok = agent.ask(_text("first question"))
        assert ok.failure is None and ok.reply is not None
        assert [r["type"] for r in ok.records] == ["request", "api_error"] * 2 + [
            "request",
            "response",
        ]
        assert all(r["wait_s"] > 0 for r in ok.records if r["type"] == "api_error")
        sent = bodies_for(s, "fault-500-2")
        statuses = [r["status"] for r in s.requests if r.get("model") == "fault-500-2"]
        assert statuses == [500, 500, 200] and sent[0] == sent[2]
        # a failure after the retries: api_error, and the message is not kept
        agent = _conversation(s, "fault-500-1", transport_retries=0)
        failed = agent.ask(_text("lost question"))
        assert failed.reply is None and failed.failure == "api_error" and failed.usage == {}
        assert [r["type"] for r in failed.records] == ["request", "api_error"]
        again = agent.ask(_text("next question"))
        assert again.failure is None
        assert again.records[0]["append"] == [_text("next question")]
        last = bodies_for(s, "fault-500-1")[-1]["messages"]
        assert [chat_user_texts(m) for m in last] == [["next question"]]
        # a context-length error is token_overflow at once, without retries
        agent = _conversation(s, "fault-context-length")
        over = agent.ask(_text("a long question"))
        assert over.reply is None and over.failure == "token_overflow"
        assert [r["type"] for r in over.records] == ["request", "api_error"]


_JPEG_PROBE = """
import hashlib, random
from vical.agent.media import encode_jpeg
from vical.envs import make_env
from vical.spec import get_task
hs = []
for tid in ("highway/seed41-l4-d15", "pong/serve", "bigfish/seed45", "taxi/state1", "tetris/seed43"):
    t = get_task(tid)
    e = make_env(t)
    f = e.reset()
    r = random.Random(0)
    hs.append(hashlib.sha256(encode_jpeg(f)).hexdigest())
    for _ in range(3):
        if e.done:
            break
        hs.append(hashlib.sha256(encode_jpeg(e.step(r.choice(t.action_names)).frame)).hexdigest())
    e.close()
print(hashlib.sha256("".join(hs).encode()).hexdigest(), len(hs))
"""


def test_frame_jpegs_are_the_same_bytes_with_or_without_simd():
    """Verification compares the JPEG a request showed with the replayed frame's, so
    the encoder must give the same bytes on every CPU: libjpeg-turbo's SIMD paths
    (forced off, SSE2, AVX2) and the plain C path agree."""
    import os
    import subprocess
    import sys

    outs = set()
    for var in (None, "JSIMD_FORCENONE", "JSIMD_FORCESSE2", "JSIMD_FORCEAVX2"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("JSIMD_")}
        if var:
            env[var] = "1"
        r = subprocess.run(
            [sys.executable, "-c", _JPEG_PROBE], env=env, capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr[-1500:]
        outs.add(r.stdout.split()[0])
        assert int(r.stdout.split()[1]) >= 10
    assert len(outs) == 1
