"""Keeping credentials out of logs, records and manifests.

A run records what it talked to and what came back. Three things can carry a
secret into those records: the endpoint URL (``https://user:pass@host/v1``,
``...?key=...``), text that a server sends back (an error message that
repeats the key it was given, a proxy page that echoes the request headers)
and the command line a run was started with. Each has a function here:

:func:`redact_url`
    the URL with its userinfo dropped and the values of credential query
    parameters (``key``, ``api_key``, ``token``, ``sig``, ...) replaced by
    ``***``; everything else is kept as written.
:func:`redact_text`
    free text with every given secret string, every ``Bearer``/``Basic``
    credential, the values of ``Authorization``, ``x-goog-api-key``,
    ``api-key`` and similar headers, credential query values and URL
    userinfo replaced by ``***``.
:func:`redact_argv`
    a recorded command line with ``--endpoint`` values passed through
    :func:`redact_url` and the value of any option or argument that looks
    like it carries a credential replaced by ``***``.

All three are pure, linear in the length of their input and never raise on
odd input. Secret strings shorter than :data:`MIN_SECRET_LEN` characters are
not searched for in free text (a one-letter "key" used against a local test
server would otherwise blank out every occurrence of that letter); the
patterns still catch them where they appear in a recognisable position.

A given secret is found in the forms it travels in, not only as typed: in any
letter case (a proxy that upper-cases headers), without the prefix that names
its kind (``sk-``, ``sk-proj-``, ``AIza``, ``hf_``, ...; a server may quote only
the key's body) and base64-encoded, standard or URL-safe alphabet, alone or
inside a longer encoded blob (a Basic header, an encoded JSON body): the part of
the encoding that depends on the secret alone is masked, whatever bytes precede
it.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from typing import overload
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
MIN_SECRET_LEN = 6

# query parameters whose values are credentials (compared in lower case)
SECRET_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "api-key",
        "apikey",
        "x-goog-api-key",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "auth",
        "auth_token",
        "sig",
        "signature",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
    }
)

_PARAM_ALT = "|".join(re.escape(p) for p in sorted(SECRET_PARAMS, key=len, reverse=True))
# "Bearer <token>" / "Basic <token>" anywhere
_SCHEME_RE = re.compile(r"\b(Bearer|Basic|Token)([ \t]{1,16})[A-Za-z0-9._~+/=:-]{4,}", re.I)
# header-like "name: value" or "name=value" (JSON and Python reprs included)
_HEADER_RE = re.compile(
    r"""(\b(?:proxy-)?authorization|\bx-goog-api-key|\bx-api-key|\bapi-key|\bapi_key"""
    r"""|\bopenai-api-key)(["']?[ \t]{0,8}[:=][ \t]{0,8}["']?)"""
    r"""((?:(?:Bearer|Basic|Token)[ \t]{1,16})?)([^\s"',;}&]+)""",
    re.I,
)
# "?key=..." / "&token=..." in free text
_QUERY_RE = re.compile(r"([?&;](?:" + _PARAM_ALT + r")=)([^&\s\"'#<>]+)", re.I)
# scheme://userinfo@
_USERINFO_RE = re.compile(r"://([^/\s@\"'<>]{1,256})@")
# words of an option name that make its value a credential ("--api-key", "--hf-token"),
# unless the last word says the value only names where the secret lives ("--api-key-env")
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials", "auth"}
)
_NAME_ONLY_WORDS = frozenset({"env", "file", "path", "var", "name", "dir"})
# NAME=VALUE where NAME names a credential (an environment assignment)
_SECRET_ASSIGN_RE = re.compile(
    r"^([A-Za-z_][A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?))=(.+)$", re.I
)
# bare values that are credentials by their shape
_CREDENTIAL_SHAPE_RE = re.compile(
    r"^(?:sk-[A-Za-z0-9_-]{8,}|sk_[A-Za-z0-9_]{8,}|AIza[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|hf_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|(?:Bearer|Basic)\s+\S+)$"
)
# the same shapes in another letter case (SK-..., HF_...), where no capital is wrong
_CREDENTIAL_SHAPE_ANY_CASE_RE = re.compile(
    r"^(?:sk[-_][A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{20,}|hf_[A-Za-z0-9]{20,})$", re.I
)


# the prefixes that name a key's kind (OpenAI, Anthropic, OpenRouter, Stripe-style,
# Google, GitHub, Hugging Face, Slack): what follows is secret on its own
_KEY_PREFIX_RE = re.compile(
    r"^(?:(?:sk|rk|pk)[-_](?:(?:proj|ant|or|live|test|svcacct|admin|api)[-_](?:v\d+[-_])?)?"
    r"|AIza|gh[pousr]_|hf_|xox[abprs]-)",
    re.I,
)


def _b64_cores(secret: str) -> list[str]:
    """The parts of a base64 encoding that depend on ``secret`` alone, for each of the
    three byte offsets it can start at inside a longer encoded text, in the standard
    and the URL-safe alphabet (character ``i`` of an encoding carries bits
    ``6i..6i+5``; those inside the secret's bits are the same whatever surrounds it)."""
    raw = secret.encode()
    cores: list[str] = []
    for offset in range(3):
        enc = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        start = -(-8 * offset // 6)
        end = 8 * (offset + len(raw)) // 6
        core = enc[start:end]
        if len(core) >= MIN_SECRET_LEN:
            cores += [core, core.replace("+", "-").replace("/", "_")]
    return cores


def _secret_patterns(secrets: Iterable[str | None]) -> tuple[re.Pattern[str] | None, list[str]]:
    """(one case-insensitive pattern for the secrets and their bodies without a kind
    prefix, longest first; their base64 cores, longest first)."""
    plain: set[str] = set()
    for s in secrets:
        if not s or len(s) < MIN_SECRET_LEN:
            continue
        plain.add(s)
        body = _KEY_PREFIX_RE.sub("", s, count=1)
        if body != s and len(body) >= MIN_SECRET_LEN:
            plain.add(body)
    if not plain:
        return None, []
    ordered = sorted(plain, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(s) for s in ordered), re.I)
    cores = {c for s in ordered for c in _b64_cores(s)} - plain
    return pattern, sorted(cores, key=len, reverse=True)


