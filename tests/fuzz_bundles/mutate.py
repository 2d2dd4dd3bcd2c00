"""A mutation fuzzer over honest bundles: every outcome must be a verdict.

Each mutation starts from an honest, signed bundle (:class:`Source`), changes one
thing, re-hashes the file table and re-signs it with the submitter's own key, so
that everything after the signature is exercised: byte flips in any file, a JSON
edit at any path of a result, a run manifest, a log record or the bundle manifest
(type swaps, deletions, huge numbers, deep nesting), and log records deleted,
duplicated or reordered.

:func:`run_one` classifies the outcome: ``rejected`` (a one-line
:class:`VerifyError`), ``mismatch`` (a replay verdict that fails), ``accepted``
(checked: the ranked fields, the condition and the coverage must equal the honest
bundle's, and the leaderboard must add and build it), or a failure: ``traceback``
(any other exception), ``hang`` (more than :data:`SECONDS`), ``changed`` (an
accepted change to a ranked field) or ``board`` (the leaderboard fell over).

Every bundle kind is fuzzed (:data:`KINDS`): a model backend's run (``run``), the
expert's plan run (``expert``), a run imported from an Inspect AI log (``inspect``),
a world-model evaluation (``wm``, verified against its case folder) and a coupled
run with the simulator as world model (``coupled``). PNG members may also be swapped
for an image whose header claims 13000 x 13000 pixels.

``python -m fuzz_bundles.mutate --count 10000`` (from ``tests/``) runs the large
campaign, ``--count`` mutations of each kind; ``nox -s fuzz`` does the same. It ends
with each kind's tally, its time and the peak resident memory of the process.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from fuzz_bundles.generate import Source, write_gz

SECONDS = 60.0
DEEP = "__vical_fuzz_deep__"
HUGE = "__vical_fuzz_huge__"
_RAW = {
    DEEP: "[" * 100_000 + "]" * 100_000,
    HUGE: "1" + "0" * 5000,
}
VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2**63, -(2**63), 1e308, 0.5, "", "x", "Victory", [], {},
    ["x"], {"a": 1}, DEEP, HUGE, "1e999", "\u202e", "a" * 2000,
]  # fmt: skip


class _Hang(Exception):
    pass


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:50]):
            out += _paths(v, (*prefix, i))
    return out


def _dump(obj: Any, indent: int | None = None) -> str:
    text = json.dumps(obj, indent=indent, sort_keys=True)
    for key, raw in _RAW.items():
        text = text.replace(json.dumps(key), raw)
    return text


def _edit_json(obj: Any, rng: random.Random) -> tuple[Any, str]:
    """One edit at a random path of ``obj``: set a value of another type, or delete."""
    obj = copy.deepcopy(obj)
    paths = [p for p in _paths(obj) if p]
    if not paths:
        return rng.choice(VALUES), "root replaced"
    path = rng.choice(paths)
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    if rng.random() < 0.2 and isinstance(parent, dict):
        del parent[path[-1]]
        return obj, f"delete {'/'.join(map(str, path))}"
    value = rng.choice(VALUES)
    parent[path[-1]] = value
    return obj, f"set {'/'.join(map(str, path))} = {str(value)[:20]!r}"


def mutate(src: Source, rng: random.Random) -> tuple[dict[str, Any], dict[str, bytes], str]:
    """(manifest, files, description) of one mutation of ``src``."""
    manifest = copy.deepcopy(src.manifest)
    files = dict(src.files)
    names = sorted(files)
    logs = [n for n in names if n.endswith(".jsonl")]  # episode logs, wm scores
    jsons = [n for n in names if n.endswith(".json")]
    pngs = [n for n in names if n.endswith(".png") and "trajectory" not in n]
    ops = ["flip", "json", "json", "record", "record", "log-delete", "log-dup", "log-swap",
           "manifest", "deep-line"]  # fmt: skip
    if pngs:
        ops += ["png-big", "png-flip"]
    op = rng.choice(ops)
    if op == "png-big":
        name = rng.choice(pngs)
        files[name] = big_png()
        return manifest, files, f"{name}: a 13000x13000 PNG"
    if op == "png-flip":
        name = rng.choice(pngs)
        data = bytearray(files[name])
        pos = rng.randrange(8, 33) if rng.random() < 0.5 else rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)  # the header (dimensions, type) or anywhere
        files[name] = bytes(data)
        return manifest, files, f"flip a bit of {name} at {pos}"
    if op == "flip":
        name = rng.choice(names)
        data = bytearray(files[name])
        if data:
            pos = rng.randrange(len(data))
            data[pos] ^= 1 << rng.randrange(8)
        files[name] = bytes(data)
        return manifest, files, f"flip a bit of {name}"
    if op == "json":
        name = rng.choice(jsons)
        obj, what = _edit_json(json.loads(files[name]), rng)
        files[name] = _dump(obj, indent=2).encode()
        return manifest, files, f"{name}: {what}"
    if op == "manifest":
        keep = {k: v for k, v in manifest.items() if k not in ("files",)}
        obj, what = _edit_json(keep, rng)
        if isinstance(obj, dict):
            obj["files"] = manifest["files"]
            manifest = obj
        return manifest, files, f"bundle manifest: {what}"
    name = rng.choice(logs)
    lines = files[name].decode().splitlines()
    i = rng.randrange(len(lines))
    if op == "record":
        obj, what = _edit_json(json.loads(lines[i]), rng)
        lines[i] = _dump(obj)
        desc = f"{name} line {i + 1}: {what}"
    elif op == "log-delete":
        del lines[i]
        desc = f"{name}: delete line {i + 1}"
    elif op == "log-dup":
        lines.insert(i, lines[i])
        desc = f"{name}: duplicate line {i + 1}"
    elif op == "log-swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        desc = f"{name}: swap lines {i + 1} and {j + 1}"
    else:
        lines.insert(i, _RAW[DEEP])
        desc = f"{name}: deep line at {i + 1}"
    files[name] = ("\n".join(lines) + "\n").encode()
    return manifest, files, desc


def write_mutant(src: Source, manifest: dict[str, Any], files: dict[str, bytes], out: Path) -> None:
    """The mutant bundle, its file table re-hashed and re-signed with the team's key."""
    from vical.submit.bundle import file_entry

    if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict):
        manifest["files"] = {p: file_entry(b) for p, b in sorted(files.items())}
    mbytes = (_dump(manifest, indent=2) + "\n").encode()
    write_gz(out, src.head(mbytes, src.sig_bytes(mbytes)) + src.body(files))


