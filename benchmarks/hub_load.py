"""Load on one `vical hub serve` over loopback: N concurrent uploads of M-MiB bundles,
then an upload far past the size cap.

    python benchmarks/hub_load.py                      # 200 uploads of 5 MiB, then 2 GiB
    python benchmarks/hub_load.py --uploads 50 --mib 1 --huge-gib 0.5

Each upload is a real signed bundle (a two-task random run, packed by `make_bundle`)
followed by its own incompressible 5 MiB of bytes after the archive's end: the hub
checks the signed manifest at intake, so every upload is taken and stored; the extra
bytes only make it big. The server runs on the embedded SQLite in a temporary folder,
with the rate limits raised past N. Prints the wall time, uploads per second, MiB/s,
each upload's latency (median, 95th percentile, max), the errors (must be 0) and the
server's peak resident memory (VmHWM), which stays bounded because uploads stream to
disk. Then streams 2 GiB without a declared length: refused at the cap (512 MiB), with
nothing left in the store, and one declared 2 GiB: refused before a byte is read.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hub_support import Server, approve, hub_env, put_headers_only  # noqa: E402
from vical.hub import auth  # noqa: E402
from vical.submit.keys import load_private  # noqa: E402

MiB = 1024 * 1024


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def small_bundle(tmp: Path) -> tuple[bytes, Path]:
    from vical.run import RunOptions, run_eval
    from vical.run.doctor import skipped_entry
    from vical.spec import select_tasks
    from vical.submit.bundle import make_bundle
    from vical.submit.keys import keygen

    priv, _ = keygen(tmp / "team")
    run_eval(
        select_tasks("taxi/state1,cliffwalking/base"),
        tmp / "run",
        options=RunOptions(workers=1, progress=False, frames="none", doctor=skipped_entry("b")),
    )
    make_bundle(tmp / "run", priv, tmp / "b.tar.gz", team="Load", partial=True)
    return gzip.decompress((tmp / "b.tar.gz").read_bytes()), priv


async def upload_all(url: str, key, head: bytes, pad: bytes, n: int) -> tuple[list, list]:
    chunk = 256 * 1024

    def body(i: int) -> tuple[bytes, str]:
        extra = i.to_bytes(16, "big") + pad
        h = hashlib.sha256(head)
        h.update(extra)
        return extra, h.hexdigest()

    async def one(client: httpx.AsyncClient, i: int) -> tuple[float, int | str]:
        extra, sha = body(i)
        view = memoryview(extra)

        async def gen():
            yield head
            for k in range(0, len(view), chunk):
                yield bytes(view[k : k + chunk])

        headers = auth.signed_headers(key, "PUT", "/api/submissions", sha)
        headers["Content-Length"] = str(len(head) + len(extra))
        t = time.perf_counter()
        try:
            r = await client.put(url + "/api/submissions", content=gen(), headers=headers)
            return time.perf_counter() - t, r.status_code
        except httpx.HTTPError as e:
            return time.perf_counter() - t, f"{type(e).__name__}: {e}"

    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        results = await asyncio.gather(*(one(client, i) for i in range(n)))
    return [r[0] for r in results], [r[1] for r in results]


def huge(url: str, key, gib: float) -> dict:
    total = int(gib * 1024 * MiB)
    zeros = bytes(MiB)

    def endless():
        for _ in range(total // MiB):
            yield zeros

    out = {}
    h = auth.signed_headers(key, "PUT", "/api/submissions", "0" * 64)
    t = time.perf_counter()
    try:
        r = httpx.put(url + "/api/submissions", content=endless(), headers=h, timeout=600)
        out["streamed"] = (r.status_code, r.json().get("error"))
    except httpx.HTTPError as e:  # the server answers 413 and closes while we still send
        out["streamed"] = (f"{type(e).__name__}", str(e)[:100])
    out["streamed_seconds"] = round(time.perf_counter() - t, 1)
    h = auth.signed_headers(key, "PUT", "/api/submissions", "0" * 64)
    h["Content-Length"] = str(total)
    t = time.perf_counter()
    code, body = put_headers_only(url, "/api/submissions", h)
    out["declared"] = (code, body.get("error"))
    out["declared_seconds"] = round(time.perf_counter() - t, 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uploads", type=int, default=200)
    ap.add_argument("--mib", type=float, default=5.0)
    ap.add_argument("--huge-gib", type=float, default=2.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hub-load-") as d:
        tmp = Path(d)
        head, key_file = small_bundle(tmp)
        key = load_private(key_file)
        pad = os.urandom(int(args.mib * MiB) - 16)
        env = hub_env(
            VICAL_HUB_UPLOADS_PER_KEY_PER_HOUR=str(10 * args.uploads),
            VICAL_HUB_UPLOADS_PER_ADDRESS_PER_HOUR=str(10 * args.uploads),
        )
        home = tmp / "home"
        server = Server(home, f"sqlite:///{tmp / 'hub.sqlite'}", env)
        try:
            approve(server.url, key_file)
            base_rss = peak_rss_mib(server.p.pid)
            t = time.perf_counter()
            lat, codes = asyncio.run(upload_all(server.url, key, head, pad, args.uploads))
            wall = time.perf_counter() - t
            rss = peak_rss_mib(server.p.pid)
            errors = [c for c in codes if c != 202]
            size = (len(head) + len(pad) + 16) / MiB
            stored = len(list((home / "store").glob("??/*.tar.gz")))
            lat.sort()
            report = {
                "uploads": args.uploads,
                "bundle_mib": round(size, 2),
                "wall_seconds": round(wall, 1),
                "uploads_per_second": round(args.uploads / wall, 1),
                "mib_per_second": round(args.uploads * size / wall, 1),
                "latency_seconds": {
                    "median": round(statistics.median(lat), 2),
                    "p95": round(lat[int(0.95 * (len(lat) - 1))], 2),
                    "max": round(lat[-1], 2),
                },
                "errors": len(errors),
                "error_kinds": sorted({str(e) for e in errors})[:5],
                "stored_bundles": stored,
                "server_peak_rss_mib": {"before": round(base_rss), "after": round(rss)},
            }
            if args.huge_gib:
                report["huge"] = huge(server.url, key, args.huge_gib)
                report["huge"]["store_tmp_left"] = len(list((home / "store" / "tmp").iterdir()))
                report["huge"]["stored_bundles_after"] = len(
                    list((home / "store").glob("??/*.tar.gz"))
                )
                report["server_peak_rss_mib"]["after_huge"] = round(peak_rss_mib(server.p.pid))
        finally:
            report_rc = server.stop()
    report["server_exit"] = report_rc
    print(json.dumps(report, indent=2))
    ok = not errors and stored == args.uploads and report_rc == 0
    if args.huge_gib:
        ok = ok and report["huge"]["store_tmp_left"] == 0
        ok = ok and report["huge"]["stored_bundles_after"] == args.uploads
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
