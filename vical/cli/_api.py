"""The options of every command that talks to a model (``eval``, ``audit``, ``wm couple``).

:class:`ApiOptions` holds them; :func:`api_options` declares the model's block of
them (``--endpoint`` to ``--extra-body``) once and puts it in a command's
signature, so the flags and their help read the same in every command and each
command gets one :class:`ApiOptions` instead of rebuilding it from its own
parameters.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import typer

from vical.cli._common import OptionError, endpoint_option, model_option

F = TypeVar("F", bound=Callable[..., Any])

# The default of a command's ``api`` parameter: where :func:`api_options` puts its block.
API_OPTIONS: Any = object()


@dataclass(frozen=True)
class ApiOptions:
    """How an API backend reaches its model (the ``vical eval`` options the reference
    agents, random and plan, ignore)."""

    endpoint: str | None
    model: str | None
    api_key_env: str | None
    temperature: float | None
    max_output_tokens: int | None
    reasoning_effort: str | None
    extra_body: str | None  # a JSON object, as typed
    rate_limit: float | None = None
    request_timeout: float = 120.0
    max_retry_after: float = 120.0
    transport_retries: int = 3

    def agent_kwargs(self, agent: str) -> dict[str, Any]:
        """The backend's keyword arguments (OptionError: --extra-body is not JSON, no --model)."""
        try:
            body = json.loads(self.extra_body) if self.extra_body else None
        except json.JSONDecodeError as e:
            raise OptionError(
                f"--extra-body is not valid JSON ({e}); example: '{{\"top_p\": 0.9}}'"
            ) from e
        if self.model is None:
            raise OptionError(f"--model is required for the {agent} backend")
        return {
            "endpoint": self.endpoint,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "temperature": self.temperature,
            "max_output_tokens": self.max_output_tokens,
            "reasoning_effort": self.reasoning_effort,
            "extra_body": body,
            "rate_limit": self.rate_limit,
            "request_timeout": self.request_timeout,
            "max_retry_after": self.max_retry_after,
            "transport_retries": self.transport_retries,
        }


def _model_block(endpoint_help: str, model_help: str, reasoning_effort: bool) -> list[Any]:
    """The model's options, in the order ``--help`` lists them: (name, type, option)."""
    block = [
        ("endpoint", str, endpoint_option(endpoint_help)),
        ("model", str, model_option(model_help)),
        (
            "api_key_env",
            str,
            typer.Option(None, "--api-key-env", help="Environment variable holding the API key."),
        ),
        ("temperature", float, typer.Option(None, "--temperature", help="Sampling temperature.")),
        (
            "max_output_tokens",
            int,
            typer.Option(None, "--max-output-tokens", help="Cap on tokens per reply."),
        ),
        (
            "reasoning_effort",
            str,
            typer.Option(
                None, "--reasoning-effort", help="Reasoning effort where the provider has it."
            ),
        ),
        (
            "extra_body",
            str,
            typer.Option(None, "--extra-body", help="JSON object merged into each request body."),
        ),
    ]
    return [b for b in block if reasoning_effort or b[0] != "reasoning_effort"]


def api_options(
    endpoint_help: str = "API base URL of the model server.",
    model_help: str = "Model name at the endpoint.",
    reasoning_effort: bool = True,
) -> Callable[[F], F]:
    """Give a typer command the model's options and them as one :class:`ApiOptions`.

    The command declares a parameter ``api: ApiOptions = API_OPTIONS``; in its signature (the one
    typer reads) that parameter becomes ``--endpoint``, ``--model``,
    ``--api-key-env``, ``--temperature``, ``--max-output-tokens``,
    ``--reasoning-effort`` (unless ``reasoning_effort`` is False: then None) and
    ``--extra-body``, in that place. The command is then called with ``api`` built
    from them and from its own parameters named like the other fields
    (``rate_limit``, ``request_timeout``, ``max_retry_after``,
    ``transport_retries``: a command declares those itself, with the help and limits
    that fit it); a field it does not offer takes its default.
    """
    block = _model_block(endpoint_help, model_help, reasoning_effort)
    names = [name for name, _, _ in block]
    api_fields = {f.name for f in fields(ApiOptions)}

    def decorate(func: F) -> F:
        own = list(inspect.signature(func, eval_str=True).parameters.values())
        at = next(i for i, p in enumerate(own) if p.default is API_OPTIONS)
        added = [
            inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=o, annotation=t)
            for n, t, o in block
        ]
        params = [*own[:at], *added, *own[at + 1 :]]

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            values = {n: kwargs.pop(n) for n in names}
            values.update((k, v) for k, v in kwargs.items() if k in api_fields)
            values.setdefault("reasoning_effort", None)
            return func(api=ApiOptions(**values), **kwargs)

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return decorate