def _big_png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    z = zlib.compressobj(9)
    row = b"\0" * (1 + 13000 // 8 + 1)
    idat = b"".join(z.compress(row) for _ in range(13000)) + z.flush()
    ihdr = struct.pack(">IIBBBBB", 13000, 13000, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


_BIG: list[bytes] = []


def big_png() -> bytes:
    """A PNG whose header claims 13000 x 13000 pixels (1-bit, all black), made once."""
    if not _BIG:
        _BIG.append(_big_png())
    return _BIG[0]


def ranked_fields(verdict: Any) -> dict[str, Any]:
    """What a leaderboard cell, the condition and the coverage are made of (for a
    world-model bundle: its signed summary and its cases)."""
    if verdict.manifest.get("kind") == "wm":
        return {
            "summary": verdict.manifest.get("summary"),
            "cases": [e.episode for e in verdict.episodes],
        }
    return {
        "agent": verdict.agent,
        "rankable": verdict.rankable,
        "results": sorted(
            (r.task_id, r.run_index, r.score, r.passed, r.outcome, str(r.failure_mode), r.steps)
            for r in verdict.results
        ),
        "condition": verdict.condition,
        "partial": verdict.partial,
        "missing": sorted(verdict.manifest.get("missing_tasks", [])),
    }


def _verify(out: Path, pub: Path, wm_cases: Path | None) -> Any:
    from vical.submit.verify import verify_bundle

    return verify_bundle(
        out,
        pubkeys=[pub],
        keyring=None,
        workers=1,
        progress=False,
        wm_cases=wm_cases,
        accept_wm=wm_cases is not None,
    )


def run_one(
    src: Source,
    pub: Path,
    seed: int,
    base: dict[str, Any],
    scratch: Path,
    wm_cases: Path | None = None,
) -> tuple[str, str]:
    """(outcome, description) of mutation ``seed``."""
    from vical.submit import leaderboard
    from vical.submit.verify import VerifyError

    rng = random.Random(seed)
    manifest, files, desc = mutate(src, rng)
    out = scratch / f"m{seed}.tar.gz"
    write_mutant(src, manifest, files, out)

    def alarm(*_: Any) -> None:
        raise _Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        v = _verify(out, pub, wm_cases)
        if not v.ok:
            return "mismatch", desc
        if ranked_fields(v) != base:
            return "changed", desc
        if wm_cases is not None:  # a world-model bundle never reaches the leaderboard
            return "accepted", desc
        subs = scratch / f"subs{seed}"
        try:
            leaderboard.add(out, pubkeys=[pub], keyring=None, submissions=subs, workers=1,
                            progress=False)  # fmt: skip
        except (VerifyError, leaderboard.LeaderboardError) as e:
            if "\n" in str(e):
                return "board", f"{desc}: multi-line refusal"
        leaderboard.build(scratch / f"site{seed}", subs, [])
        return "accepted", desc
    except VerifyError as e:
        from vical.submit.verify import UnexpectedError

        if "\n" in str(e):
            return "traceback", f"{desc}: multi-line verdict {str(e)[:200]!r}"
        if isinstance(e, UnexpectedError):  # the last resort: still a bug
            return "traceback", f"{desc}: {str(e)[:300]}"
        return "rejected", desc
    except _Hang:
        return "hang", desc
    except Exception:
        return "traceback", f"{desc}: {traceback.format_exc(limit=-3)}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        out.unlink(missing_ok=True)


FAILURES = ("traceback", "hang", "changed", "board")


def campaign(
    src: Source, pub: Path, seeds: range, log: Any = None, wm_cases: Path | None = None
) -> Counter[str]:
    """Run mutations ``seeds``; the tally of outcomes (failures printed to ``log``).
    ``wm_cases``: the case folder a world-model bundle is verified against."""
    import shutil

    with tempfile.TemporaryDirectory(prefix="vical-fuzz-") as tmp:
        scratch = Path(tmp)
        honest = scratch / "honest.tar.gz"
        write_mutant(src, copy.deepcopy(src.manifest), dict(src.files), honest)
        v = _verify(honest, pub, wm_cases)
        assert v.ok, "the honest bundle must verify"
        base = ranked_fields(v)
        tally: Counter[str] = Counter()
        for seed in seeds:
            outcome, desc = run_one(src, pub, seed, base, scratch, wm_cases)
            tally[outcome] += 1
            if outcome in FAILURES and log is not None:
                print(f"seed {seed}: {outcome}: {desc}", file=log, flush=True)
            if log is not None and sum(tally.values()) % 250 == 0:
                print(f"after {sum(tally.values())}: {dict(tally)}", file=log, flush=True)
            for p in scratch.iterdir():
                if p.name != "honest.tar.gz":
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
        return tally


def expert_plans(folder: Path, tasks: str) -> Path:
    """The packaged expert plans of ``tasks`` (ids, comma-separated) written for this
    task data into ``folder``, and made this process's packaged plan file (the one
    verification re-derives the expert's actions from): the packaged file may lag
    behind task data being remade."""
    from vical.agent import plans
    from vical.spec import tasks_digest

    doc = json.loads(plans.DEFAULT_PLANS.read_bytes())
    ids = tasks.split(",")
    doc.update(tasks_digest=tasks_digest(), tasks={t: doc["tasks"][t] for t in ids})
    path = folder / "expert-plans.json"
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))
    plans.DEFAULT_PLANS = path
    return path


