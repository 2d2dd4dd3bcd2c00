"""``vical submit``: pack a run into a signed results bundle.

A bundle is a gzip tar with one top folder ``bundle/``; the two manifest files
are always its first two members, so a verifier reads and checks them before
touching anything else::

    bundle/manifest.json   format, files, fingerprint, submitter, summary
    bundle/manifest.sig    JSON: key id, public key (PEM), Ed25519 signature of manifest.json
    bundle/run/manifest.json
    bundle/run/episodes/<env>__<variant>__r<k>/eval_result.json, log.jsonl, media/...

Manifest format 2 lists every other file with its sha256 and its exact size in
bytes, ``"files": {"run/manifest.json": {"sha256": "<64 hex>", "size": 1234}, ...}``
(paths relative to ``bundle/``), so a verifier knows how much it may write before it
extracts anything. Format 1 (``path -> sha256``) is no longer accepted.

Frames and trajectory sheets are left out: replay regenerates every frame, and
each result carries the sha256 of every frame it showed.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from vical import __version__
from vical.errors import VicalError
from vical.outcomes import episode_name
from vical.outcomes import short_tasks as outcome_short_tasks
from vical.run.results import RunManifest, load_results
from vical.spec import all_tasks, tasks_digest
from vical.submit.keys import key_id, load_private, public_pem, sign

BUNDLE_FORMAT = 2
TOP = "bundle"
EPISODE_FILES = ("eval_result.json", "log.jsonl")
# the lock ships inside the wheel; an editable checkout reads it from the repository root
_PKG_LOCK = Path(__file__).resolve().parents[1] / "requirements.lock"
LOCK_FILE = _PKG_LOCK if _PKG_LOCK.exists() else _PKG_LOCK.parents[1] / "requirements.lock"


class BundleError(VicalError, ValueError):
    """The run cannot be bundled; the message says why and what to do."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_entry(data: bytes) -> dict[str, Any]:
    """A file's entry in the manifest's ``files`` table: its sha256 and size."""
    return {"sha256": sha256_bytes(data), "size": len(data)}


def locked_versions(lock: Path = LOCK_FILE) -> dict[str, str]:
    """Installed versions of every package the lock file pins (name -> version or 'missing')."""
    if not lock.exists():
        return {}
    out = {}
    for line in lock.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "==" not in line:
            continue
        name = line.split("==")[0].strip()
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "missing"
    return out


def run_machine(run_manifest: RunManifest | None = None) -> dict[str, Any]:
    """The machine that played a run, with its self-check (``doctor``) and ``source``.

    From the run manifest where it recorded them; otherwise (older manifests, runs
    started from the library) this machine, and the quick self-check run here now.
    """
    from vical.run.doctor import run_doctor
    from vical.run.machine import machine

    if run_manifest is not None and run_manifest.machine is not None:
        out = {**run_manifest.machine, "source": "run manifest"}
    else:
        out = {**machine(), "source": "computed at submit"}
    if run_manifest is not None and run_manifest.doctor is not None:
        out["doctor"] = run_manifest.doctor
    else:
        out["doctor"] = {**run_doctor(quick=True, cached=True).manifest_entry()}
        out["doctor"]["source"] = "computed at submit"
    return out


def fingerprint(run_manifest: RunManifest | None = None) -> dict[str, Any]:
    """Everything that determines how episodes replay: versions, ROMs, task data, image,
    and the machine (:func:`run_machine`), so a verifier can compare it with its own."""
    from vical.run.runner import image_info

    fp: dict[str, Any] = {
        "vical_version": __version__,
        "python": sys.version.split()[0],
        "packages": locked_versions(),
        "lock_sha256": sha256_bytes(LOCK_FILE.read_bytes()) if LOCK_FILE.exists() else None,
        "tasks_digest": tasks_digest(),
        "image": image_info(),
        "machine": run_machine(run_manifest),
    }
    try:
        from vical.envs.ale import rom_md5s

        fp["rom_md5"] = rom_md5s()
    except ImportError:
        fp["rom_md5"] = None
    return fp


