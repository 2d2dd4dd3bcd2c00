"""The recorded behaviour of the built-in environments, and the CPU feature levels.

The fingerprints (:mod:`vical.run.fingerprints`: every task's start frame, every
demo clip, each task's longest clip and one random episode per task) of the 37
built-in environments are recorded in ``tests/data/behaviour.json``; an environment
added from a folder on ``$VICAL_TASKS_DIR`` keeps its own beside its task file
(``vical tasks record <folder>``), and :data:`RECORDED` holds both.

The float-physics environments are also checked under reduced CPU feature
levels (:data:`LEVELS`): ``python -m tests.behaviour --float-check`` prints the
fingerprints of each one's longest clip and of its first task's random episode,
and ``tests/test_behaviour.py`` runs it in a child process under every level.

``python -m tests.behaviour --record`` rewrites ``tests/data/behaviour.json``;
only do that for a change that is meant to alter behaviour (and say so in
CHANGELOG.md, since it changes results).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vical.run.fingerprints import (
    clip_fingerprint,
    fingerprint_all,
    random_fingerprint,
    recorded,
)
from vical.spec import BUILTIN_TASKS_DIR, EXTRA_TASKS_DIRS

BASELINE = Path(__file__).parent / "data" / "behaviour.json"
# the built-in record and every added folder's own (vical tasks record <folder>)
RECORDED = recorded(BASELINE, EXTRA_TASKS_DIRS)


# The environments whose simulators compute in floats (ALE is an integer emulator,
# MiniGrid and the toy-text games are grids, Procgen is checked by its fingerprints).
FLOAT_ENVS = ("highway", "cartpole", "acrobot", "mountaincar", "flappybird", "breakout", "tetris")

# Every feature a numpy 1.26 x86-64 wheel can dispatch to at run time (beyond its
# SSE3 baseline), in the order numpy lists them.
NUMPY_DISPATCH = [
    "SSSE3",
    "SSE41",
    "POPCNT",
    "SSE42",
    "AVX",
    "F16C",
    "FMA3",
    "AVX2",
    "AVX512F",
    "AVX512CD",
    "AVX512_KNL",
    "AVX512_KNM",
    "AVX512_SKX",
    "AVX512_CLX",
    "AVX512_CNL",
    "AVX512_ICL",
    "AVX512_SPR",
]
_AVX512 = [f for f in NUMPY_DISPATCH if f.startswith("AVX512")]
_GLIBC_BASE = "glibc.cpu.hwcaps=-AVX512F,-AVX2,-FMA,-FMA4,-AVX,-SSE4_2,-SSE4_1,-SSSE3"

# name -> (features numpy must not use, glibc tunables, OpenBLAS core type): the
# machine's maximum, an AVX2 machine without AVX-512, and the x86-64 baseline;
# each numpy level with glibc's own choice and with glibc held to its baseline.
LEVELS: dict[str, tuple[list[str], str | None, str | None]] = {
    "numpy-max": ([], None, None),
    "numpy-avx2": (_AVX512, None, "Haswell"),
    "numpy-baseline": (NUMPY_DISPATCH, None, "Prescott"),
    "numpy-max+glibc-baseline": ([], _GLIBC_BASE, None),
    "numpy-baseline+glibc-baseline": (NUMPY_DISPATCH, _GLIBC_BASE, "Prescott"),
}


def level_env(level: str, found: list[str]) -> dict[str, str]:
    """Environment variables that hold numpy, glibc and OpenBLAS to ``level``.

    ``found``: the features this machine's numpy found (numpy refuses to disable
    one it cannot dispatch to, so only those are named)."""
    disable, tunables, blas = LEVELS[level]
    env: dict[str, str] = {}
    names = [f for f in disable if f in found]
    if names:
        env["NPY_DISABLE_CPU_FEATURES"] = ",".join(names)
    if tunables:
        env["GLIBC_TUNABLES"] = tunables
    if blas:
        env["OPENBLAS_CORETYPE"] = blas
    return env


NUMERIC_VARS = ("NPY_DISABLE_CPU_FEATURES", "GLIBC_TUNABLES", "OPENBLAS_CORETYPE")


def child_environ(level: str, found: list[str]) -> dict[str, str]:
    """This process's environment for a child held to ``level``: any numeric
    variable set here is dropped, then the level's own are set."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in NUMERIC_VARS}
    env.update(level_env(level, found))
    return env


def float_cases() -> list[tuple[str, str, str]]:
    """(kind, task id, clip id or "") checked under every level: per float-physics
    environment its longest clip, and its first task's random episode."""
    from vical.spec import all_tasks

    out = []
    for env in FLOAT_ENVS:
        tasks = [t for t in all_tasks() if t.env.env == env]
        best = max(
            ((t, c) for t in tasks for c in t.variant.demos), key=lambda tc: len(tc[1].actions)
        )
        out.append(("clips", best[0].id, best[1].id))
        out.append(("random", tasks[0].id, ""))
    return out


def float_check() -> dict[str, str]:
    out = {}
    for kind, task_id, clip_id in float_cases():
        if kind == "clips":
            out[f"clips:{task_id}#{clip_id}"] = clip_fingerprint(task_id, clip_id)
        else:
            out[f"random:{task_id}"] = random_fingerprint(task_id)
    return out


def record() -> dict:
    return fingerprint_all(BUILTIN_TASKS_DIR)


if __name__ == "__main__":
    if "--float-check" in sys.argv:
        print(json.dumps(float_check(), sort_keys=True))
        sys.exit(0)
    if "--record" not in sys.argv:
        sys.exit("usage: python -m tests.behaviour --record | --float-check")
    BASELINE.parent.mkdir(exist_ok=True)
    BASELINE.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {BASELINE}")
