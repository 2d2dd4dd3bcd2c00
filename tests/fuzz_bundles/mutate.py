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

``python -m fuzz_bundles.mutate --count 10000`` (from ``tests/``) runs the large
campaign; ``nox -s fuzz`` does the same.
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
    logs = [n for n in names if n.endswith("log.jsonl")]
    jsons = [n for n in names if n.endswith(".json")]
    op = rng.choice(
        ["flip", "json", "json", "record", "record", "log-delete", "log-dup", "log-swap",
         "manifest", "deep-line"]
    )  # fmt: skip
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


def ranked_fields(verdict: Any) -> dict[str, Any]:
    """What a leaderboard cell, the condition and the coverage are made of."""
    return {
        "results": sorted(
            (r.task_id, r.run_index, r.score, r.passed, r.outcome, str(r.failure_mode), r.steps)
            for r in verdict.results
        ),
        "condition": verdict.condition,
        "partial": verdict.partial,
        "missing": sorted(verdict.manifest.get("missing_tasks", [])),
    }


def run_one(
    src: Source, pub: Path, seed: int, base: dict[str, Any], scratch: Path
) -> tuple[str, str]:
    """(outcome, description) of mutation ``seed``."""
    from vical.submit import leaderboard
    from vical.submit.verify import VerifyError, verify_bundle

    rng = random.Random(seed)
    manifest, files, desc = mutate(src, rng)
    out = scratch / f"m{seed}.tar.gz"
    write_mutant(src, manifest, files, out)

    def alarm(*_: Any) -> None:
        raise _Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        v = verify_bundle(out, pubkeys=[pub], keyring=None, workers=1, progress=False)
        if not v.ok:
            return "mismatch", desc
        if ranked_fields(v) != base:
            return "changed", desc
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
        if "\n" in str(e):
            return "traceback", f"{desc}: multi-line verdict {str(e)[:200]!r}"
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


def campaign(src: Source, pub: Path, seeds: range, log: Any = None) -> Counter[str]:
    """Run mutations ``seeds``; the tally of outcomes (failures printed to ``log``)."""
    import shutil

    from vical.submit.verify import verify_bundle

    with tempfile.TemporaryDirectory(prefix="vical-fuzz-") as tmp:
        scratch = Path(tmp)
        honest = scratch / "honest.tar.gz"
        write_mutant(src, copy.deepcopy(src.manifest), dict(src.files), honest)
        v = verify_bundle(honest, pubkeys=[pub], keyring=None, workers=1, progress=False)
        assert v.ok, "the honest bundle must verify"
        base = ranked_fields(v)
        tally: Counter[str] = Counter()
        for seed in seeds:
            outcome, desc = run_one(src, pub, seed, base, scratch)
            tally[outcome] += 1
            if outcome in FAILURES and log is not None:
                print(f"seed {seed}: {outcome}: {desc}", file=log, flush=True)
            if log is not None and sum(tally.values()) % 250 == 0:
                print(f"after {sum(tally.values())}: {dict(tally)}", file=log, flush=True)
            for p in scratch.iterdir():
                if p.name != "honest.tar.gz":
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
        return tally


def honest_source(folder: Path) -> tuple[Source, Path]:
    """An honest model-backend bundle (the baseline server, demonstrations shown, two
    tasks) and its public key, made in ``folder``."""
    from fuzz_bundles.generate import load_source
    from vical.run import RunOptions, run_eval
    from vical.serve import BaselineServer
    from vical.spec import select_tasks
    from vical.submit.bundle import make_bundle
    from vical.submit.keys import keygen, load_private

    priv, pub = keygen(folder / "team")
    with BaselineServer() as srv:
        run_eval(
            select_tasks("taxi/state1,cliffwalking/base"),
            folder / "run",
            agent="openai-chat",
            agent_kwargs={"endpoint": srv.openai_base_url, "model": "baseline"},
            options=RunOptions(workers=1, progress=False),
        )
    make_bundle(folder / "run", priv, folder / "b.tar.gz", team="Team A", partial=True)
    return load_source(folder / "b.tar.gz", load_private(priv)), pub


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vical-fuzz-src-") as tmp:
        src, pub = honest_source(Path(tmp))
        tally = campaign(src, pub, range(args.start, args.start + args.count), sys.stdout)
    secs = time.perf_counter() - t0
    print(f"mutations {sum(tally.values())} in {secs:.0f} s: " + ", ".join(
        f"{k} {tally.get(k, 0)}" for k in ("rejected", "mismatch", "accepted", *FAILURES)
    ))  # fmt: skip
    if any(tally.get(k) for k in FAILURES):
        sys.exit(1)


if __name__ == "__main__":
    main()
