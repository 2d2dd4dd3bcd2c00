"""The author's route as a contract: an environment added from a folder, with no file of
vical changed, passes the suite's per-environment tests.

The folder is the one docs/FAMILY_GUIDE.md builds (FrozenLake, two tasks: its task
file, its game module with the state API and a frame reader, its demo recipe), made
here in a temporary folder; its demo clips are made and its fingerprints and doctor
record written by the commands the guide gives (``vical demos make``, ``vical tasks
record``). Then the test suite runs in a child process with the folder on
``$VICAL_TASKS_DIR``: the whole suite is collected (a collection error fails), and
every test parametrised by the added environment, plus the tests that hold the
recorded data to the task set, must pass. The guide's own test
(``tests/test_family_guide.py``) runs the check, the screen and an evaluation on the
same folder.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_family_guide import guide_files, vical_on_path
from vical.run.fingerprints import RecordError, folder_fingerprints
from vical.spec import tasks_digest

REPO = Path(__file__).parents[1]
# the tests that take the added environment (or its folder) as a parameter, and the
# tests over the whole task set that read recorded data
SELECTED = " or ".join(
    [
        "frozenlake",
        "lakegames",
        "covers_every_task",  # the fingerprints: the built-in record and the folder's
        "packaged_record_covers",  # the doctor record of the built-in set
        "packaged_plans_cover",  # the expert plans of the built-in set
        "partial_dataset_card",  # the published card: the built-in set
        "166_human_init",  # the paper's start sequences
        "strict_reading_rejects",  # the paper's tags
        "digest_covers",  # the task-data digest with a folder added
        "every_task_has_a_package",  # the paper's demo packages (Appendix 1.2)
        "clips_per_task_equal",
        "max_episode_steps_is_the_task_budget",  # the Gymnasium registration of every task
    ]
)


def test_the_suite_takes_an_environment_added_from_a_folder(tmp_path):
    written = guide_files(tmp_path)
    folder = tmp_path / "lakegames"
    assert {p.relative_to(tmp_path).as_posix() for p in written} == {
        "lakegames/frozenlake.yaml",
        "lakegames/frozenlake.py",
        "lakegames/recipes/frozenlake.py",
        "make_plans.py",
    }
    env = vical_on_path(tmp_path / ".bin")
    env.update(PYTHONPATH=f"{tmp_path}:{REPO}", VICAL_GAME_PACKAGES="lakegames")
    env["VICAL_TASKS_DIR"] = str(folder)

    def vical(*args: str) -> str:
        done = subprocess.run(
            ["vical", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    assert "frozenlake: 2 clip assignments over 2 tasks" in vical(
        "demos", "make", "--env", "frozenlake"
    )
    assert f"wrote {folder / 'fingerprints.json'}" in vical("tasks", "record", str(folder))

    # the default suite runs a sample of each per-environment test (conftest.spread),
    # which may leave the added environment out: its own items run whatever their marks
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider"]
    cmd += ["-m", "not image and not interop and not ray", "-k", SELECTED, "tests"]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "error" not in out.splitlines()[-1], out[-4000:]
    passed = int(re.search(r"(\d+) passed", out.splitlines()[-1]).group(1))  # type: ignore[union-attr]
    assert passed >= 25, out[-4000:]


def test_recorded_data_missing_or_made_on_other_task_files_is_one_line_naming_the_command(
    tmp_path,
):
    guide_files(tmp_path)
    folder = tmp_path / "lakegames"
    with pytest.raises(RecordError) as missing:
        folder_fingerprints(folder)
    assert str(missing.value) == (
        f"{folder / 'fingerprints.json'}: no fingerprints recorded for this folder; "
        f"run `vical tasks record {folder}`"
    )
    doc = {"tasks_digest": tasks_digest(folder), "starts": {"frozenlake/base": "ab"}}
    (folder / "fingerprints.json").write_text(json.dumps(doc))
    assert folder_fingerprints(folder)["starts"] == {"frozenlake/base": "ab"}
    task_file = folder / "frozenlake.yaml"
    task_file.write_text(task_file.read_text().replace("max_steps: 12", "max_steps: 13"))
    with pytest.raises(RecordError, match="recorded on other task files of the folder; run"):
        folder_fingerprints(folder)
