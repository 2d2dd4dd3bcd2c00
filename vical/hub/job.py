"""One verification job, run by a worker in a child process under resource limits:
``python -m vical.hub.job BUNDLE PUBKEY OUT WORKERS [VIEWER]``.

Verifies the bundle against the one public key the team registered and, when it
passes, makes its leaderboard entry with :func:`vical.submit.leaderboard.add` (which
runs every check of ``vical verify``, the replay included). Writes ``OUT/progress.json``
as replayed episodes come back and ``OUT/result.json`` at the end: ``accepted`` with
the entry, or ``rejected`` with the one-line reason; with VIEWER ``1``, an accepted
bundle's trajectory viewer (``vical view --export``) goes to ``OUT/view``. Exit
status 0 for either verdict;
anything else means the verification itself failed (a limit, a crash).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from vical.run.results import atomic_write_bytes


def _write(path: Path, data: dict[str, Any]) -> None:
    atomic_write_bytes(path, json.dumps(data, sort_keys=True).encode())


def run_job(bundle: Path, pubkey: Path, out: Path, workers: int) -> dict[str, Any]:
    from vical.submit.leaderboard import LeaderboardError, add
    from vical.submit.verify import VerifyError

    def progress(done: int, total: int) -> None:
        _write(out / "progress.json", {"done": done, "total": total})

    try:
        entry_file = add(
            bundle,
            pubkeys=[pubkey],
            keyring=None,
            submissions=out / "entries",
            workers=workers,
            progress=False,
            on_progress=progress,
        )
    except (VerifyError, LeaderboardError) as e:
        msg = " ".join(str(e).replace(str(bundle), "the bundle").split())
        return {"state": "rejected", "verdict": f"rejected: {msg}"}
    entry = json.loads(entry_file.read_bytes())
    return {
        "state": "accepted",
        "verdict": f"accepted: {entry['tasks']} tasks replayed and verified",
        "entry": entry,
    }


def export_viewer(bundle: Path, out: Path, workers: int) -> bool:
    """The bundle's episodes in `vical view`'s static viewer, under ``out``; False (and a
    line on standard error) when it cannot be made: the entry stands without it."""
    from vical.view.data import Catalog, ViewError

    try:
        from vical.view.site import export

        with Catalog([bundle]) as catalog:
            export(catalog, out, workers=workers)
    except (ViewError, OSError, ValueError) as e:
        print(f"viewer not exported: {type(e).__name__}: {e}", file=sys.stderr)
        return False
    return True


def main(argv: list[str]) -> int:
    bundle, pubkey, out, workers = Path(argv[0]), Path(argv[1]), Path(argv[2]), int(argv[3])
    viewer = len(argv) > 4 and argv[4] == "1"
    try:
        result = run_job(bundle, pubkey, out, workers)
        if viewer and result["state"] == "accepted":
            result["viewer"] = export_viewer(bundle, out / "view", workers)
    except MemoryError:
        print("verification ran out of memory", file=sys.stderr)
        return 3
    _write(out / "result.json", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
