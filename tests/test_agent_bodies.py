"""Request bodies prepared once per message are the bodies of the whole-payload path.

The protocol renders, serialises and hashes each message once per episode
(``vical.agent.bodies.ConversationCache``) and the OpenAI-family backends post
the serialised bytes through the SDK client instead of the SDK's ``create``.
These tests hold that to the old path: the same bytes and headers on the wire
as ``create`` sends for the same payload (captured at the baseline server), the
same ``request_sha256`` as hashing the whole payload, and the same payload as
the pure ``render_payload``. The gemini backend converts each message to the
body's form once per episode and hands the SDK the converted list through
``extra_body``; its requests are held to those of ``generate_content`` given
the conversation itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from typing import Any

import pytest
from agent_support import CLI_KWARGS, demo_clips, play

from vical.agent import get_agent
from vical.agent.backends.gemini import GeminiAgent, wire_content
from vical.agent.backends.openai_chat import OpenAIChatAgent
from vical.agent.backends.openai_responses import OpenAIResponsesAgent
from vical.agent.backends.openrouter import OpenRouterAgent
from vical.agent.bodies import ConversationCache, compact_json, payload_sha256
from vical.agent.credentials import resolve_api_key
from vical.agent.failures import ApiFailure
from vical.agent.media import MediaStore, data_url, media_data_url
from vical.agent.replay import iter_requests
from vical.serve import BaselineServer
from vical.spec import get_task

TASK = get_task("taxi/state1")
OPENAI_FAMILY = ["openai-chat", "openai-responses", "openrouter"]
CLASSES = {
    "openai-chat": OpenAIChatAgent,
    "openai-responses": OpenAIResponsesAgent,
    "openrouter": OpenRouterAgent,
    "gemini": GeminiAgent,
}
# headers that differ between two clients or two servers, not between two paths
VOLATILE = {"host", "x-stainless-read-timeout"}


@pytest.fixture(scope="module")
def demos():
    return demo_clips(TASK, [["Up", "Right", "Down"], ["Left", "Left"]])


class Capturing(BaselineServer):
    """The baseline server, also keeping each request's path, raw body and headers."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.raw: list[tuple[str, bytes, dict[str, str]]] = []
        base = self._httpd.RequestHandlerClass
        raw = self.raw

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                raw.append((self.path, body, headers))
                wire, self.rfile = self.rfile, io.BytesIO(body)
                try:
                    super().do_POST()
                finally:
                    self.rfile = wire

        self._httpd.RequestHandlerClass = Handler


def sdk_create(client: Any, backend: str, payload: dict[str, Any]) -> None:
    """The pre-serialised path's reference: the payload sent through the SDK's own
    ``create`` (conversation and model as arguments, every other field in
    ``extra_body``), as the backends sent it before."""
    field = "input" if backend == "openai-responses" else "messages"
    create = (
        client.responses.with_raw_response.create
        if backend == "openai-responses"
        else client.chat.completions.with_raw_response.create
    )
    import openai

    extra = {k: v for k, v in payload.items() if k not in ("model", field)}
    # an injected fault comes back as an error status: the request was captured all the same
    with contextlib.suppress(openai.APIStatusError):
        create(model=payload["model"], **{field: payload[field]}, extra_body=extra or None)


def agent_for(backend: str, server: BaselineServer, model: str, **kw: Any) -> Any:
    endpoint = server.url if backend == "gemini" else server.openai_base_url
    args = {**CLI_KWARGS, "endpoint": endpoint, "model": model, "retry_base_delay": 0.001}
    return get_agent(backend, **{**args, **kw})


OPTIONS = [
    ("random", {}),
    (
        "fault-malformed-once",  # a format retry: the history holds a retry message
        {
            "temperature": 0.5,
            "max_output_tokens": 300,
            "reasoning_effort": "low",
            "extra_body": '{"seed": 3, "top_p": 0.9, "metadata": {"ünïcode": "✓"}}',
        },
    ),
    ("fault-500-once", {}),  # a transport retry: the same bytes sent twice
]


