"""A local page where a person labels the sampled episodes, blind to the auditor.

``vical audit label SAMPLE --labels FILE`` serves it on 127.0.0.1 with the
standard library's HTTP server. The index lists the cases by their opaque ids;
a case page shows what the auditor was shown (the rules text, every message the
acting model received with its images or videos in order, every reply it gave,
and the captioned last frame) and a form with the three judgments under the
auditor's own definitions (:func:`vical.audit.prompt.instructions`). It never
shows the auditor's verdicts, the run folder, the backend or the model name.

Saving a form writes the labels file atomically (``schema_version``,
``sample_sha256``, ``labels``: ``{case: {"rule_transfer",
"strategy_transfer", "player_failure_stage", "note", "labelled_at"}}``) and
moves on to the next unlabelled case. Labelling a case again replaces its
labels. A labels file made for another sample is refused.
"""

from __future__ import annotations

import html
import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from vical.audit.evidence import Evidence, load_evidence
from vical.audit.prompt import instructions
from vical.audit.sample import case_folder, load_sample
from vical.audit.verdict import ATTRIBUTION, RULE_LABELS, STAGES, STRATEGY_LABELS, TRANSFER
from vical.errors import RunFolderError
from vical.run.results import file_sha256
from vical.serve.background import BackgroundServer

LABELS_SCHEMA = 1
LABEL_FIELDS: dict[str, tuple[str, ...]] = {
    "rule_transfer": RULE_LABELS,
    "strategy_transfer": STRATEGY_LABELS,
    "player_failure_stage": STAGES,
}


def sample_sha256(path: Path) -> str:
    """The digest a labels file names its sample by."""
    return file_sha256(Path(path))


def load_labels(path: Path, sample_path: Path | None = None) -> dict[str, Any]:
    """A labels file (an empty one when ``path`` does not exist yet), checked."""
    path = Path(path)
    if not path.exists():
        sha = sample_sha256(sample_path) if sample_path is not None else None
        return {"schema_version": LABELS_SCHEMA, "sample_sha256": sha, "labels": {}}
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RunFolderError(f"{path}: not a readable labels file ({e})") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("labels"), dict):
        raise RunFolderError(f"{path}: not a labels file (it has no 'labels' object)")
    if sample_path is not None and obj.get("sample_sha256") != sample_sha256(sample_path):
        raise RunFolderError(
            f"{path} holds labels for another sample than {sample_path}; "
            "use a new --labels file for this sample"
        )
    for case, values in obj["labels"].items():
        for name, allowed in LABEL_FIELDS.items():
            if not isinstance(values, dict) or values.get(name) not in allowed:
                got = values.get(name) if isinstance(values, dict) else values
                raise RunFolderError(
                    f"{path}: case {case}: {name} is {got!r}; allowed: {', '.join(allowed)}"
                )
    return obj


