"""A 38th environment added from a folder: `vical tasks check`, then eval, demo packing,
submit and verify, with no file of the package touched.

The folder holds exactly one game module and one task file (with its demo quota).
It is found as any added environment is: the folder's parent on ``PYTHONPATH``, its
name in ``$VICAL_GAME_PACKAGES`` (the game module) and the folder in
``$VICAL_TASKS_DIR`` (the task file, added to the 37 built-in environments).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_toy_environment import GAME_MODULE  # the toy game, one module for both
from vical.spec import BUILTIN_TASKS_DIR, TaskSpec, TaskSpecError, load_env_file, tasks_digest

TASK_FILE = """
env: toyline
name: Toyline
paper_id: Toyline-v0
family: toytext
sim_id: FrozenLake-v1
package: gymnasium
env_kwargs: {is_slippery: false, map_name: 4x4}
actions: {Left: 0, Down: 1, Right: 2, Up: 3}
frame_skip: 1
action_steps: 1
max_steps: 12
scoring:
  family: native
  description: 100 when the walker stands on the goal, 0 otherwise.
pass_rule:
  description: The walker reaches the goal.
tags:
  types: [Maze]
  memory: Single
  dynamics: Static
rules:
  basic: Walk to the goal without stepping into a hole.
  detailed: >-
    A walker moves one cell per action on a 4 by 4 frozen lake; holes end the
    episode, the goal in the bottom-right corner wins it.
demo_quota: {pool: 1, clips: '11', loss_scope: env}
tasks:
  - variant: base
    kind: base
    seed: 1
    demos:
      - &toyline-detour
        id: toyline-detour
        seed: 1
        init_actions: [Right]
        actions: [Right, Right, Left, Down, Down, Left, Down, Right, Right]
        label: Victory
        source: 'scripted: a detour from the second cell of the top row'
  - variant: late
    kind: human-init
    seed: 1
    init_actions: [Down, Down]
    init_source: 'generated: two steps down the left edge'
    demos:
      - *toyline-detour
"""

PACKAGE = "toyext"


def write_toy(root: Path, task_file: str = TASK_FILE) -> Path:
    """The folder ``root/toyext`` with the game module and the task file; returns it."""
    folder = root / PACKAGE
    folder.mkdir()
    (folder / "toyline.py").write_text(textwrap.dedent(GAME_MODULE).lstrip())
    (folder / "toyline.yaml").write_text(task_file.lstrip())
    return folder


def cli_env(folder: Path, **extra: str) -> dict[str, str]:
    """The environment of a command that adds ``folder`` to the built-in tasks."""
    env = {k: v for k, v in os.environ.items() if k != "VICAL_BUILTIN_TASKS_DIR"}
    path = os.pathsep.join(p for p in [str(folder.parent), os.environ.get("PYTHONPATH")] if p)
    env.update(PYTHONPATH=path, VICAL_GAME_PACKAGES=PACKAGE, VICAL_TASKS_DIR=str(folder), **extra)
    return env


def vical(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "vical.cli", *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def package_state() -> tuple[str, list[Path]]:
    """The built-in task data's digest and any toy file inside the package."""
    package = Path(__file__).parents[1] / "vical"
    return tasks_digest(BUILTIN_TASKS_DIR), sorted(package.rglob("toyline*"))