def missing_episodes(run_dir: Path) -> list[str]:
    """Tasks of this vical version without a finished episode in the run."""
    done = {r.task_id for r in load_results(run_dir)}
    return [t.id for t in all_tasks() if t.id not in done]


def short_tasks(run_dir: Path, runs_per_task: int) -> list[str]:
    """Tasks present in the run without all of its declared runs (0..R-1) as results."""
    return outcome_short_tasks(load_results(run_dir), runs_per_task)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def collect_files(run_dir: Path) -> dict[str, bytes]:
    """The run files a bundle carries, keyed by their path inside ``bundle/``."""
    files: dict[str, bytes] = {"run/manifest.json": (run_dir / "manifest.json").read_bytes()}
    keep = {episode_name(r.task_id, r.run_index) for r in load_results(run_dir)}
    for ep in sorted((run_dir / "episodes").iterdir()):
        if ep.name not in keep:  # unfinished, or ended by an infrastructure failure
            continue
        for name in EPISODE_FILES:
            p = ep / name
            if p.exists():
                files[f"run/episodes/{ep.name}/{name}"] = p.read_bytes()
        media = ep / "media"
        if media.is_dir():
            for m in sorted(media.iterdir()):
                files[f"run/episodes/{ep.name}/media/{m.name}"] = m.read_bytes()
    return files


def make_bundle(
    run_dir: Path,
    key_path: Path,
    out: Path,
    team: str,
    partial: bool = False,
    model: str | None = None,
) -> dict[str, Any]:
    """Pack and sign ``run_dir``; returns the bundle manifest."""
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").exists():
        raise BundleError(f"{run_dir}: no manifest.json; is this a `vical eval` run folder?")
    run_manifest = RunManifest.model_validate_json((run_dir / "manifest.json").read_text())
    if run_manifest.tasks_digest != tasks_digest():
        raise BundleError(
            f"{run_dir} was run on task data {run_manifest.tasks_digest[:12]}, but this vical "
            f"has {tasks_digest()[:12]}; re-run the evaluation with this version"
        )
    if run_manifest.shard is not None:
        sh = run_manifest.shard
        raise BundleError(
            f"{run_dir} is shard {sh.index}/{sh.count} of a sharded evaluation; merge all "
            f"{sh.count} shards first (vical merge SHARD... --out RUN) and bundle the merged run"
        )
    short = short_tasks(run_dir, run_manifest.runs_per_task)
    if short:
        shown = ", ".join(short[:10]) + (" ..." if len(short) > 10 else "")
        raise BundleError(
            f"{run_dir}: {len(short)} task(s) lack some of the run's {run_manifest.runs_per_task} "
            f"run(s) (an unfinished run or infrastructure failures): {shown}. Re-run `vical "
            "eval` with the same --out to finish them"
        )
    missing = missing_episodes(run_dir)
    if missing and not partial:
        shown = ", ".join(missing[:20]) + (" ..." if len(missing) > 20 else "")
        raise BundleError(
            f"{run_dir} is missing {len(missing)} task(s) for leaderboard eligibility: {shown}. "
            "Finish the run (re-run `vical eval` with the same --out), or pass --partial"
        )
    key = load_private(key_path)
    files = collect_files(run_dir)
    from vical.report.table import build_report

    condition = run_condition(run_manifest)
    summary = build_report(
        load_results(run_dir), run_manifest.run_id, condition=condition
    ).model_dump()
    settings = run_manifest.agent_settings
    manifest = {
        "format": BUNDLE_FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "partial": bool(missing),
        "missing_tasks": missing,
        "submitter": {
            "team": team,
            "model": model or settings.get("model") or run_manifest.agent,
            "endpoint_kind": run_manifest.agent,
            "generation": {
                k: v for k, v in settings.items() if k not in ("endpoint", "api_key", "api_key_env")
            },
            "date": run_manifest.created_at,
        },
        "fingerprint": fingerprint(run_manifest),
        # the ablation condition (paper Table 5): only basic rules with demonstrations
        # is ranked on the leaderboard; verify checks every log against it
        "condition": condition,
        "summary": summary,
        "files": {p: file_entry(b) for p, b in sorted(files.items())},
    }
    write_signed(manifest, files, key, Path(out))
    return manifest