KINDS = ("run", "expert", "inspect", "wm", "coupled")
TASKS = "taxi/state1,cliffwalking/base"


def honest_source(folder: Path, kind: str = "run") -> tuple[Source, Path, Path | None]:
    """An honest bundle of ``kind`` (:data:`KINDS`), its public key and, for a
    world-model bundle, its case folder, made in ``folder``. ``run``: a model backend
    against the baseline server, demonstrations shown, two tasks."""
    from fuzz_bundles.generate import load_source
    from vical.run import RunOptions, run_eval
    from vical.serve import BaselineServer
    from vical.spec import select_tasks
    from vical.submit.bundle import make_bundle, make_wm_bundle
    from vical.submit.keys import keygen, load_private

    priv, pub = keygen(folder / "team")
    run, cases = folder / "run", None
    if kind == "run":
        with BaselineServer() as srv:
            run_eval(
                select_tasks(TASKS),
                run,
                agent="openai-chat",
                agent_kwargs={"endpoint": srv.openai_base_url, "model": "baseline"},
                options=RunOptions(workers=1, progress=False),
            )
    elif kind == "expert":
        plans = expert_plans(folder, TASKS)
        run_eval(
            select_tasks(TASKS),
            run,
            agent="plan",
            agent_kwargs={"plans": str(plans)},
            options=RunOptions(workers=1, progress=False, demos=False),
        )
    elif kind == "coupled":
        from vical.wm.couple import Coupling

        coupling = Coupling("simulator", horizon=2, candidates=2)
        opts = RunOptions(workers=1, progress=False, world_model=coupling)
        run_eval(select_tasks("cliffwalking/base"), run, options=opts)
    elif kind == "inspect":
        _inspect_run(folder, run)
    elif kind == "wm":
        from vical.wm.cases import build
        from vical.wm.evaluate import evaluate

        cases = folder / "cases"
        build(cases, ["grid-navigation"], contexts=1)
        evaluate("copy-last", cases, run)
        make_wm_bundle(run, priv, folder / "b.tar.gz", "Team A")
    else:
        raise ValueError(f"unknown bundle kind {kind!r}; kinds: {', '.join(KINDS)}")
    if kind != "wm":
        make_bundle(run, priv, folder / "b.tar.gz", team="Team A", partial=True)
    return load_source(folder / "b.tar.gz", load_private(priv)), pub, cases


