"""Shared test setup: headless rendering and task parametrisation helpers."""

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import pytest

from vical.spec import all_tasks

ALL_TASKS = all_tasks()


def task_params(env_keys=None):
    """pytest params over every task (optionally only some environments), ids = task ids."""
    return [
        pytest.param(t, id=t.id) for t in ALL_TASKS if env_keys is None or t.env.env in env_keys
    ]


CHROMIUM = __import__("shutil").which("chromium") or __import__("shutil").which("chromium-browser")
# Flags that keep headless Chromium quiet on a machine whose network reaches no Google host.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser():
    """A headless Chromium (system package) driven by Playwright; skips when absent."""
    if CHROMIUM is None:
        pytest.skip("Chromium not installed (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
