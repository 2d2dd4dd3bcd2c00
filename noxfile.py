"""Maintainer sessions: ``nox -s <name>``. Each session builds its own virtualenv
from the lock file, so results do not depend on the machine's packages."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True
PY = "3.11"
LOCK = "requirements.lock"


def _install(session: nox.Session, extras: str = "all,dev") -> None:
    session.install("-c", LOCK, "-e", f".[{extras}]")


@nox.session(python=PY)
def tests(session: nox.Session) -> None:
    """The default test suite (the same command as .ci/run)."""
    _install(session)
    session.run("python", "-m", "pytest", "-n", "2", *session.posargs)


@nox.session(python=PY)
def durations(session: nox.Session) -> None:
    """Run the default suite on an idle machine and record its times in
    tests/data/durations.json (wall time, slowest tests): the suite's 12-minute budget."""
    _install(session)
    session.run("python", "benchmarks/durations.py", *session.posargs)


@nox.session(python=PY)
def slow(session: nox.Session) -> None:
    """Heavy sweeps: every task x 3 random runs, the full dataset build."""
    _install(session)
    session.run("python", "-m", "pytest", "-n", "2", "-m", "slow", *session.posargs)


@nox.session(python=PY)
def ray(session: nox.Session) -> None:
    """`vical eval --executor ray` against Ray clusters the tests start on 127.0.0.1: a
    worker killed mid-run, Ctrl-C and resume, a sharded run through a head started with
    `ray start --head` equal to a local run (with token authentication off, the pinned
    Ray's default), one error line for a cluster that cannot start or be reached, and
    for a head killed mid-run (tests marked ray). Installs the ray extra (pinned in the lock),
    which `all` leaves out."""
    _install(session, "all,dev,ray")
    session.run(
        "python", "-m", "pytest", "-m", "ray", "tests/test_run_ray_executor.py", *session.posargs
    )


@nox.session(python=PY)
def lint(session: nox.Session) -> None:
    """ruff lint and format check, mypy, and the layering contracts (lint-imports).

    Every tool comes at its version in the lock (ruff's is also the pre-commit hook's
    rev); mypy needs the package and its dependencies installed to follow imports."""
    _install(session)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "vical")
    session.run("lint-imports")


@nox.session(python=PY)
def baseline(session: nox.Session) -> None:
    """The random reference: every task, 3 runs, into runs/random-baseline."""
    _install(session)
    session.run("vical", "baseline", "random", "--out", "runs/random-baseline", *session.posargs)


@nox.session(python=PY)
def dataset(session: nox.Session) -> None:
    """Build the Hugging Face dataset folder and check that it loads back."""
    _install(session)
    session.run("vical", "dataset", "build", "--out", "build/dataset", *session.posargs)
    session.run("vical", "dataset", "verify", "build/dataset")
    session.run("vical", "dataset", "stats")


@nox.session(python=PY)
def wm(session: nox.Session) -> None:
    """World-model track: the cases built twice (byte-identical), every exact read-back,
    the HTTP world model end to end; then every reference model (the controls and the
    adversarial ones) under the cases' own interventions and copy-last and the simulator
    under the no-op and shuffled controls, and their report. WM_CONTEXTS (default 10:
    all 400 cases) sets the contexts per scenario; the README's table used 4."""
    _install(session)
    tests = [f"tests/test_wm_{m}.py" for m in ("cases", "readback", "score", "http")]
    session.run("python", "-m", "pytest", "-m", "slow or not slow", *tests, *session.posargs)
    contexts = os.environ.get("WM_CONTEXTS", "10")
    session.run("vical", "wm", "build", "--out", "build/wm", "--contexts", contexts)
    # (run name, world model, intervention), each scored against its own target
    models = [
        "simulator", "copy-last", "fixed-action", "all-action-average", "context-mean",
        "blurred-copy-last", "other-case", "branch-swap", "blurred-truth",
    ]  # fmt: skip
    plan = [(m, m, "own") for m in models]
    plan += [(f"{m}-{c}", m, c) for c in ("noop", "shuffled") for m in ("copy-last", "simulator")]
    runs = []
    for name, model, control in plan:
        run = f"runs/wm-{name}"
        runs.append(run)
        session.run(
            "vical", "wm", "eval", "--wm", model, "--control", control,
            "--cases", "build/wm", "--out", run,
        )  # fmt: skip
    session.run("vical", "wm", "report", *runs, "--out", "runs/wm-report.md")


@nox.session(python=PY)
def verify(session: nox.Session) -> None:
    """Verify every bundle in a folder (default: incoming/) by replay."""
    _install(session)
    folder = Path(session.posargs[0] if session.posargs else "incoming")
    bundles = sorted(folder.glob("*.tar.gz"))
    if not bundles:
        session.error(f"no *.tar.gz bundles in {folder}")
    for b in bundles:
        session.run("vical", "verify", str(b))


