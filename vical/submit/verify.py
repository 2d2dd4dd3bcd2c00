"""``vical verify``: trust a bundle's numbers without re-running the model.

Checks, in order, stopping at the first stage that fails:

1. safe unpacking: regular files only (no links, devices or folders outside),
   no absolute paths, no ``..``, every path under ``bundle/``, caps on total
   size and file count (archive bombs);
2. manifest and signature: every file listed with a matching sha256 and no
   unlisted file; the Ed25519 signature verifies with a trusted public key;
3. schema of every run file (run manifest, every ``eval_result.json``);
4. dataset version known (the bundle's task digest equals this vical's);
5. task coverage (every task present, unless the bundle says it is partial);
6. replay: every episode's logged actions are replayed in the simulator, in
   parallel; frame hashes, score, pass and outcome must equal the claims.

Replay runs through :func:`vical.run.pool.run_pool`: Ctrl-C (SIGINT) or
SIGTERM raises :class:`vical.run.pool.Interrupted` within a few seconds with
no replay worker left running. Verification only reads the bundle, so an
interrupted check leaves nothing behind and can simply be run again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from vical.run.results import EvalResult, RunManifest
from vical.spec import all_tasks, tasks_digest
from vical.submit.bundle import BUNDLE_FORMAT, TOP
from vical.submit.keys import KeyError_, check, key_id, load_public

MAX_TOTAL_BYTES = 4 * 1024**3
MAX_FILES = 200_000
DEFAULT_KEYRING = Path("submissions") / "keys"


class VerifyError(ValueError):
    """A bundle failed a check; the message names the check and what is wrong."""

    def __init__(self, stage: str, msg: str):
        super().__init__(f"[{stage}] {msg}")
        self.stage = stage


@dataclass
class EpisodeVerdict:
    episode: str
    ok: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    ok: bool
    manifest: dict[str, Any]
    episodes: list[EpisodeVerdict]
    partial: bool
    signer: str
    results: list[EvalResult] = field(default_factory=list)

    @property
    def mismatches(self) -> list[EpisodeVerdict]:
        return [e for e in self.episodes if not e.ok]


# -- 1. safe unpacking ------------------------------------------------------
def safe_extract(
    bundle: Path, dest: Path, max_bytes: int = MAX_TOTAL_BYTES, max_files: int = MAX_FILES
) -> None:
    """Extract regular files only, refusing anything that could escape ``dest``."""
    try:
        tar = tarfile.open(bundle, "r:*")  # noqa: SIM115 - closed by the with below
    except (tarfile.TarError, OSError) as e:
        raise VerifyError("unpack", f"{bundle}: not a readable tar archive ({e})") from None
    total = 0
    count = 0
    with tar:
        for m in tar:
            name = m.name
            p = PurePosixPath(name)
            if name.startswith("/") or p.is_absolute():
                raise VerifyError("unpack", f"absolute path in archive: {name!r}")
            if ".." in p.parts:
                raise VerifyError("unpack", f"path with '..' in archive: {name!r}")
            if m.issym() or m.islnk():
                raise VerifyError("unpack", f"link in archive: {name!r} -> {m.linkname!r}")
            if m.isdir():
                continue
            if not m.isfile():
                raise VerifyError("unpack", f"special file (device/fifo) in archive: {name!r}")
            if not p.parts or p.parts[0] != TOP:
                raise VerifyError("unpack", f"file outside '{TOP}/' in archive: {name!r}")
            count += 1
            total += m.size
            if count > max_files:
                raise VerifyError("unpack", f"more than {max_files} files: refusing")
            if total > max_bytes:
                raise VerifyError("unpack", f"content exceeds {max_bytes} bytes: refusing")
            target = dest.joinpath(*p.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            assert src is not None
            written = 0
            with open(target, "wb") as f:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > m.size:
                        raise VerifyError("unpack", f"{name!r} is larger than declared")
                    f.write(chunk)


# -- 2. manifest and signature ---------------------------------------------
def load_keyring(pubkeys: list[Path] | None, keyring: Path | None) -> dict[str, Any]:
    keys = {}
    paths = list(pubkeys or [])
    if not paths and keyring is not None and keyring.is_dir():
        paths = sorted(keyring.glob("*.pub"))
    for p in paths:
        try:
            k = load_public(Path(p).read_bytes(), str(p))
        except OSError as e:
            raise VerifyError("signature", f"cannot read public key {p}: {e}") from None
        keys[key_id(k)] = k
    return keys


def check_manifest(root: Path, trusted: dict[str, Any]) -> tuple[dict[str, Any], str]:
    mpath, spath = root / "manifest.json", root / "manifest.sig"
    if not mpath.exists() or not spath.exists():
        raise VerifyError("manifest", "bundle/manifest.json or bundle/manifest.sig is missing")
    mbytes = mpath.read_bytes()
    try:
        manifest = json.loads(mbytes)
        sig = json.loads(spath.read_text())
    except json.JSONDecodeError as e:
        raise VerifyError("manifest", f"manifest or signature is not JSON: {e}") from None
    if manifest.get("format") != BUNDLE_FORMAT:
        raise VerifyError("manifest", f"unknown bundle format {manifest.get('format')!r}")
    listed = manifest.get("files", {})
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    present -= {"manifest.json", "manifest.sig"}
    extra = sorted(present - set(listed))
    if extra:
        raise VerifyError("manifest", f"files not listed in the manifest: {extra[:5]}")
    for rel, digest in sorted(listed.items()):
        f = root / rel
        if not f.exists():
            raise VerifyError("manifest", f"listed file missing from the bundle: {rel}")
        if hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            raise VerifyError("manifest", f"sha256 mismatch (file changed after packing): {rel}")
    if not trusted:
        raise VerifyError(
            "signature",
            "no trusted public key: pass --pubkey FILE or put the "
            f"submitter's key in {DEFAULT_KEYRING}/",
        )
    try:
        signer = load_public(sig.get("public_key", "").encode(), "bundle signer key")
    except KeyError_ as e:
        raise VerifyError("signature", str(e)) from None
    kid = key_id(signer)
    if kid not in trusted:
        raise VerifyError(
            "signature",
            f"bundle signed by unknown key {kid}; trusted keys: "
            f"{', '.join(sorted(trusted)) or 'none'}",
        )
    if not check(trusted[kid], mbytes, sig.get("signature", "")):
        raise VerifyError(
            "signature",
            f"signature does not match manifest.json (key {kid}): "
            "the manifest was changed after signing",
        )
    return manifest, kid


# -- 3-5. schema, dataset version, coverage ----------------------------------
def check_contents(root: Path, manifest: dict[str, Any]) -> list[EvalResult]:
    try:
        RunManifest.model_validate_json((root / "run" / "manifest.json").read_text())
    except (OSError, ValidationError) as e:
        raise VerifyError("schema", f"run/manifest.json: {e}") from None
    results = []
    for p in sorted((root / "run" / "episodes").glob("*/eval_result.json")):
        try:
            r = EvalResult.model_validate_json(p.read_text())
        except ValidationError as e:
            raise VerifyError("schema", f"{p.relative_to(root)}: {e}") from None
        expected = f"{r.env}__{r.variant}__r{r.run_index}"
        if p.parent.name != expected or r.task_id != f"{r.env}/{r.variant}":
            raise VerifyError("schema", f"{p.relative_to(root)}: folder and ids disagree")
        results.append(r)
    digest = manifest.get("fingerprint", {}).get("tasks_digest")
    if digest != tasks_digest():
        raise VerifyError(
            "dataset",
            f"task data {str(digest)[:12]} is not this vical's "
            f"({tasks_digest()[:12]}); verify with the matching vical",
        )
    done = {r.task_id for r in results}
    known = {t.id for t in all_tasks()}
    unknown = sorted(done - known)
    if unknown:
        raise VerifyError("coverage", f"results for unknown tasks: {unknown[:5]}")
    missing = sorted(known - done)
    if missing and not manifest.get("partial"):
        raise VerifyError(
            "coverage",
            f"{len(missing)} task(s) missing while the bundle claims "
            f"to be complete: {missing[:10]}",
        )
    if sorted(manifest.get("missing_tasks", [])) != missing:
        raise VerifyError(
            "coverage", "the manifest's missing-task list does not match the episodes present"
        )
    return results


# -- 6. replay ---------------------------------------------------------------
def replay_one(result_json: str) -> tuple[str, list[str]]:
    """Replay one episode's actions; return (episode name, list of problems)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    from vical.envs import make_env
    from vical.envs.core import frame_sha256

    r = EvalResult.model_validate_json(result_json)
    name = f"{r.env}__{r.variant}__r{r.run_index}"
    problems = []
    env = make_env(r.task_id)
    try:
        hashes = [frame_sha256(env.reset())]
        for i, a in enumerate(r.actions):
            if env.done:
                problems.append(f"episode ended before logged action {i + 1}")
                break
            try:
                hashes.append(env.step(a).frame_sha256)
            except ValueError as e:
                problems.append(f"action {i + 1} {a!r} rejected: {e}")
                break
        if hashes != r.frame_hashes:
            first = next(
                (i for i, (x, y) in enumerate(zip(hashes, r.frame_hashes, strict=False)) if x != y),
                min(len(hashes), len(r.frame_hashes)),
            )
            problems.append(f"frame hashes differ from frame {first}")
        if env.score() != r.score:
            problems.append(f"score claimed {r.score}, replay gives {env.score()}")
        if env.passed() != r.passed:
            problems.append(f"pass claimed {r.passed}, replay gives {env.passed()}")
        agent_ended = r.failure_mode in ("invalid_action", "token_overflow", "api_error")
        if not agent_ended and env.outcome != r.outcome:
            problems.append(f"outcome claimed {r.outcome}, replay gives {env.outcome}")
        if r.steps != len(r.actions):
            problems.append(f"steps {r.steps} but {len(r.actions)} actions logged")
    finally:
        env.close()
    return name, problems


