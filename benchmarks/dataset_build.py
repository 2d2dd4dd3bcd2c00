"""Wall time of `vical dataset build` over every task, cold and warm, and its determinism.

Builds the dataset folder twice: first with an empty demo cache (every clip is
replayed, captioned and encoded), then again with the cache the first build
filled. Prints both wall times and whether the two folders' manifests (sha256 of
every file) are identical.

    python benchmarks/dataset_build.py [--tasks 'taxi,pong']
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build(out: Path, cache: Path, tasks: str | None) -> float:
    env = {**os.environ, "VICAL_CACHE": str(cache), "SDL_VIDEODRIVER": "dummy"}
    cmd = [sys.executable, "-m", "vical.cli", "dataset", "build", "--out", str(out)]
    if tasks:
        cmd += ["--tasks", tasks]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cold = build(d / "a", d / "cache", args.tasks)
        warm = build(d / "b", d / "cache", args.tasks)
        ma = json.loads((d / "a" / "manifest.json").read_text())
        mb = json.loads((d / "b" / "manifest.json").read_text())
        n = len(ma.get("files", {}))
        same = ma == mb
    print(f"files: {n}")
    print(f"cold build (empty demo cache): {cold:8.1f} s")
    print(f"warm build (cache filled):     {warm:8.1f} s")
    print(f"manifests identical:           {same}")


if __name__ == "__main__":
    main()
