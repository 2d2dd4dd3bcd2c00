"""This machine as far as float results go: CPU, numpy's dispatch, library versions.

:func:`machine` describes the machine a run was made on (the run manifest and the
bundle's fingerprint carry its compact form; ``vical doctor`` prints the full one)
and :func:`machine_lines` writes it for an 80-column terminal, so a verifier whose
replay disagrees can show both machines side by side.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any

from vical import __version__

# what the doctor prints about the machine: library versions and numeric switches
LIBRARIES = ("numpy", "gymnasium", "highway-env", "ale-py", "procgen2", "pygame-ce", "pygame")
NUMERIC_ENV_VARS = ("NPY_DISABLE_CPU_FEATURES", "GLIBC_TUNABLES", "OPENBLAS_CORETYPE")
# /proc/cpuinfo flags that decide which float code paths run (SSE3 is "pni" there)
CPU_FLAGS = (
    "sse2", "pni", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "fma4", "f16c",
    "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
)  # fmt: skip


def numpy_features() -> list[str]:
    """The CPU features numpy's run-time dispatch found on this machine, in numpy's order."""
    import importlib

    for name in ("numpy.core._multiarray_umath", "numpy._core._multiarray_umath"):
        try:
            found = importlib.import_module(name).__cpu_features__
        except (ImportError, AttributeError):
            continue
        return [str(k) for k, present in found.items() if present]
    return []


def _cpuinfo() -> tuple[str | None, list[str]]:
    """(model name, the :data:`CPU_FLAGS` present) from ``/proc/cpuinfo``."""
    model: str | None = None
    flags: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and model is None:
                model = value.strip()
            elif key == "flags" and not flags:
                flags = set(value.split())
            if model is not None and flags:
                break
    return model or platform.processor() or None, [f for f in CPU_FLAGS if f in flags]


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"vical": __version__, "python": platform.python_version()}
    for name in LIBRARIES:
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    lib, ver = platform.libc_ver()
    if lib:
        out[lib] = ver
    return out


def machine(full: bool = False) -> dict[str, Any]:
    """This machine as far as float results go.

    The compact form (run manifests, bundles): ``cpu_model``, ``machine`` (the
    architecture) and ``numpy_features``. ``full`` adds ``cpu_flags`` (a subset
    of /proc/cpuinfo's), ``versions`` (the simulator libraries, python, glibc)
    and ``env`` (the environment variables that change numerics, None when unset).
    """
    model, flags = _cpuinfo()
    out: dict[str, Any] = {
        "cpu_model": model,
        "machine": platform.machine(),
        "numpy_features": numpy_features(),
    }
    if full:
        out["cpu_flags"] = flags
        out["versions"] = _versions()
        out["env"] = {k: os.environ.get(k) for k in NUMERIC_ENV_VARS}
    return out


WIDTH = 80


def _field(name: str, value: str, width: int = WIDTH, indent: int = 2) -> list[str]:
    """``  name       value`` wrapped under itself to ``width``."""
    import textwrap

    head = " " * indent + f"{name:<11}"
    return textwrap.wrap(
        value or "-",
        width=width,
        initial_indent=head,
        subsequent_indent=" " * len(head),
        break_long_words=True,
        break_on_hyphens=False,
    )


def machine_lines(m: dict[str, Any] | None, width: int = WIDTH, indent: int = 2) -> list[str]:
    """A machine (:func:`machine`, compact or full; a doctor entry under ``doctor``) as text."""
    if not m:
        return [" " * indent + "(not recorded)"]
    out = _field("cpu", f"{m.get('cpu_model') or '?'} ({m.get('machine') or '?'})", width, indent)
    if "cpu_flags" in m:
        out += _field("cpu flags", " ".join(m["cpu_flags"]), width, indent)
    out += _field("numpy cpu", " ".join(m.get("numpy_features") or []), width, indent)
    if "versions" in m:
        shown = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
        out += _field("versions", shown, width, indent)
    if "env" in m:
        shown = " ".join(f"{k}={'(unset)' if v is None else v}" for k, v in m["env"].items())
        out += _field("env", shown, width, indent)
    doctor = m.get("doctor")
    if isinstance(doctor, dict):
        out += _field("doctor", f"{doctor.get('status')}: {doctor.get('summary')}", width, indent)
    return out