def run_condition(run: RunManifest) -> dict[str, Any]:
    """The condition a run declares: rules text, demonstrations and, for a coupled run
    (``vical wm couple``), its world model (without the endpoint); a run with a world
    model is never the leaderboard's default condition."""
    condition: dict[str, Any] = {"rules": run.rules, "demos": run.demos}
    if run.world_model is not None:
        from vical.wm.couple import result_condition

        condition["world_model"] = result_condition(run.world_model)
    return condition


def write_signed(manifest: dict[str, Any], files: dict[str, bytes], key: Any, out: Path) -> None:
    """Sign ``manifest`` and write the bundle: manifest, signature, then ``files``."""
    mbytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    pub = key.public_key()
    sig = {
        "key_id": key_id(pub),
        "public_key": public_pem(pub).decode(),
        "signature": sign(key, mbytes),
        "algorithm": "ed25519",
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    try:
        with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            # manifest and signature first: verify reads them without scanning the rest
            _add(tar, f"{TOP}/manifest.json", mbytes)
            _add(tar, f"{TOP}/manifest.sig", (json.dumps(sig, indent=2) + "\n").encode())
            for p, data in sorted(files.items()):
                _add(tar, f"{TOP}/{p}", data)
        tmp.replace(out)
    except BaseException:  # Ctrl-C/SIGTERM or a full disk while packing: no half bundle
        tmp.unlink(missing_ok=True)
        raise


# -- world-model results ---------------------------------------------------------------
WM_KIND = "wm"


def collect_wm_files(run_dir: Path) -> dict[str, bytes]:
    """A world-model run's files (manifest, scores, summary, every predicted frame) under ``wm/``."""
    files = {}
    for p in sorted(run_dir.rglob("*")):
        if p.is_file() and not p.name.endswith(".tmp"):
            files[f"wm/{p.relative_to(run_dir).as_posix()}"] = p.read_bytes()
    return files


def make_wm_bundle(
    run_dir: Path, key_path: Path, out: Path, team: str, model: str | None = None
) -> dict[str, Any]:
    """Pack and sign a scored world-model run (``vical wm eval``); returns the manifest.

    The manifest has the fields of a run bundle (``kind: "wm"``; ``summary`` is the
    run's ``summary.json``) and lists the run's files under ``wm/``; ``vical verify``
    re-derives every case's truth from the simulator and re-scores the predictions.
    """
    from vical.wm.evaluate import MANIFEST, SUMMARY

    run_dir = Path(run_dir)
    if not (run_dir / SUMMARY).is_file() or not (run_dir / MANIFEST).is_file():
        raise BundleError(
            f"{run_dir}: not a scored world-model run (no {MANIFEST} and {SUMMARY}); "
            "make one with `vical wm eval`"
        )
    run_manifest = json.loads((run_dir / MANIFEST).read_text())
    key = load_private(key_path)
    files = collect_wm_files(run_dir)
    manifest = {
        "format": BUNDLE_FORMAT,
        "kind": WM_KIND,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "partial": False,
        "missing_tasks": [],
        "submitter": {
            "team": team,
            "model": model or str(run_manifest["model"]),
            "endpoint_kind": str(run_manifest["model"]),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
        },
        "fingerprint": fingerprint(),
        "summary": json.loads((run_dir / SUMMARY).read_text()),
        "files": {p: file_entry(b) for p, b in sorted(files.items())},
    }
    write_signed(manifest, files, key, Path(out))
    return manifest