@pytest.mark.parametrize("model, options", OPTIONS, ids=[m for m, _ in OPTIONS])
@pytest.mark.parametrize("backend", OPENAI_FAMILY)
def test_wire_bytes_and_headers_equal_the_sdk_create_path(backend, model, options, demos, tmp_path):
    with Capturing(retry_after=0) as fast:
        agent = agent_for(backend, fast, model, **options)
        played = play(agent, TASK, tmp_path, max_decisions=5, demos=demos)
        agent.close()
    assert len(played.actions) == 5
    logged = [r["request_sha256"] for r in played.records if r["type"] == "request"]
    assert len(fast.raw) == len(logged) == (5 if model == "random" else 6)
    # the conversation of every request, re-rendered from the log by the pure renderer
    # (digests checked against the log), in a payload built from the agent's own
    # settings (the log keeps extra_body's keys sorted), through the SDK's create
    cls, settings = CLASSES[backend], agent.settings()
    payloads = [
        cls.assemble(r.payload[cls.conversation_field], settings) for r in iter_requests(tmp_path)
    ]
    assert [payload_sha256(p) for p in payloads] == logged
    with Capturing(retry_after=0) as reference:
        ref_agent = agent_for(backend, reference, "random", **options)
        for payload in payloads:
            sdk_create(ref_agent._client, backend, payload)
        ref_agent.close()
    assert_same_requests(fast, reference)
    # a transport retry resends the very bytes of its first attempt
    if model == "fault-500-once":
        assert fast.raw[0][1] == fast.raw[1][1]


@pytest.mark.parametrize("backend", OPENAI_FAMILY)
def test_the_fast_path_never_walks_the_conversation_in_the_sdk(
    backend, demos, tmp_path, monkeypatch
):
    import openai._utils._transform as transform

    walked: list[Any] = []
    original = transform._transform_recursive

    def spy(data: Any, **kw: Any) -> Any:
        walked.append(data)
        return original(data, **kw)

    monkeypatch.setattr(transform, "_transform_recursive", spy)
    with BaselineServer() as server:
        agent = agent_for(backend, server, "random")
        played = play(agent, TASK, tmp_path, max_decisions=3, demos=demos)
        agent.close()
    assert len(played.actions) == 3
    assert walked == []


# ------------------------------------------------------------------ gemini


def gemini_reference(server: BaselineServer) -> Any:
    """A ``google-genai`` client set up as the gemini backend's (key, endpoint,
    retries off, its default timeout), with no conversation in its options."""
    from google import genai
    from google.genai import types

    key = resolve_api_key("gemini", None, GeminiAgent.default_key_env, server.url)
    http = types.HttpOptions(
        base_url=server.url, retry_options=types.HttpRetryOptions(attempts=1), timeout=120_000
    )
    return genai.Client(api_key=key, http_options=http)


def sdk_generate(client: Any, payload: dict[str, Any]) -> None:
    """The reference: the payload sent as the gemini backend sent it before, with
    the conversation as ``generate_content``'s ``contents``."""
    from google.genai import errors, types

    config = dict(payload.get("config") or {})
    if payload.get("extra_body"):
        config["http_options"] = types.HttpOptions(extra_body=payload["extra_body"])
    # an injected fault or a refused body: the request was captured all the same
    with contextlib.suppress(errors.APIError, ValueError):
        client.models.generate_content(
            model=payload["model"],
            contents=payload["contents"],
            config=types.GenerateContentConfig(**config) if config else None,
        )


def assert_same_requests(fast: Capturing, reference: Capturing) -> None:
    assert len(reference.raw) == len(fast.raw)
    for (path, body, headers), (ref_path, ref_body, ref_headers) in zip(
        fast.raw, reference.raw, strict=True
    ):
        assert path == ref_path
        assert hashlib.sha256(body).hexdigest() == hashlib.sha256(ref_body).hexdigest()
        strip = {k: v for k, v in headers.items() if k not in VOLATILE}
        assert strip == {k: v for k, v in ref_headers.items() if k not in VOLATILE}


