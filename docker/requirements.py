"""Print the requirements of vical with the given extras, one per line, read from
pyproject.toml (run at image build, before the source is copied, so the dependency
layer is cached until pyproject.toml or the lock changes).

    python docker/requirements.py pyproject.toml all > requirements.txt

Extras that name vical itself (``all = ["vical[sims,api]"]``) are expanded.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path


def requirements(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    name = project["name"].lower()
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    out: list[str] = list(project.get("dependencies", []))
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(
                f"error: pyproject.toml has no extra {extra!r}; it has {sorted(optional)}"
            )
        seen.add(extra)
        for req in optional[extra]:
            m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*\[([^\]]*)\]\s*", req)
            if m and m.group(1).lower() == name:
                todo.extend(e.strip() for e in m.group(2).split(",") if e.strip())
            else:
                out.append(req)
    return sorted(dict.fromkeys(out))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: python requirements.py PYPROJECT [EXTRA ...]")
    print("\n".join(requirements(Path(sys.argv[1]), sys.argv[2:])))
