"""The container engine the image tests drive, chosen as docker/build.sh chooses it.

With Podman the OCI runtime is the host's: ``$OCI_RUNTIME``, else crun, else runc,
skipping crun where it cannot run containers (cgroup v1 and v2 mixed, with controllers
in the v2 part). It reaches every podman command, including the README's lines run as
written, through ``CONTAINERS_CONF``: docker/containers.conf plus that runtime.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "docker" / "containers.conf"
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")  # where Debian puts runc; build.sh looks too


def _mount_types() -> dict[str, str]:
    """Mount point -> file-system type, as /proc/self/mountinfo has them (last one wins)."""
    types = {}
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return types
    for line in text.splitlines():
        before, _, after = line.partition(" - ")
        if after:
            types[before.split()[4]] = after.split()[0]
    return types


def crun_usable_here() -> bool:
    """False where crun refuses every container: a hybrid cgroup layout (tmpfs at
    /sys/fs/cgroup, cgroup2 at /sys/fs/cgroup/unified) whose v2 part has controllers."""
    types = _mount_types()
    controllers = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    hybrid = (
        types.get("/sys/fs/cgroup") == "tmpfs"
        and types.get("/sys/fs/cgroup/unified") == "cgroup2"
        and controllers.exists()
        and bool(controllers.read_text().strip())
    )
    return not hybrid


def oci_runtime() -> str | None:
    """The path of the OCI runtime Podman should use here (None: none installed)."""
    if os.environ.get("OCI_RUNTIME"):
        return shutil.which(os.environ["OCI_RUNTIME"]) or os.environ["OCI_RUNTIME"]
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    crun, runc = shutil.which("crun", path=path), shutil.which("runc", path=path)
    if crun and crun_usable_here():
        return crun
    return runc or crun


def podman_env(folder: Path) -> dict[str, str]:
    """The environment for podman commands: ``CONTAINERS_CONF`` names docker/containers.conf
    (or the one already set, as docker/build.sh keeps it) and the host's runtime (the
    two written together into ``folder``)."""
    env = dict(os.environ)
    base = Path(env.get("CONTAINERS_CONF") or CONF)
    runtime = oci_runtime()
    if runtime is None:
        env["CONTAINERS_CONF"] = str(base)
        return env
    name = Path(runtime).name
    conf = folder / "containers.conf"
    conf.write_text(
        base.read_text() + f'\n[engine]\nruntime = "{name}"\n\n[engine.runtimes]\n'
        f'{name} = ["{runtime}"]\n'
    )
    env["CONTAINERS_CONF"] = str(conf)
    return env
