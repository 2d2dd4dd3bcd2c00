"""A local model server speaking three provider APIs, answering with a baseline policy.

Endpoints (JSON over HTTP, standard library only):

* ``POST /v1/chat/completions`` — OpenAI-compatible chat completions
  (``image_url`` and OpenRouter's ``video_url`` parts);
* ``POST /v1/responses`` — the OpenAI Responses API (``input_image``);
* ``POST /v1beta/models/{model}:generateContent`` — Gemini's native REST
  call (``inlineData`` images and MP4 video), so ``google-genai`` can be
  pointed at it with ``http_options.base_url``;
* ``GET /v1/models`` — the built-in policy names;
* ``GET /stats`` — request counters as JSON.

Like a real model it reads the request: it decodes every image (a payload
that is not a valid image is rejected with HTTP 400), checks every video is
an MP4, finds the legal actions on the prompt's ``Legal actions:`` line and
answers ``[Action:<name>]`` followed by one line of explanation. The
*model* name picks the policy:

``random``
    a legal action drawn from a generator seeded by the server seed and the
    request body, so the same request always gets the same answer (a
    :class:`BaselineServer` made in Python answers any other name this way
    too, so tests can tell their requests apart by name; the command line
    answers another name with the provider's 404, model not found, unless
    ``--any-model``);
``first``
    always the first legal action;
``expert``
    a scripted expert where one exists (classic-control controllers, a
    breadth-first plan for Toy Text and MiniGrid; see :class:`ExpertPolicy`),
    otherwise the random policy;
``fault-<kind>[-<when>]``
    misbehave, for tests and smoke tests. Kinds:

    * the model's fault, in a well-formed reply: ``malformed`` (no marker),
      ``illegal`` (a name outside the list), ``conflict`` (two different
      markers), ``empty`` (empty text), ``huge`` (a legal marker line followed
      by about 5 MB of text, and as much visible reasoning);
    * HTTP errors: ``400``, ``429`` and ``500`` (429 carries ``Retry-After``),
      ``context-length`` (the provider's context-length error), ``401-echo``
      (401 whose message repeats the credential the request carried: the
      bearer token, ``x-goog-api-key`` or ``key=``, as careless proxies do);
    * broken infrastructure, all with status 200: ``not-json`` (``text/plain``
      body ``OK``), ``html`` (a ``text/html`` page), ``binary`` (JSON content
      type, bytes that are not UTF-8), ``null`` (the JSON ``null``),
      ``schemaless`` (the JSON object ``{}``), ``empty-body`` (no body at all);
    * time: ``slow-<ms>`` (answer normally after a delay), ``hang`` (accept the
      request and never answer; the connection is dropped when the server
      stops, or after an hour).

    ``<when>``: ``once`` (first request under this model name), ``<n>``
    (first n requests), ``always`` (the default) or, for ``context-length``,
    ``after-<n>`` (once the conversation holds n earlier replies). Counts are
    per model name over the server's life. Model-name faults apply to every
    request, text-only ones included.

A request from ``vical audit`` (one of its text parts is the JSON object
``{"audit_context": …}``) gets a verdict instead of a move: ``valid``,
``malformed``, ``contradictory`` or ``mixed``, by the server's ``auditor``
setting (``--auditor``) or the model name ``auditor-<mode>``; see
:mod:`~vical.serve.auditor`.

Server-wide options make any model misbehave at a given rate
(``fault_rate``, drawing a kind from ``fault_kinds``) and answer after a fixed
``delay``. The rate applies only to requests that carry at least one image,
that is to the turns of an episode: a text-only request, such as the
preflight check an evaluation sends before its first episode, is always
answered normally, so injected faults land in the middle of a run.
``retry_after`` sets the ``Retry-After`` seconds of a 429.
Run it with ``python -m vical.serve --port 8000`` or ``vical serve-baseline``.

The package, one module a concern: :mod:`~vical.serve.conversation` (what a
request says, whatever the API), :mod:`~vical.serve.wire` (the three request
formats read into a conversation, and the replies and errors written back),
:mod:`~vical.serve.faults` (the fault kinds and what each does to a reply),
:mod:`~vical.serve.policy` (the random, first and expert policies),
:mod:`~vical.serve.auditor` (verdicts for audit requests),
:mod:`~vical.serve.server` (:class:`BaselineServer` and its HTTP handler) and
:mod:`~vical.serve.command` (the command line).
"""

from __future__ import annotations

from vical.serve.command import build_parser, main
from vical.serve.conversation import BadRequest, Conversation
from vical.serve.faults import (
    FAULT_KINDS,
    HANG_LIMIT,
    HUGE_CHARS,
    Fault,
    check_fault_kinds,
    parse_fault_kinds,
)
from vical.serve.policy import POLICIES, ExpertPolicy
from vical.serve.server import BaselineServer
from vical.serve.wire import CONTEXT_LIMIT

__all__ = [
    "CONTEXT_LIMIT",
    "FAULT_KINDS",
    "HANG_LIMIT",
    "HUGE_CHARS",
    "POLICIES",
    "BadRequest",
    "BaselineServer",
    "Conversation",
    "ExpertPolicy",
    "Fault",
    "build_parser",
    "check_fault_kinds",
    "main",
    "parse_fault_kinds",
]