def _inspect_run(folder: Path, run: Path) -> None:
    """One task played through Inspect AI against the baseline server, imported."""
    import os

    from inspect_ai import eval as inspect_eval

    from vical.interop.inspect_import import import_inspect_log
    from vical.interop.inspect_tasks import vical
    from vical.serve import BaselineServer

    os.environ.setdefault("VICAL_API_KEY", "k")
    with BaselineServer() as srv:
        logs = inspect_eval(
            vical(tasks="cliffwalking/base"),
            model="openai-api/vical/expert",
            model_base_url=srv.openai_base_url,
            log_dir=str(folder / "logs"),
            display="none",
        )
    assert logs[0].status == "success", logs[0].error
    import_inspect_log(Path(logs[0].location), run)


def peak_rss_mib() -> float:
    """Peak resident memory of this process and of its finished children, in MiB.

    This process's own is its VmHWM (/proc/self/status): getrusage's ru_maxrss is not
    its own, as the kernel keeps the mark of the process that started it across fork
    and exec (nox, or a pytest worker of 1.5 GB). Its children are forked from it, so
    what they inherit is at most this process's own mark."""
    import resource

    status = Path("/proc/self/status").read_text().splitlines()
    own = next(int(ln.split()[1]) for ln in status if ln.startswith("VmHWM:"))
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000, help="mutations of each kind")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS), help="bundle kinds, comma-separated")
    args = ap.parse_args(argv)
    failed = False
    for kind in args.kinds.split(","):
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="vical-fuzz-src-") as tmp:
            src, pub, cases = honest_source(Path(tmp), kind)
            seeds = range(args.start, args.start + args.count)
            tally = campaign(src, pub, seeds, sys.stdout, cases)
        secs = time.perf_counter() - t0
        print(f"{kind}: mutations {sum(tally.values())} in {secs:.0f} s: " + ", ".join(
            f"{k} {tally.get(k, 0)}" for k in ("rejected", "mismatch", "accepted", *FAILURES)
        ) + f"; peak RSS so far {peak_rss_mib():.0f} MiB", flush=True)  # fmt: skip
        failed = failed or any(tally.get(k) for k in FAILURES)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