def _replay_indexed(job: tuple[int, str]) -> tuple[int, str, list[str]]:
    """:func:`replay_one` for a numbered job, so results can be put back in order."""
    index, result_json = job
    name, problems = replay_one(result_json)
    return index, name, problems


def verify_bundle(
    bundle: Path,
    pubkeys: list[Path] | None = None,
    keyring: Path | None = DEFAULT_KEYRING,
    workers: int | None = None,
    progress: bool = True,
) -> Verdict:
    """Run every check; raise :class:`VerifyError` for a failed stage before replay.

    Episode verdicts come back in the order of the bundle's episode folders
    whatever the number of workers. A replay that crashes counts as a
    mismatch. Raises :class:`vical.run.pool.Interrupted` on SIGINT/SIGTERM
    during replay (``KeyboardInterrupt`` before it); the temporary unpack
    folder is removed either way.
    """
    from vical.run.pool import run_pool

    with tempfile.TemporaryDirectory(prefix="vical-verify-") as tmp:
        safe_extract(Path(bundle), Path(tmp))
        root = Path(tmp) / TOP
        trusted = load_keyring(pubkeys, keyring)
        manifest, signer = check_manifest(root, trusted)
        results = check_contents(root, manifest)
        payloads = [r.model_dump_json() for r in results]
    names = [f"{r.env}__{r.variant}__r{r.run_index}" for r in results]
    found: dict[int, EpisodeVerdict] = {}
    workers = max(1, min(workers or os.cpu_count() or 1, len(payloads) or 1))
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(
        TextColumn("[bold]replay[/]"), BarColumn(), MofNCompleteColumn(), disable=not progress
    )

    def on_result(
        job: tuple[int, str], value: tuple[int, str, list[str]] | None, error: BaseException | None
    ) -> bool:
        index = job[0]
        if error is not None:
            problems = [f"replay crashed: {type(error).__name__}: {error}"]
            found[index] = EpisodeVerdict(names[index], False, problems)
        else:
            assert value is not None
            _, name, problems = value
            found[index] = EpisodeVerdict(name, not problems, problems)
        bar.advance(pid)
        return True

    with bar:
        pid = bar.add_task("", total=len(payloads))
        run_pool(_replay_indexed, list(enumerate(payloads)), workers, on_result)
    verdicts = [found[i] for i in sorted(found)]
    ok = len(verdicts) == len(payloads) and all(v.ok for v in verdicts)
    return Verdict(
        ok=ok,
        manifest=manifest,
        episodes=verdicts,
        partial=bool(manifest.get("partial")),
        signer=signer,
        results=results,
    )