@pytest.mark.parametrize("model, options", OPTIONS, ids=[m for m, _ in OPTIONS])
def test_gemini_wire_bytes_equal_the_sdk_path_over_two_episodes(model, options, demos, tmp_path):
    with Capturing(retry_after=0) as fast:
        agent = agent_for("gemini", fast, model, **options)
        # two episodes of one agent: nothing of the first may reach the second's bodies
        first = play(agent, TASK, tmp_path / "a", max_decisions=4, demos=demos)
        second = play(agent, TASK, tmp_path / "b", max_decisions=3, demos=demos[:1], seed=8)
        agent.close()
    assert (len(first.actions), len(second.actions)) == (4, 3)
    settings = agent.settings()
    payloads, logged = [], []
    for played in (first, second):
        logged += [r["request_sha256"] for r in played.records if r["type"] == "request"]
        payloads += [
            GeminiAgent.assemble(r.payload["contents"], settings)
            for r in iter_requests(played.episode_dir)
        ]
    assert [payload_sha256(p) for p in payloads] == logged
    assert len(fast.raw) == len(logged) >= 7
    with Capturing(retry_after=0) as reference:
        client = gemini_reference(reference)
        for payload in payloads:
            sdk_generate(client, payload)
        client.close()
    assert_same_requests(fast, reference)
    if model == "fault-500-once":  # a transport retry resends the very bytes
        assert fast.raw[0][1] == fast.raw[1][1]


def _edge_messages(media: dict[str, tuple[bytes, str]]) -> list[dict[str, Any]]:
    """Messages with the edge cases of the body's conversion: empty and unusual
    text, empty media, bytes whose base64 differs between the URL-safe and the
    standard alphabet, a turn of media only, a model turn."""
    blobs = [(b"", "image/jpeg"), (bytes(range(256)) * 3, "image/jpeg"), (b"\xfb\xff", "video/mp4")]
    shas = []
    for data, mime in blobs:
        sha = hashlib.sha256(data + mime.encode()).hexdigest()
        media[sha] = (data, mime)
        shas.append(sha)
    image = [{"type": "image", "sha256": s, "mime": media[s][1]} for s in shas]
    return [
        {"role": "user", "content": [{"type": "text", "text": ""}, *image]},
        {"role": "assistant", "content": [{"type": "text", "text": ""}]},
        {"role": "user", "content": [{"type": "text", "text": 'ünï ✓ 🎲 \x00\t\n"\\ </b>'}]},
        {"role": "assistant", "content": [{"type": "text", "text": "[Action:Up]"}]},
        {"role": "user", "content": image[1:2]},
    ]


EDGE_OPTIONS = [
    {},
    {"temperature": 0.0, "max_output_tokens": 5, "reasoning_effort": "512"},
    {"extra_body": '{"generationConfig": {"topK": 3}, "contents_": null}'},
    {"extra_body": '{"Contents": [{"role": "user", "parts": [{"text": "theirs"}]}]}'},
]


@pytest.mark.parametrize("options", EDGE_OPTIONS, ids=range(len(EDGE_OPTIONS)))
def test_gemini_send_gives_the_sdk_body_for_edge_cases(options):
    media: dict[str, tuple[bytes, str]] = {}
    messages = _edge_messages(media)
    with Capturing(retry_after=0) as fast:
        agent = agent_for("gemini", fast, "random", **options)
        payload = GeminiAgent.render_payload(messages, media, agent.settings())
        with contextlib.suppress(ApiFailure):  # a body the server refuses is captured too
            agent.send(payload)
        agent.close()
    with Capturing(retry_after=0) as reference:
        client = gemini_reference(reference)
        sdk_generate(client, payload)
        client.close()
    assert_same_requests(fast, reference)


def test_gemini_never_walks_the_conversation_in_the_sdk(demos, tmp_path, monkeypatch):
    import google.genai.models as models

    walked: list[Any] = []
    original = models._Part_to_mldev

    def spy(part: Any, *args: Any, **kw: Any) -> Any:
        walked.append(part)
        return original(part, *args, **kw)

    monkeypatch.setattr(models, "_Part_to_mldev", spy)
    with BaselineServer() as server:
        agent = agent_for("gemini", server, "random", temperature=0.3, extra_body='{"seed": 1}')
        played = play(agent, TASK, tmp_path, max_decisions=3, demos=demos)
        # the list the client's options hold is emptied after every call
        assert agent._contents == []
        agent.close()
    assert len(played.actions) == 3
    assert walked == []


def test_gemini_wire_content_names_a_part_it_cannot_send():
    with pytest.raises(ValueError, match=r"\['file_data'\]"):
        wire_content({"role": "user", "parts": [{"file_data": {"file_uri": "gs://x"}}]})


# ------------------------------------------------------------------ the cache itself


