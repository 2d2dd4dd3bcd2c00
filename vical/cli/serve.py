"""``vical serve-baseline``: the baseline model server, for trying vical without a model."""

from __future__ import annotations

from dataclasses import dataclass

import typer

from vical.cli._common import OptionError


@dataclass(frozen=True)
class ServeOptions:
    """The server's settings, as ``vical.serve.main`` takes them on its command line."""

    host: str
    port: int
    seed: int
    delay: float
    fault_rate: float
    fault_kinds: tuple[str, ...]  # checked names (vical.serve.parse_fault_kinds)
    retry_after: float
    wm: str = "copy-last"  # how world-model requests are answered (copy-last, blank)
    auditor: str = "valid"  # how audit requests are answered (vical.serve.auditor.AUDITOR_MODES)
    any_model: bool = False  # answer unknown model names with the random policy, not a 404

    def argv(self) -> list[str]:
        return [
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--seed",
            str(self.seed),
            "--delay",
            str(self.delay),
            "--fault-rate",
            str(self.fault_rate),
            "--fault-kinds",
            ",".join(self.fault_kinds),
            "--retry-after",
            str(self.retry_after),
            "--wm",
            self.wm,
            "--auditor",
            self.auditor,
            *(["--any-model"] if self.any_model else []),
        ]


def serve_baseline(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(8000, "--port", help="TCP port (0: any free port)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random policy."),
    delay: float = typer.Option(0.0, "--delay", help="Seconds to wait before each answer."),
    fault_rate: float = typer.Option(
        0.0,
        "--fault-rate",
        min=0.0,
        max=1.0,
        help="Probability that a request carrying an image (an episode turn) misbehaves. "
        "Text-only requests, such as the preflight check, are never hit.",
    ),
    fault_kinds: str = typer.Option(
        "malformed",
        "--fault-kinds",
        help="Comma-separated fault kinds drawn when --fault-rate hits (see below).",
    ),
    retry_after: float = typer.Option(
        1.0, "--retry-after", min=0.0, help="Retry-After seconds sent with an injected 429."
    ),
    wm: str = typer.Option(
        "copy-last",
        "--wm",
        help="How world-model requests (POST /v1/wm/predict) are answered: copy-last "
        "(the last context frame) or blank (black frames).",
    ),
    auditor: str = typer.Option(
        "valid",
        "--auditor",
        help="How trajectory-audit requests (vical audit) are answered: valid, malformed, "
        "contradictory or mixed (a model named auditor-MODE chooses per request).",
    ),
    any_model: bool = typer.Option(
        False,
        "--any-model",
        help="Answer any other model name with the random policy (default: the "
        "provider's 404, model not found).",
    ),
) -> None:
    """Serve the baseline model over OpenAI-compatible and Gemini HTTP APIs (models:
    random, first, expert) for trying vical end to end without a real model.

    The model names it serves are printed at start-up; any other name is answered
    with the provider's 404 (model not found) unless --any-model. The expert model
    plays classic control with its controllers and Toy Text and MiniGrid with a
    searched plan; on every other game it falls back to the random policy (the
    reply's reasoning says so). The stronger plan expert of the reference runs is
    `vical baseline expert`, which sends no request.

    Ctrl-C or SIGTERM stops it: the requests in flight get their answers, further
    signals are ignored, and it ends with status 0.

    Faults for testing, by model name fault-KIND[-once|-N|-always] (every request) or
    server-wide with --fault-rate/--fault-kinds (image-carrying turns only). The
    model's fault: malformed, illegal, conflict, empty, huge (5 MB reply). HTTP
    errors: 400, 429, 500, context-length, 401-echo (401 repeating the key it got).
    Broken 200 replies: not-json, html, binary, null, schemaless, empty-body.
    Time: slow (slow-MS by name), hang (never answers).
    """
    from vical.serve import main as server_main
    from vical.serve import parse_fault_kinds

    try:
        kinds = parse_fault_kinds(fault_kinds)
    except ValueError as e:
        raise OptionError(f"--fault-kinds: {e}") from e
    opts = ServeOptions(
        host=host,
        port=port,
        seed=seed,
        delay=delay,
        fault_rate=fault_rate,
        fault_kinds=kinds,
        retry_after=retry_after,
        wm=wm,
        auditor=auditor,
        any_model=any_model,
    )
    if wm not in ("copy-last", "blank"):
        raise OptionError(f"--wm {wm!r}: choose copy-last or blank")
    from vical.serve.auditor import AUDITOR_MODES

    if auditor not in AUDITOR_MODES:
        raise OptionError(f"--auditor {auditor!r}: choose {', '.join(AUDITOR_MODES)}")
    server_main(opts.argv(), prog="vical serve-baseline")