@nox.session(python=PY)
def leaderboard(session: nox.Session) -> None:
    """Rebuild the static leaderboard site from submissions/."""
    _install(session)
    session.run("vical", "leaderboard", "build", "--out", "site", *session.posargs)


@nox.session(python=PY)
def image(session: nox.Session) -> None:
    """Build the pinned image (docker or podman, with the host's OCI runtime), run an
    evaluation inside it, and test it: installed versions equal the lock; one-command
    submit through the Docker SDK verifies; README's `docker run ... vical eval` line runs
    as written against the baseline server on the host, survives a `stop` and resumes."""
    engine = shutil.which("docker") or shutil.which("podman")
    if engine is None:
        session.error("neither docker nor podman is installed")
    session.run("bash", "docker/build.sh", external=True)
    _install(session)
    session.run("python", "-m", "pytest", "-m", "image", "tests/test_image.py", *session.posargs)


# The LiteLLM proxy the interop session runs against: pinned, and installed in a
# virtualenv of its own (its dependencies are not vical's, nor in the lock).
LITELLM = "litellm[proxy]==1.108.7"


@nox.session(python=PY)
def interop(session: nox.Session) -> None:
    """vical against third-party implementations: a LiteLLM proxy for both OpenAI APIs,
    ffprobe over every MP4 of a full dataset build, OpenSSL over a bundle signature, and
    Gymnasium's check_env over every environment (see README, "Interoperability")."""
    if shutil.which("ffprobe") is None:
        session.error("ffprobe is missing: apt-get install ffmpeg")
    if shutil.which("openssl") is None:
        session.error("openssl is missing: apt-get install openssl")
    _install(session)
    proxy_env = Path(session.cache_dir) / "litellm"
    if not (proxy_env / "bin" / "litellm").exists():
        session.run("python", "-m", "venv", str(proxy_env))
        session.run(str(proxy_env / "bin" / "pip"), "install", "-q", LITELLM, external=True)
    dataset = Path("build/interop-dataset")
    session.run("vical", "dataset", "build", "--out", str(dataset))
    session.run(
        "python",
        "-m",
        "pytest",
        "-n",
        "2",
        "-m",
        "not slow and not image",
        "tests/test_interop.py",
        "tests/test_gym.py",
        "tests/test_submit_openssl.py",
        *session.posargs,
        env={
            "VICAL_LITELLM": str(proxy_env / "bin" / "litellm"),
            "VICAL_INTEROP_DATASET": str(dataset),
        },
    )


@nox.session(python=PY)
def hub(session: nox.Session) -> None:
    """`vical hub` under stress: kill -9 of a worker mid-job and of the server mid-upload,
    20 times each, on SQLite and on PostgreSQL (set VICAL_TEST_POSTGRES, e.g.
    `eval "$(bash .ci/postgres.sh)"`), then the load benchmark: 200 concurrent uploads of
    5 MiB bundles and a 2 GiB upload refused at the cap (benchmarks/README.md)."""
    _install(session)
    session.run("python", "-m", "pytest", "-m", "slow", "tests/test_hub_e2e.py", *session.posargs)
    session.run("python", "benchmarks/hub_load.py")


@nox.session(python=PY)
def lock(session: nox.Session) -> None:
    """Pin what pyproject.toml added to requirements.lock, keeping every existing pin
    (``nox -s lock -- --upgrade`` re-resolves everything; review the diff either way)."""
    # the ray extra too: `all` leaves it out, but `nox -s ray` installs it from the lock
    if "--upgrade" in session.posargs:
        session.install("-e", ".[all,dev,ray]")
    else:
        session.install("-c", LOCK, "-e", ".[all,dev,ray]")
    # --all keeps setuptools (a runtime dependency of the dataset extra); pip is the
    # installer, not a dependency
    out = session.run(
        "python",
        "-m",
        "pip",
        "freeze",
        "--all",
        "--exclude",
        "pip",
        "--exclude-editable",
        silent=True,
    )
    Path(LOCK).write_text(
        "# generated by `nox -s lock`; pins every package of .[all,dev,ray]\n" + out
    )


@nox.session(python=PY)
def fuzz(session: nox.Session) -> None:
    """The bundle mutation fuzzer's large run: 10,000 mutations of each bundle kind (run,
    expert, inspect, wm, coupled; pass --count N, --kinds a,b)."""
    _install(session)
    session.chdir("tests")
    session.run("python", "-m", "fuzz_bundles.mutate", *(session.posargs or ["--count", "10000"]))