def check_form(form: dict[str, str]) -> dict[str, str]:
    """The labels a submitted form holds; ValueError naming a missing or unknown value."""
    out: dict[str, str] = {}
    for name, allowed in LABEL_FIELDS.items():
        value = form.get(name)
        if value not in allowed:
            shown = "nothing" if value is None else repr(value)
            raise ValueError(f"choose {name.replace('_', ' ')} (got {shown})")
        out[name] = value
    out["note"] = (form.get("note") or "").strip()[:2000]
    return out


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:70em;color:#222}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em;border-radius:4px}
img,video{max-width:22em;margin:.2em;border:1px solid #ccc;vertical-align:top}
.turn{border-left:3px solid #888;padding-left:.8em;margin:1.2em 0}
.reply{border-left:3px solid #2a7;padding-left:.8em}
fieldset{margin:.8em 0}label{margin-right:1.2em}
.error{color:#b00;font-weight:bold}details{margin:1em 0}
"""


def _page(title: str, body: str) -> bytes:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{body}</body></html>"
    ).encode()


class LabelServer(BackgroundServer):
    """The labelling page; ``with LabelServer(sample, labels) as s:`` serves on a free port."""

    def __init__(
        self, sample_path: Path, labels_path: Path, host: str = "127.0.0.1", port: int = 0
    ):
        self.sample_path = Path(sample_path)
        self.labels_path = Path(labels_path)
        self.sample = load_sample(self.sample_path)
        self.cases = {c["case"]: c for c in self.sample["cases"]}
        self.order: list[str] = [c["case"] for c in self.sample["cases"]]
        load_labels(self.labels_path, self.sample_path)  # refuse a foreign labels file now
        self.lock = threading.Lock()
        self._evidence: dict[str, Evidence] = {}
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- data -------------------------------------------------------------------------
    def evidence(self, case: str) -> Evidence:
        with self.lock:
            if case not in self._evidence:
                self._evidence[case] = load_evidence(case_folder(self.sample, self.cases[case]))
            return self._evidence[case]

    def labels(self) -> dict[str, Any]:
        return load_labels(self.labels_path, self.sample_path)

    def save(self, case: str, values: dict[str, str]) -> None:
        from vical.run.results import atomic_write_json

        with self.lock:
            data = self.labels()
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            data["labels"][case] = {**values, "labelled_at": stamp}
            atomic_write_json(self.labels_path, data)

    def next_case(self, after: str | None = None) -> str | None:
        done = self.labels()["labels"]
        start = self.order.index(after) + 1 if after in self.order else 0
        for c in self.order[start:] + self.order[:start]:
            if c not in done:
                return c
        return None

    # -- pages --------------------------------------------------------------------------
    def index_page(self) -> bytes:
        done = self.labels()["labels"]
        rows = "".join(
            f"<li><a href='/case/{c}'>case {c}</a> ({html.escape(self.cases[c]['task_id'])})"
            f"{' — labelled' if c in done else ''}</li>"
            for c in self.order
        )
        nxt = self.next_case()
        head = (
            f"<p><a id='next' href='/case/{nxt}'>Label the next case</a></p>"
            if nxt
            else "<p id='all-done'>Every case is labelled.</p>"
        )
        body = (
            f"<h1>Audit verification</h1><p>{len(done)} of {len(self.order)} cases labelled; "
            f"labels are saved to {html.escape(self.labels_path.name)}.</p>{head}<ol>{rows}</ol>"
        )
        return _page("Audit verification", body)

    def case_page(self, case: str, error: str = "", shown: dict[str, str] | None = None) -> bytes:
        """A case's page; ``shown``: the values to pre-select (default: its saved labels)."""
        from vical.spec import get_task

        ev = self.evidence(case)
        task = get_task(ev.task_id)
        current = shown if shown is not None else self.labels()["labels"].get(case, {})
        out = [
            f"<p><a href='/'>all cases</a></p><h1>Case {case}: {html.escape(ev.task_id)}</h1>",
            f"<p class='error'>{html.escape(error)}</p>" if error else "",
            "<details><summary>Definitions (the auditor's instructions)</summary>",
            f"<pre>{html.escape(instructions(TRANSFER))}</pre>",
            f"<pre>{html.escape(instructions(ATTRIBUTION))}</pre></details>",
            f"<h2>Rules text</h2><pre>{html.escape(task.env.rules.basic.strip())}</pre>",
            f"<pre>{html.escape(task.env.rules.detailed.strip())}</pre>",
            f"<p>Score {ev.result.score:g}, passed: {'yes' if ev.result.passed else 'no'}, "
            f"ending: {html.escape(ev.end_label)}.</p><h2>Trajectory</h2>",
        ]
        for i, turn in enumerate(ev.turns, start=1):
            out.append(f"<div class='turn'><h3>Turn {i}: what the model received</h3>")
            for p in turn.parts:
                if p["type"] == "text":
                    out.append(f"<pre>{html.escape(p['text'])}</pre>")
                elif p["type"] == "video":
                    out.append(f"<video controls src='/media/{case}/{p['sha256']}'></video>")
                else:
                    out.append(f"<img alt='frame' src='/media/{case}/{p['sha256']}'>")
            if turn.answer is None:
                out.append("<p>No reply was received.</p></div>")
                continue
            out.append(
                "<div class='reply'><h4>Its reply</h4>"
                f"<pre>{html.escape(turn.reasoning or '(no visible reasoning)')}</pre>"
                f"<pre>{html.escape(turn.answer)}</pre></div></div>"
            )
        out.append(
            f"<h3>Last frame</h3><img alt='last frame' src='/media/{case}/{ev.end_frame_sha256}'>"
        )
        out.append(f"<form method='post' action='/case/{case}'><h2>Your labels</h2>")
        for name, allowed in LABEL_FIELDS.items():
            out.append(f"<fieldset><legend>{name.replace('_', ' ')}</legend>")
            for value in allowed:
                checked = " checked" if current.get(name) == value else ""
                out.append(
                    f"<label><input type='radio' name='{name}' value='{value}'{checked}> "
                    f"{value.replace('_', ' ')}</label>"
                )
            out.append("</fieldset>")
        note = html.escape(current.get("note", ""))
        out.append(
            f"<p><label>Note <input name='note' size='60' value='{note}'></label></p>"
            "<button type='submit'>Save and go to the next case</button></form>"
        )
        return _page(f"Case {case}", "".join(out))


def _handler(server: LabelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True  # a reply's body must not wait for an ACK

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, data: bytes, ctype: str = "text/html; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def _redirect(self, to: str) -> None:
            self.send_response(303)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            parts = [p for p in self.path.split("?", 1)[0].split("/") if p]
            try:
                if not parts:
                    self._send(200, server.index_page())
                elif len(parts) == 2 and parts[0] == "case" and parts[1] in server.cases:
                    self._send(200, server.case_page(parts[1]))
                elif len(parts) == 3 and parts[0] == "media" and parts[1] in server.cases:
                    item = server.evidence(parts[1]).media.get(parts[2])
                    if item is None:
                        self._send(404, b"no such media", "text/plain")
                    else:
                        self._send(200, item[0], item[1])
                else:
                    self._send(404, _page("Not found", "<p>No such page.</p>"))
            except RunFolderError as e:
                self._send(500, _page("Error", f"<p class='error'>{html.escape(str(e))}</p>"))

        def do_POST(self) -> None:
            parts = [p for p in self.path.split("/") if p]
            if len(parts) != 2 or parts[0] != "case" or parts[1] not in server.cases:
                self._send(404, _page("Not found", "<p>No such case.</p>"))
                return
            case = parts[1]
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
            try:
                values = check_form(form)
            except ValueError as e:
                self._send(400, server.case_page(case, error=str(e), shown=form))
                return
            server.save(case, values)
            nxt = server.next_case(after=case)
            self._redirect(f"/case/{nxt}" if nxt else "/")

    return Handler