def test_a_38th_environment_from_a_folder_checks_runs_packs_submits_and_verifies(tmp_path):
    before = package_state()
    folder = write_toy(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["toyline.py", "toyline.yaml"]
    env = cli_env(folder)

    check = vical("tasks", "check", str(folder), env=env, cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout == ""
    assert "no problems in 1 task file(s), 2 task(s), 1 demo clip(s)" in check.stderr

    listed = vical("tasks", "list", env=env, cwd=tmp_path)
    ids = [line.split("\t")[0] for line in listed.stdout.splitlines()]
    assert len(ids) == 342 + 2 and {"toyline/base", "toyline/late", "taxi/state1"} <= set(ids)

    run = tmp_path / "run"
    evaluated = vical(
        "eval", "--agent", "random", "--tasks", "toyline", "--out", str(run), "--workers", "1",
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    results = [json.loads(p.read_text()) for p in run.rglob("eval_result.json")]
    assert sorted(r["task_id"] for r in results) == ["toyline/base", "toyline/late"]

    packed = vical("demos", "pack", "--check", "--env", "toyline", env=env, cwd=tmp_path)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    assert "toyline: unchanged" in packed.stdout

    key = tmp_path / "keys" / "team"
    assert vical("keygen", "--out", str(key), env=env, cwd=tmp_path).returncode == 0
    bundle = tmp_path / "toy.tar.gz"
    submitted = vical(
        "submit", str(run), "--key", str(key), "--partial", "--out", str(bundle), "--team", "t",
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    verified = vical("verify", str(bundle), "--pubkey", f"{key}.pub", env=env, cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "PASS: 2/2 episodes replay exactly" in verified.stdout + verified.stderr

    # a verifier without the added environment refuses the bundle, naming the episode
    without = {k: v for k, v in env.items() if k != "VICAL_TASKS_DIR"}
    refused = vical("verify", str(bundle), "--pubkey", f"{key}.pub", env=without, cwd=tmp_path)
    assert refused.returncode == 1
    assert "toyline__base__r0' is not an episode of this task data" in refused.stderr

    assert package_state() == before


def test_an_initial_skip_without_noop_is_one_line_at_load_and_at_check(tmp_path):
    skipping = TASK_FILE.replace(
        "    init_source: 'generated: two steps down the left edge'\n",
        "    init_source: 'generated: two steps down the left edge'\n    initial_skip: 3\n",
    )
    folder = write_toy(tmp_path, skipping)
    env = cli_env(folder)
    field = "task toyline/late: field 'initial_skip': 3 frames are skipped with the NOOP action"

    check = vical("tasks", "check", str(folder), env=env, cwd=tmp_path)
    assert check.returncode == 1
    assert check.stdout == f"{folder / 'toyline.yaml'}: {field}, but 'noop' is not set; " + (
        "add 'noop: <native action>' to the file, or start without an initial skip\n"
    )
    listed = vical("tasks", "list", env=env, cwd=tmp_path)
    assert listed.returncode == 2 and listed.stdout == "" and "Traceback" not in listed.stderr
    assert listed.stderr.startswith(f"error: {folder / 'toyline.yaml'}: {field}")
    assert len(listed.stderr.splitlines()) == 1


def test_demos_make_on_an_environment_without_noop_is_one_line(tmp_path):
    """The generic demo maker takes other seeds, never skipped frames, where the file
    names no NOOP; what it cannot make is one line, naming no start the file lacks."""
    env = cli_env(write_toy(tmp_path))
    made = vical("demos", "make", "--env", "toyline", "--dry-run", env=env, cwd=tmp_path)
    assert made.returncode == 2 and "Traceback" not in made.stderr, made.stderr[-2000:]
    (line,) = made.stderr.splitlines()
    assert line.startswith("error: toyline/base: ") and "initial_skip" not in line


@pytest.fixture
def importable(tmp_path, monkeypatch):
    """The toy folder written and importable in this process, for in-process checks."""

    def write(task_file: str = TASK_FILE) -> Path:
        folder = write_toy(tmp_path, task_file)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setenv("VICAL_GAME_PACKAGES", PACKAGE)
        return folder

    yield write
    from vical.envs import close_idle

    close_idle()  # the simulators kept for reuse hold the old module's adapters
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


def test_check_names_every_task_whose_demo_does_not_replay_to_its_label(importable):
    from vical.demos.taskcheck import check_folder

    folder = importable(TASK_FILE.replace("label: Victory", "label: Terminated"))
    report = check_folder(folder)
    assert report.problems == [
        f"{folder / 'toyline.yaml'}: task toyline/{v}: demo toyline-detour is labelled "
        "'Terminated' but replays to 'Victory'"
        for v in ("base", "late")
    ]


def test_check_finds_a_package_beyond_80_frames(importable):
    from vical.demos.taskcheck import check_folder

    # 38 steps left and back, then the way down: 81 actions, 83 frames, still a Victory
    long_clip = ", ".join(["Left", "Right"] * 38 + ["Right", "Down", "Down", "Down", "Right"])
    folder = importable(
        TASK_FILE.replace(
            "actions: [Right, Right, Left, Down, Down, Left, Down, Right, Right]",
            f"actions: [{long_clip}]",
        )
    )
    assert check_folder(folder).problems == [
        f"{folder / 'toyline.yaml'}: task toyline/{v}: its demo package has 83 frames; a "
        "package holds 10-80 (each clip: its actions plus 2)"
        for v in ("base", "late")
    ]


def test_check_finds_a_game_that_does_not_replay_the_same(importable):
    from vical.demos.taskcheck import check_folder

    folder = importable()
    drifting = (
        "\n_calls = iter(range(10**6))\nAdapter.score = lambda self: float(next(_calls) % 7)\n"
    )
    (folder / "toyline.py").write_text(textwrap.dedent(GAME_MODULE).lstrip() + drifting)
    problems = check_folder(folder).problems
    assert len(problems) == 2, problems
    assert all(": not deterministic: a random episode replayed" in p for p in problems)


def test_check_says_where_a_game_module_beside_the_file_is_not_found(tmp_path, monkeypatch):
    from vical.demos.taskcheck import check_folder

    folder = write_toy(tmp_path)
    monkeypatch.delenv("VICAL_GAME_PACKAGES", raising=False)
    (problem,) = check_folder(folder).problems
    assert problem.startswith(f"{folder / 'toyline.py'}: not the game module of toyline")
    assert "(toyext) in $VICAL_GAME_PACKAGES" in problem


def test_a_start_made_in_code_with_a_skip_and_no_noop_is_refused_before_the_simulator():
    """Loading refuses such a file; a start built in code (a demo clip's, a tool's probe)
    is refused when its game is made, with the file to fix, not a KeyError later."""
    from vical.envs import make_env

    spec = load_env_file(BUILTIN_TASKS_DIR / "taxi.yaml")
    variant = spec.tasks[0].model_copy(update={"initial_skip": 2})
    with pytest.raises(TaskSpecError) as e:
        make_env(TaskSpec(env=spec, variant=variant))
    assert str(e.value).startswith("taxi/state1: a start with initial_skip 2 skips frames")
    assert "taxi.yaml sets no 'noop'" in str(e.value)


def test_check_of_a_missing_folder_is_one_line(tmp_path):
    done = vical("tasks", "check", str(tmp_path / "nope"), env=dict(os.environ), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"error: {tmp_path / 'nope'}: no such file or folder; " + (
        "give a folder of task files (*.yaml)\n"
    )


WITHOUT_LATE_DEMOS = TASK_FILE.replace("    demos:\n      - *toyline-detour\n", "")


def test_check_reports_packages_that_packing_would_change(importable):
    from vical.demos.taskcheck import check_folder

    folder = importable(WITHOUT_LATE_DEMOS)
    assert check_folder(folder).problems == [
        f"{folder / 'toyline.yaml'}: field 'demo_quota': packing would change the demos of "
        "late; run `vical demos pack --env toyline` (with this folder in $VICAL_TASKS_DIR) or "
        "change the quota"
    ]


def test_demos_pack_writes_an_added_environment_in_its_own_folder(tmp_path):
    before = package_state()
    folder = write_toy(tmp_path, WITHOUT_LATE_DEMOS)
    env = cli_env(folder)
    packed = vical("demos", "pack", "--env", "toyline", env=env, cwd=tmp_path)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    assert "toyline: packed (2 clip assignments, 1 distinct clips)" in packed.stdout
    spec = load_env_file(folder / "toyline.yaml")
    assert [[c.id for c in v.demos] for v in spec.tasks] == [["toyline-detour"]] * 2
    assert package_state() == before


# -- the state API: an adapter must name its state, read it and set it back -------------

WITHOUT_FACTS = textwrap.dedent(GAME_MODULE).replace(
    "    def state_facts(self):", "    def _facts(self):"
)


def test_check_refuses_an_adapter_whose_state_names_no_fact(importable):
    """The default state_facts() gives only lives and progress(); a game with neither
    names nothing, which the world-model track and the checks cannot use."""
    from vical.demos.taskcheck import check_folder

    folder = importable()
    (folder / "toyline.py").write_text(WITHOUT_FACTS.lstrip())
    assert check_folder(folder).problems == [
        f"{folder / 'toyline.yaml'}: environment toyline: its Adapter (Adapter): "
        "state_facts() names no fact of the state ({}); override state_facts() to return "
        "what the frame shows by name, e.g. {'row': 2}"
    ]


def test_check_names_the_missing_state_api_method_in_one_line(tmp_path):
    folder = write_toy(tmp_path)
    module = textwrap.dedent(GAME_MODULE).lstrip() + "\nAdapter.read_state = None\n"
    (folder / "toyline.py").write_text(module)
    check = vical("tasks", "check", str(folder), env=cli_env(folder), cwd=tmp_path)
    assert check.returncode == 1
    assert check.stdout == (
        f"{folder / 'toyline.yaml'}: environment toyline: its Adapter (Adapter) has no "
        "read_state(); the state API: subclass vical.envs.core.Adapter "
        "(docs/FAMILY_GUIDE.md)\n"
    )


def test_check_finds_a_state_that_does_not_set_back(importable):
    from vical.demos.taskcheck import check_folder

    folder = importable()
    module = textwrap.dedent(GAME_MODULE).lstrip() + "\nAdapter.set_state = lambda self, s: None\n"
    (folder / "toyline.py").write_text(module)
    (problem,) = check_folder(folder).problems
    assert problem == (
        f"{folder / 'toyline.yaml'}: environment toyline: its Adapter (Adapter): "
        "set_state(read_state()) does not return to the state read: facts "
        "{'row': 1, 'column': 0} != {'row': 0, 'column': 0}"
    )


def test_check_reads_the_start_frame_back_with_the_game_module_reader(importable):
    from vical.demos.taskcheck import check_folder

    folder = importable()
    reader = "\ndef read_frame(renderer, frame, hint):\n    return {'row': 3, 'column': 3}\n"
    (folder / "toyline.py").write_text(textwrap.dedent(GAME_MODULE).lstrip() + reader)
    (problem,) = check_folder(folder).problems
    assert problem == (
        f"{folder / 'toyline.yaml'}: environment toyline: its Adapter (Adapter): read_frame() "
        "reads the start frame as {'row': 3, 'column': 3}, not its facts {'row': 0, 'column': 0}"
    )
