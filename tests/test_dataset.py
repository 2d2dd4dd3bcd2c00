"""Dataset folder: offline load, TaskSpec round trip, byte-identical rebuild, verify."""

from __future__ import annotations

import json

import pytest

from vical.dataset import (
    build_dataset,
    load_dataset_folder,
    push_dataset,
    row_to_task,
    verify_dataset,
)
from vical.demos.render import decode_mp4
from vical.spec import get_task

SUBSET = "cliffwalking/base,cartpole/seed42,taxi/state2"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds")
    mp = pytest.MonkeyPatch()
    mp.setenv("VICAL_CACHE", str(root / "cache"))
    out = build_dataset(root / "a", SUBSET)
    yield out
    mp.undo()


def test_load_offline_and_round_trip(built, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = load_dataset_folder(built)
    assert len(ds) == 3
    for row in ds:
        task = row_to_task(row)
        assert task == get_task(row["id"])
        assert len(row["demo_mp4"]) == len(task.variant.demos)
        frames, fps = decode_mp4(row["demo_mp4"][0])
        assert fps == 1.0 and len(frames) == row["demo_n_frames"][0]
        for rel in row["demo_files"]:
            assert (built / rel).is_file()


def test_card_and_manifest(built):
    card = (built / "README.md").read_text()
    assert (
        card.startswith("---\n") and "configs:" in card and "expert-policy demonstrations" in card
    )
    assert "| distinct clips |" in card
    assert verify_dataset(built) == []


def test_rebuild_is_byte_identical(built, tmp_path, monkeypatch):
    monkeypatch.setenv("VICAL_CACHE", str(tmp_path / "cache2"))  # render from scratch
    other = build_dataset(tmp_path / "b", SUBSET)
    m1 = json.loads((built / "manifest.json").read_text())
    m2 = json.loads((other / "manifest.json").read_text())
    assert m1 == m2


def test_verify_catches_changed_byte_and_missing_file(built, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    video = next((copy / "videos").iterdir())
    data = bytearray(video.read_bytes())
    data[len(data) // 2] ^= 0xFF
    video.write_bytes(bytes(data))
    (copy / "stats.json").unlink()
    problems = verify_dataset(copy)
    assert any("sha256 differs" in p and video.name in p for p in problems)
    assert any(p.startswith("stats.json: missing") for p in problems)


def test_push_dry_run_lists_files(built):
    files = push_dataset(built, "org/vical", dry_run=True)
    assert "README.md" in files and "manifest.json" in files
    assert any(f.startswith("videos/") for f in files)


@pytest.mark.slow
def test_full_build(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from vical.spec import all_tasks

    tasks = [t for t in all_tasks() if t.variant.demos]
    out = build_dataset(tmp_path / "full", ",".join(t.id for t in tasks))
    assert len(load_dataset_folder(out)) == len(tasks)
    assert verify_dataset(out) == []


def test_rebuilt_folder_never_loads_stale_rows(tmp_path, monkeypatch):
    """A folder rebuilt at the same path loads its new rows, not a cache of the old ones."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "same"
    build_dataset(out, "taxi/state1")
    assert len(load_dataset_folder(out)) == 1
    build_dataset(out, "taxi/state1,taxi/state2,cartpole/seed41")
    assert len(load_dataset_folder(out)) == 3


@pytest.mark.parametrize("times", [1, 2])
def test_sigint_leaves_no_half_written_dataset(tmp_path, times):
    """Ctrl-C mid-build: exit 130, no temporary sibling, the old folder untouched."""
    import os
    import sys

    from tests.conftest import interrupt_group

    out = tmp_path / "ds"
    out.mkdir()
    (out / "marker").write_text("previous build")
    env = {**os.environ, "VICAL_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable, "-m", "vical.cli", "dataset", "build", "--out", str(out),
        "--tasks", "taxi/*,cliffwalking/*,cartpole/*,lavacrossing/*",
    ]  # fmt: skip
    rc, took, _, err = interrupt_group(
        cmd, lambda p: bool(list(tmp_path.glob(".ds-*/videos/*.mp4"))), times, env=env
    )  # rendering has started
    assert rc == 130 and took < 10, (rc, took, err)
    assert "Traceback" not in err, err
    if times == 1:
        assert "left as it was" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["ds"]
    assert [p.name for p in out.iterdir()] == ["marker"]
