"""The server's command line: ``python -m vical.serve`` and ``vical serve-baseline``."""

from __future__ import annotations

import argparse
import signal
import sys

from vical.serve.auditor import AUDITOR_MODES
from vical.serve.faults import FAULT_KINDS, parse_fault_kinds
from vical.serve.server import BaselineServer


def build_parser(prog: str = "python -m vical.serve") -> argparse.ArgumentParser:
    """The command line of the server (also behind ``vical serve-baseline``)."""
    ap = argparse.ArgumentParser(
        prog=prog,
        description="Baseline model server: OpenAI chat/responses and Gemini generateContent.",
    )
    ap.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    ap.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random policy")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to wait before answering")
    ap.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="probability that a request carrying an image (an episode turn) misbehaves; "
        "text-only requests are never hit",
    )
    ap.add_argument(
        "--fault-kinds",
        type=_fault_kinds_arg,
        default=("malformed",),
        help=f"comma-separated kinds drawn when --fault-rate hits: {','.join(FAULT_KINDS)}",
    )
    ap.add_argument(
        "--retry-after", type=float, default=1.0, help="Retry-After seconds sent with a 429"
    )
    ap.add_argument(
        "--auditor",
        choices=AUDITOR_MODES,
        default="valid",
        help="how `vical audit` requests are answered (model name auditor-<mode> overrides)",
    )
    ap.add_argument(
        "--any-model",
        action="store_true",
        help="answer any other model name with the random policy instead of a 404",
    )
    ap.add_argument(
        "--wm",
        choices=("copy-last", "blank"),
        default="copy-last",
        help="how world-model requests (POST /v1/wm/predict) are answered",
    )
    return ap


def _fault_kinds_arg(text: str) -> tuple[str, ...]:
    try:
        return parse_fault_kinds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None, prog: str = "python -m vical.serve") -> None:
    args = build_parser(prog).parse_args(argv)
    if not 0.0 <= args.fault_rate <= 1.0:
        build_parser(prog).error(f"--fault-rate must be between 0 and 1, not {args.fault_rate}")
    try:
        server = BaselineServer(
            (args.host, args.port),
            seed=args.seed,
            delay=args.delay,
            fault_rate=args.fault_rate,
            fault_kinds=args.fault_kinds,
            retry_after=args.retry_after,
            auditor=args.auditor,
            wm=args.wm,
            any_model=args.any_model,
        )
    except OSError as e:  # the port is taken, the address is not this machine's, ...
        print(
            f"error: cannot listen on {args.host}:{args.port}: {e.strerror or e}; choose "
            "another --port (0: any free port) or stop what listens there",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(2) from None
    # SIGTERM (`kill`, a container's stop) stops the server as Ctrl-C does; set here,
    # before a simulator's SDL could take the signal for itself, and before the banner.
    # The first signal stops it; any further one is ignored while the requests in flight
    # get their answers, and the command ends with status 0 however many signals came.
    old = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _serve(server, args)
    except KeyboardInterrupt:
        print("stopping: answering the requests in flight", flush=True)
        server.finish_in_flight()
        print("stopped", flush=True)
    finally:
        server.stopping.set()
        server._httpd.server_close()
        for s, h in old.items():
            if signal.getsignal(s) != signal.SIG_IGN:
                signal.signal(s, h)


def _serve(server: BaselineServer, args: argparse.Namespace) -> None:
    """Print the banner and serve until a signal."""
    faults = (
        f"\n  Injected faults:            rate {args.fault_rate:g} on image turns, "
        f"kinds {','.join(args.fault_kinds)}"
        if args.fault_rate
        else ""
    )
    other = "the random policy" if args.any_model else "404 (model not found)"
    print(
        f"vical baseline server on {server.url}\n"
        f"  OpenAI-compatible base URL: {server.openai_base_url}  (models: random, first, expert)\n"
        f"  Gemini base URL:            {server.url}{faults}\n"
        "  Models: random, first, expert, fault-<kind>[-<when>], auditor-<mode>;\n"
        f"  any other name: {other}. Ctrl-C or SIGTERM stops.",
        flush=True,
    )
    server.serve_forever()


def _interrupt(signum: int, frame: object) -> None:
    for s in (signal.SIGINT, signal.SIGTERM):  # one stop; later signals change nothing
        signal.signal(s, signal.SIG_IGN)
    raise KeyboardInterrupt
