"""Writing demo clips into a task file: the ``demos:`` lists of ``vical/tasks/<env>.yaml``.

Clips are defined once with a YAML anchor and then referenced by alias; the
rest of the file is left as it is. The write is atomic and the new file is
validated before it replaces the old one.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from vical.spec import TASKS_DIR, DemoClip, EnvSpec, load_env_file

_ITEM = re.compile(r"^  - ")


def _replace_checked(path: Path, text: str, prefix: str, check: Callable[[EnvSpec], None]) -> None:
    """Put ``text`` in place of the task file ``path`` once it loads (a
    :class:`~vical.errors.TaskSpecError` otherwise) and passes ``check`` (which raises
    ValueError); atomic: written to a temporary folder ``prefix…`` beside it, then
    renamed. The cached task specs are cleared after."""
    d = Path(tempfile.mkdtemp(dir=path.parent, prefix=prefix))
    tmp = d / path.name
    try:
        tmp.write_text(text)
        check(load_env_file(tmp))  # load_env_file raises on anything invalid
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
        d.rmdir()
    from vical.spec import load_envs

    load_envs.cache_clear()


def _clip_yaml(clip: DemoClip) -> dict[str, Any]:
    d = clip.model_dump(mode="json", exclude_defaults=True)
    return {
        k: d[k]
        for k in ("id", "seed", "initial_skip", "init_actions", "actions", "label", "source")
        if k in d
    }


def _flow(v: object) -> str:
    """One value as a single-line YAML scalar or flow collection."""
    # PyYAML is untyped here; without a stream, safe_dump returns the text
    text: str = yaml.safe_dump(v, default_flow_style=True, width=1_000_000, allow_unicode=True)
    text = text.strip()
    if text.endswith("..."):
        text = text[:-3].strip()
    return text


def _dump(d: dict[str, Any], indent: int) -> list[str]:
    """A mapping in block style, one ``key: value`` line per key (lists in flow style)."""
    return [" " * indent + f"{k}: {_flow(v)}" for k, v in d.items()]


def render_tasks_block(lines: list[str], demos: dict[str, list[DemoClip]]) -> list[str]:
    """Rewrite the task items of a file's ``tasks:`` list with the given demos lists."""
    start = next(i for i, ln in enumerate(lines) if ln.rstrip() == "tasks:") + 1
    end = start
    while end < len(lines) and (lines[end].startswith("  ") or not lines[end].strip()):
        end += 1
    # A comment line indented less than an item's fields introduces the next item:
    # it travels with that item (as its lead), never into the previous one's body.
    items: list[list[str]] = []
    leads: list[list[str]] = []
    pending: list[str] = []
    for ln in lines[start:end]:
        is_lead_comment = ln.lstrip().startswith("#") and len(ln) - len(ln.lstrip()) < 4
        if _ITEM.match(ln):
            items.append([ln])
            leads.append(pending)
            pending = []
        elif is_lead_comment or not items:
            pending.append(ln)
        else:
            items[-1].append(ln)
    defined: set[str] = set()
    out_items = []
    for lead, item in zip(leads, items, strict=True):
        # drop any previous demos block from the item
        kept, skipping = [], False
        for ln in item:
            if ln.startswith("    demos:"):
                skipping = True
                continue
            if skipping and (ln.startswith("     ") or ln.startswith("    - ") or not ln.strip()):
                continue
            skipping = False
            kept.append(ln)
        head = kept[0]
        if head[4:].lstrip().startswith("{"):  # flow mapping: expand to block form
            data = yaml.safe_load(head[4:])
            data.pop("demos", None)
            body = _dump(data, 4)
            body[0] = "  - " + body[0][4:]
            kept = body + kept[1:]
            variant = data["variant"]
        else:
            fields = [x[4:] for x in kept if not x.lstrip().startswith("#")]
            variant = yaml.safe_load("\n".join(fields))["variant"]
        clips = demos.get(variant, [])
        if clips:
            kept.append("    demos:")
            for c in clips:
                if c.id in defined:
                    kept.append(f"      - *{c.id}")
                    continue
                defined.add(c.id)
                body = _dump(_clip_yaml(c), 8)
                body[0] = f"      - &{c.id}\n" + body[0]
                kept.extend(body)
        out_items.append(lead + kept)
    new = [ln for item in out_items for ln in item] + pending
    return lines[:start] + new + lines[end:]


def write_demos(
    env_key: str, demos: dict[str, list[DemoClip]], tasks_dir: Path = TASKS_DIR
) -> Path:
    """Store the demos lists in ``<tasks_dir>/<env>.yaml`` (atomic; validated before replacing)."""
    path = Path(tasks_dir) / f"{env_key}.yaml"
    lines = path.read_text().splitlines()
    text = "\n".join(render_tasks_block(lines, demos)) + "\n"

    def check(spec: EnvSpec) -> None:
        for v in spec.tasks:
            if [c.id for c in v.demos] != [c.id for c in demos.get(v.variant, [])]:
                raise ValueError(f"{env_key}/{v.variant}: demos did not round-trip")

    _replace_checked(path, text, ".demos-", check)
    return path


def write_start(
    env_key: str,
    variant: str,
    init_actions: list[str],
    init_source: str,
    tasks_dir: Path = TASKS_DIR,
) -> Path:
    """Store a task's start sequence in ``<tasks_dir>/<env>.yaml``: its ``init_actions``
    and ``init_source`` lines replaced, the rest of the file left as it is (atomic;
    validated before replacing)."""
    path = Path(tasks_dir) / f"{env_key}.yaml"
    lines = path.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.rstrip() == "tasks:") + 1
    head = re.compile(rf"^  - variant:\s*['\"]?{re.escape(variant)}['\"]?\s*$")
    first = next((i for i in range(start, len(lines)) if head.match(lines[i])), None)
    if first is None:
        raise ValueError(f"{path}: no task item starting '  - variant: {variant}' (block style)")
    end = first + 1
    while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
        end += 1
    while not lines[end - 1].strip():  # blank lines before the next item stay outside
        end -= 1
    kept: list[str] = []
    at: int | None = None
    item = lines[first:end]
    skipping = False
    for ln in item:
        if ln.startswith(("    init_actions:", "    init_source:")):
            at = len(kept) if at is None else at
            skipping = True
            continue
        if skipping and ln.startswith("     "):  # a continuation line of a dropped field
            continue
        skipping = False
        kept.append(ln)
    if at is None:  # no start sequence yet: after the item's scalar head fields
        at = next(
            (j for j, ln in enumerate(kept) if ln.startswith(("    max_steps:", "    demos:"))),
            len(kept),
        )
    kept[at:at] = _dump({"init_actions": init_actions, "init_source": init_source}, 4)
    text = "\n".join(lines[:first] + kept + lines[end:]) + "\n"

    def check(spec: EnvSpec) -> None:
        got = next(v for v in spec.tasks if v.variant == variant)
        if got.init_actions != init_actions or got.init_source != init_source:
            raise ValueError(f"{env_key}/{variant}: the start sequence did not round-trip")

    _replace_checked(path, text, ".start-", check)
    return path