def _conversation(media: MediaStore, n_turns: int) -> list[dict[str, Any]]:
    """A conversation of ``n_turns`` user/assistant pairs with images in every user turn."""
    messages: list[dict[str, Any]] = []
    for i in range(n_turns):
        parts: list[dict[str, Any]] = [{"type": "text", "text": f'turn {i} — ünïcode "q"\n'}]
        for j in range(1 + (i == 0) * 3):
            data = f"image {i}.{j}".encode() * 20
            sha = hashlib.sha256(data).hexdigest()
            media.setdefault(sha, (data, "image/jpeg"))
            parts.append({"type": "image", "sha256": sha, "mime": "image/jpeg"})
        messages.append({"role": "user", "content": parts})
        messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": f"[Action:{i}]"}]}
        )
    return messages


SETTINGS = [
    {"model": "m"},
    {"model": "m", "temperature": 0.2, "max_output_tokens": 10, "reasoning_effort": "high"},
    {"model": "m", "extra_body": {"a": 1, "zz": [1, 2], "model": "other"}},
    {"model": "m", "extra_body": {"messages": "replaced", "input": [], "contents": None}},
]


@pytest.mark.parametrize("backend", sorted(CLASSES))
def test_cache_gives_the_whole_payload_its_digest_and_bytes(backend):
    cls = CLASSES[backend]
    media = MediaStore()
    history = _conversation(media, 6)
    for settings in SETTINGS:
        cache = ConversationCache(
            lambda m, cls=cls: cls.render_message(m, media), cls.assemble, cls.conversation_field
        )
        for n in range(0, len(history) + 1):
            messages = history[:n]
            whole = cls.render_payload(messages, dict(media), settings)
            got = cache.prepare(messages, settings, body=cls.sends_body)
            assert got.payload == whole
            assert got.sha256 == payload_sha256(whole)
            assert got.body == (compact_json(whole) if cls.sends_body else None)


def test_cache_redoes_a_conversation_that_changed_and_options_that_changed():
    cls = OpenAIChatAgent
    media = MediaStore()
    history = _conversation(media, 4)
    cache = ConversationCache(
        lambda m: cls.render_message(m, media), cls.assemble, cls.conversation_field
    )
    settings = SETTINGS[1]
    cache.prepare(history, settings, body=True)
    # a message replaced in the middle, by an equal-looking but different one
    changed = [*history[:3], {"role": "user", "content": [{"type": "text", "text": "new"}]}]
    changed += history[4:]
    for messages, opts in [(changed, settings), (changed, SETTINGS[0]), (history, SETTINGS[2])]:
        got = cache.prepare(messages, opts, body=True)
        whole = cls.render_payload(messages, media, opts)
        assert got.sha256 == payload_sha256(whole)
        assert got.body == compact_json(whole)
    # without body=True no bytes are made
    assert cache.prepare(history, settings, body=False).body is None


def test_media_store_makes_each_data_url_once():
    media = MediaStore()
    media["a"] = (b"\x00\x01jpeg", "image/jpeg")
    first = media_data_url(media, "a")
    assert first == data_url(b"\x00\x01jpeg", "image/jpeg")
    assert media_data_url(media, "a") is first
    assert media_data_url({"a": (b"\x00\x01jpeg", "image/jpeg")}, "a") == first


def test_a_repeated_frame_is_encoded_once_and_logged_as_before(demos, tmp_path, monkeypatch):
    import vical.agent.messages as messages

    encoded: list[int] = []
    original = messages.encode_jpeg

    def counting(frame: Any) -> bytes:
        encoded.append(1)
        return original(frame)

    monkeypatch.setattr(messages, "encode_jpeg", counting)
    with BaselineServer() as server:
        agent = agent_for("openai-chat", server, "random")
        # the same frame at every turn, as when an action changes nothing on screen
        from vical.agent import EpisodeContext, Observation
        from vical.envs import frame_sha256, make_env

        env = make_env(TASK)
        frame = env.reset()
        env.close()
        agent.start(EpisodeContext(TASK, 0, 7, TASK.action_names, TASK.max_steps, demos))
        previous = None
        parts = []
        for step in range(3):
            d = agent.act(Observation(step, frame, frame_sha256(frame), previous))
            assert d.action is not None
            previous = d.action
            request = next(r for r in d.records if r["type"] == "request")
            parts.append([p for m in request["append"] for p in m["content"] if "sha256" in p])
        agent.close()
    assert len(encoded) == 1
    frame_parts = [p[-1] for p in parts]
    assert frame_parts[0] == frame_parts[1] == frame_parts[2]
    assert frame_parts[1] is not frame_parts[2]  # each message holds its own part
