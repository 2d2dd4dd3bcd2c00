"""A log's records read in order, each expected by name: what the log checks
(:mod:`vical.submit.logcheck`, :mod:`vical.submit.protocolcheck`) walk with."""

from __future__ import annotations

from typing import Any

from vical.submit.verdict import VerifyError


class Cursor:
    """The log's records read in order, each expected by name."""

    def __init__(self, records: list[dict[str, Any]], rel: str):
        self.records = records
        self.i = 0
        self.rel = rel

    def peek(self) -> str | None:
        return self.records[self.i]["type"] if self.i < len(self.records) else None

    def take(self, kind: str, where: str) -> dict[str, Any]:
        if self.i >= len(self.records):
            raise VerifyError("log", f"{self.rel}: missing {kind} record {where} (the log ends)")
        rec = self.records[self.i]
        if rec["type"] != kind:
            raise VerifyError(
                "log",
                f"{self.rel}: missing {kind} record {where}: line {rec['_line']} is a "
                f"{str(rec['type'])[:40]!r} record",
            )
        self.i += 1
        return rec

    def fail(self, rec: dict[str, Any], what: str) -> VerifyError:
        return VerifyError("log", f"{self.rel}: line {rec['_line']} ({rec['type']}): {what}")