def _redact_query(query: str) -> str:
    if not query:
        return query
    out = []
    for piece in query.split("&"):
        name, eq, _ = piece.partition("=")
        out.append(f"{name}={MASK}" if eq and name.lower() in SECRET_PARAMS else piece)
    return "&".join(out)


def redact_url(url: str | None) -> str | None:
    """``url`` without userinfo and with credential query values masked.

    ``http://user:pw@host:8000/v1?key=abc&x=1`` becomes
    ``http://host:8000/v1?key=***&x=1``. None and text that is not a URL come
    back unchanged (text is still searched for userinfo and credential
    query values).
    """
    if url is None:
        return None
    text = str(url)
    try:
        parts = urlsplit(text)
    except ValueError:
        return redact_text(text)
    if not parts.scheme or not parts.netloc:
        return redact_text(text)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit(
        (parts.scheme, netloc, parts.path, _redact_query(parts.query), parts.fragment)
    )


def url_secrets(url: str | None) -> list[str]:
    """The credential pieces of a URL (password, username, secret query values),
    as strings to pass to :func:`redact_text`."""
    if not url:
        return []
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return []
    found: list[str] = []
    if parts.password:
        found.append(parts.password)
    if parts.username:
        found.append(parts.username)
    for piece in parts.query.split("&"):
        name, eq, value = piece.partition("=")
        if eq and value and name.lower() in SECRET_PARAMS:
            found.append(value)
    return found


@overload
def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str: ...
@overload
def redact_text(text: None, secrets: Iterable[str | None] = ()) -> None: ...
@overload
def redact_text(text: str | None, secrets: Iterable[str | None] = ()) -> str | None: ...
def redact_text(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """``text`` with credentials replaced by ``***``.

    Every string of ``secrets`` at least :data:`MIN_SECRET_LEN` long is
    replaced wherever it occurs (longest first), in any letter case, without its
    kind prefix and base64-encoded (see the module docstring), then credentials recognised
    by position: ``Bearer``/``Basic`` tokens, the values of
    ``Authorization``/``x-goog-api-key``/``api-key``-style headers,
    ``key=``/``token=``-style query values and URL userinfo.
    """
    if not text:
        return text
    out = str(text)
    pattern, cores = _secret_patterns(secrets)
    if pattern is not None:
        out = pattern.sub(MASK, out)
    for core in cores:
        out = out.replace(core, MASK)
    out = _SCHEME_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", out)
    out = _HEADER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{MASK}", out)
    out = _QUERY_RE.sub(lambda m: f"{m.group(1)}{MASK}", out)
    out = _USERINFO_RE.sub("://", out)
    return out


def _redact_value(value: str) -> str:
    bare = value.strip()
    if _CREDENTIAL_SHAPE_RE.match(bare) or _CREDENTIAL_SHAPE_ANY_CASE_RE.match(bare):
        return MASK
    m = _SECRET_ASSIGN_RE.match(value)
    if m:
        return f"{m.group(1)}={MASK}"
    if "://" in value:
        return redact_url(value) or value
    return redact_text(value) or value


def _secret_option(name: str) -> bool:
    words = [w for w in re.split(r"[-_]+", name.lower()) if w]
    return (
        bool(words) and words[-1] not in _NAME_ONLY_WORDS and any(w in _SECRET_WORDS for w in words)
    )


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A copy of a command line that is safe to record.

    ``--endpoint URL`` / ``--endpoint=URL`` go through :func:`redact_url`;
    the value of an option whose name mentions a key, token, secret,
    password or credential (``--api-key sk-...``, ``--token=...``) becomes
    ``***``, except options that only name where a secret lives
    (``--api-key-env OPENAI_API_KEY``, ``--key-file PATH``); any other
    argument shaped like a credential (``sk-...``, ``AIza...``, ``Bearer ...``,
    ``OPENAI_API_KEY=...``) or holding a URL with credentials is redacted too.
    """
    out: list[str] = []
    pending: str | None = None  # what to do with the next argument: "url" or "secret"
    for raw in argv:
        arg = str(raw)
        if pending == "url":
            out.append(redact_url(arg) or arg)
            pending = None
            continue
        if pending == "secret":
            out.append(MASK)
            pending = None
            continue
        if arg.startswith("-") and not arg.startswith("---"):
            name, eq, value = arg.partition("=")
            if name == "--endpoint":
                if eq:
                    out.append(f"{name}={redact_url(value)}")
                else:
                    out.append(arg)
                    pending = "url"
                continue
            if _secret_option(name):
                if eq:
                    out.append(f"{name}={MASK}")
                else:
                    out.append(arg)
                    pending = "secret"
                continue
            out.append(f"{name}={_redact_value(value)}" if eq else arg)
            continue
        out.append(_redact_value(arg))
    return out
