"""README's Inspect AI section, as a new user runs it: a fresh venv, the section's
install line verbatim (from a checkout), its baseline-server command against `vical
serve-baseline`, then the import, `vical submit` and `vical verify` lines of README.
Everything runs in subprocesses of the fresh venv; this test imports no vical module.

Only the port differs from README (a free one instead of 8000, which may be taken),
and the log's path (`logs/run.eval` in README stands for the log Inspect wrote).
Slow (it installs Inspect, the simulators and their dependencies): `nox -s slow`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _inspect_block() -> list[str]:
    """The command lines of README's Inspect bash block, continuation lines joined."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Evaluating with Inspect AI") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    lines: list[str] = []
    pending = ""
    for raw in block.group(1).splitlines():
        if raw.strip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1]
            continue
        lines.append(pending + raw)
        pending = ""
    return lines


def _line(lines: list[str], needle: str) -> str:
    (found,) = [ln for ln in lines if needle in ln]
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: str, cwd: Path, env: dict[str, str], timeout: float = 1800) -> str:
    r = subprocess.run(
        cmd, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert r.returncode == 0, f"$ {cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout + r.stderr


def test_readme_inspect_lines_in_a_fresh_venv(tmp_path):
    lines = _inspect_block()
    install = _line(lines, "pip install")
    from_checkout = install.split("# from a checkout:", 1)[1].strip()
    assert from_checkout == "pip install -e '.[inspect]'"
    served = _line(lines, "openai-api/vical/expert")
    imported = _line(lines, "vical import-inspect")
    readme = (ROOT / "README.md").read_text()
    keygen = re.search(r"^vical keygen --out \S+", readme, re.M)
    submit = re.search(r"^vical submit runs/my-vlm [^#\n]+", readme, re.M)
    verify = re.search(r"^vical verify my-vlm\.tar\.gz [^#\n]+", readme, re.M)
    assert keygen and submit and verify

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "VICAL_", "INSPECT_"))
    }
    env.update(
        PATH=f"{venv / 'bin'}:{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        HOME=str(home),
        PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip"),  # the machine's cache, if any
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    checkout = tmp_path / "checkout"
    shutil.copytree(
        ROOT,
        checkout,
        ignore=shutil.ignore_patterns(".git", ".venv", ".nox", "runs", "__pycache__", "*.egg-info"),
    )
    _run(from_checkout, checkout, env)

    work = tmp_path / "work"
    work.mkdir()
    port = _free_port()
    server = subprocess.Popen(
        [str(venv / "bin" / "vical"), "serve-baseline", "--port", str(port)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        assert f"127.0.0.1:{port}" in banner, banner
        out = _run(served.replace(":8000/", f":{port}/"), work, env)
        assert "error:" not in out
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=HANG)
    (log,) = sorted((work / "logs").glob("*.eval"))
    _run(imported.replace("logs/run.eval", shlex.quote(str(log))), work, env)
    assert len(list((work / "runs" / "my-vlm" / "episodes").iterdir())) > 0
    _run(keygen.group(0), work, env)
    _run(submit.group(0).strip() + " --partial", work, env)
    r = subprocess.run(
        verify.group(0).strip(),
        shell=True,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert re.search(r"PASS: (\d+)/\1 episodes replay exactly", r.stdout), r.stdout[-2000:]
