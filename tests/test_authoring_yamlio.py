"""Writing demos into task files: the YAML rewrite keeps every other field and is idempotent."""

from __future__ import annotations

import pytest
import yaml

from vical.authoring.yamlio import render_tasks_block
from vical.spec import TASKS_DIR, load_env_file

FILES = sorted(TASKS_DIR.glob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_rewriting_stored_demos_is_idempotent(path):
    spec = load_env_file(path)
    demos = {t.variant: list(t.demos) for t in spec.tasks}
    lines = path.read_text().splitlines()
    once = render_tasks_block(lines, demos)
    assert render_tasks_block(once, demos) == once
    assert yaml.safe_load("\n".join(once)) == yaml.safe_load("\n".join(lines))
