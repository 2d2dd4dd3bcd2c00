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


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No Hub access, and a private datasets cache (the shared one keys a folder by path)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return str(tmp_path / "hf-cache")


def test_load_dataset_gives_image_and_video_features(built, offline):
    """The documented call, ``datasets.load_dataset(DIR, split="test")``, offline and with
    no video decoder installed: media come back as Image / Video features."""
    import datasets
    import numpy as np
    from PIL import Image as PILImage

    from vical.envs import frame_sha256

    ds = datasets.load_dataset(str(built), split="test", cache_dir=offline)
    assert ds.split == "test" and len(ds) == 3
    assert ds.features["start_frame"] == datasets.Image()
    assert ds.features["demo_videos"] == datasets.List(datasets.Video(decode=False))
    for row in ds:
        task = row_to_task(row)
        assert task == get_task(row["id"])
        start = row["start_frame"]
        assert isinstance(start, PILImage.Image) and start.mode == "RGB"
        assert frame_sha256(np.asarray(start)) == row["start_frame_sha256"]
        assert len(row["demo_videos"]) == len(task.variant.demos) == len(row["demo_n_frames"])
        for clip, n in zip(row["demo_videos"], row["demo_n_frames"], strict=True):
            assert clip["path"].startswith("videos/") and clip["path"].endswith(".mp4")
            assert (built / clip["path"]).read_bytes() == clip["bytes"]
            frames, fps = decode_mp4(clip["bytes"])
            assert fps == 1.0 and len(frames) == n


def test_parquet_schema_carries_the_media_features(built):
    """What the Hub viewer reads: {bytes, path} structs typed in the ``huggingface`` key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (data,) = (built / "data").iterdir()
    assert data.name == "test-00000-of-00001.parquet"
    schema = pq.read_schema(data)
    media = pa.struct({"bytes": pa.binary(), "path": pa.string()})
    assert schema.field("start_frame").type == media
    assert schema.field("demo_videos").type == pa.list_(media)
    features = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    assert features["start_frame"] == {"_type": "Image"}
    assert features["demo_videos"] == {
        "feature": {"_type": "Video", "decode": False},
        "_type": "List",
    }


def test_rows_carry_the_origin_of_the_start_and_of_every_clip(built, offline):
    """init_origin / demo_origins per row, as the task data states them; row_to_task
    refuses a row whose origin disagrees with its task_json."""
    import datasets

    ds = datasets.load_dataset(str(built), split="test", cache_dir=offline)
    rows = {r["id"]: r for r in ds}
    for task_id, row in rows.items():
        task = get_task(task_id)
        assert row["init_origin"] == task.variant.init_origin
        assert row["demo_origins"] == [c.origin for c in task.variant.demos]
    assert rows["taxi/state2"]["init_origin"] is None
    assert set(rows["taxi/state2"]["demo_origins"]) == {"scripted"}
    bad = {**rows["taxi/state2"], "demo_origins": ["human"] * len(rows["taxi/state2"]["demo_ids"])}
    with pytest.raises(ValueError, match="demo_origins"):
        row_to_task(bad)


def test_card_provenance_is_counted_from_the_tasks():
    """The card's provenance sentence and table come from the tasks given: a start or a
    clip that becomes human-recorded moves from one column to another."""
    from vical.dataset.build import render_card
    from vical.demos.stats import demo_stats
    from vical.spec import TaskSpec, human_source, select_tasks

    tasks = select_tasks("taxi,asterix/lanes,trondead/level2-a")
    trondead = get_task("trondead/level2-a")
    assert trondead.variant.init_origin == "generated"
    card = render_card(demo_stats(tasks), len(tasks), tasks=tasks)
    body = card[card.index("## Provenance") : card.index("## Task-data version")]
    body = " ".join(body.split("\n")).replace("  ", " ")
    assert "Of the 2 start sequences, 1 are the paper's (its Figure 5), 1 generated" in body
    assert "| asterix | 1 | 1 | 0 | 0 |" in body and "| taxi | 5 | 0 | 0 | 0 | 0 | 3 | 0 |" in body
    clips = {(t.env.env, c.id): c.origin for t in tasks for c in t.variant.demos}
    n_search = sum(o == "search" for o in clips.values())
    n_scripted = sum(o == "scripted" for o in clips.values())
    assert f"| **all** | 7 | 1 | 1 | 0 | {n_search} | {n_scripted} | 0 |" in body
    # the same tasks with trondead's start and taxi's first clip recorded by a person
    human = human_source("Ada", "2026-12-03", "I agree to publish this recording.")
    swapped = []
    for t in tasks:
        v = t.variant
        if t.id == "trondead/level2-a":
            v = v.model_copy(update={"init_source": human})
        if t.env.env == "taxi":
            demos = [
                c.model_copy(update={"source": human}) if c.id == "taxi-s7-route" else c
                for c in v.demos
            ]
            v = v.model_copy(update={"demos": demos})
        swapped.append(TaskSpec(env=t.env, variant=v))
    card = render_card(demo_stats(swapped), len(swapped), tasks=swapped)
    body = card[card.index("## Provenance") : card.index("## Task-data version")]
    body = " ".join(body.split("\n")).replace("  ", " ")
    assert "1 are the paper's (its Figure 5), 0 generated by seeded recipes and 1 recorded" in body
    assert "| taxi | 5 | 0 | 0 | 0 | 0 | 2 | 1 |" in body
    assert f"| **all** | 7 | 1 | 0 | 1 | {n_search} | {n_scripted - 1} | 1 |" in body


def test_load_dataset_folder_is_the_test_split(built, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = load_dataset_folder(built)
    assert ds.split == "test" and sorted(ds["id"]) == sorted(SUBSET.split(","))


def test_card_and_manifest(built):
    card = (built / "README.md").read_text()
    assert (
        card.startswith("---\n") and "configs:" in card and "expert-policy demonstrations" in card
    )
    assert "| distinct clips |" in card
    assert verify_dataset(built) == []


def test_card_parses_and_its_dataset_info_matches_the_data(built, offline):
    """huggingface_hub parses the card; its configs name the test split's file and its
    dataset_info (features, split sizes) is what datasets finds when it loads the folder."""
    import datasets
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(built / "README.md")
    assert card.data.license == "apache-2.0"
    (config,) = card.data.configs
    assert config["data_files"] == [{"split": "test", "path": "data/test-00000-of-00001.parquet"}]
    info = card.data.dataset_info
    assert set(info) == {"features", "splits", "download_size", "dataset_size"}
    ds = datasets.load_dataset(str(built), split="test", cache_dir=offline)
    assert datasets.Features._from_yaml_list(info["features"]) == ds.features
    (split,) = info["splits"]
    assert split == {
        "name": "test",
        "num_examples": len(ds),
        "num_bytes": ds.info.splits["test"].num_bytes,
    }
    assert info["dataset_size"] == split["num_bytes"]
    assert info["download_size"] == (built / "data/test-00000-of-00001.parquet").stat().st_size


def test_card_example_runs(built, offline, monkeypatch):
    """The card's Python example runs as written, with the folder's path filled in."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", offline)
    card = (built / "README.md").read_text()
    code = card.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'split="test"' in code
    scope: dict = {}
    exec(code.replace("path/to/folder", str(built)), scope)
    from PIL import Image as PILImage

    assert scope["ds"].split == "test" and isinstance(scope["row"]["start_frame"], PILImage.Image)
    assert scope["clip"]["bytes"][4:8] == b"ftyp"  # an MP4 file


def test_rebuild_is_byte_identical_whatever_the_workers(built, tmp_path, monkeypatch):
    monkeypatch.setenv("VICAL_CACHE", str(tmp_path / "cache2"))  # render from scratch
    other = build_dataset(tmp_path / "b", SUBSET, workers=1)  # the fixture used one per core
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


def test_push_dry_run_command_prints_the_file_list(built):
    """`vical dataset push --dry-run` prints each file it would upload, then the count."""
    from typer.testing import CliRunner

    from vical.cli import app

    r = CliRunner().invoke(app, ["dataset", "push", str(built), "--repo", "org/vical", "--dry-run"])
    assert r.exit_code == 0, r.output
    files = push_dataset(built, "org/vical", dry_run=True)
    lines = r.output.splitlines()
    assert lines[:-1] == files
    assert lines[-1] == f"{len(files)} files would be uploaded to org/vical"


@pytest.mark.slow
def test_full_build(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from vical.spec import all_tasks

    tasks = [t for t in all_tasks() if t.variant.demos]
    out = build_dataset(tmp_path / "full", ",".join(t.id for t in tasks))
    ds = load_dataset_folder(out)
    assert len(ds) == len(tasks) and ds.split == "test"
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
    assert rc == 130, (rc, took, err)
    assert "Traceback" not in err, err
    if times == 1:
        assert "left as it was" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["ds"]
    assert [p.name for p in out.iterdir()] == ["marker"]


def test_committed_card_matches_the_build():
    """dataset_card/README.md (the card of the full build, kept in the repository) parses
    with huggingface_hub and describes the columns and split that a build of the built-in
    tasks writes (an environment added from a folder is not on the published card)."""
    from pathlib import Path

    import datasets
    from huggingface_hub import DatasetCard

    from vical.dataset.build import DATA_FILE, _features
    from vical.spec import TASKS_DIR, all_tasks

    card = DatasetCard.load(Path(__file__).resolve().parents[1] / "dataset_card" / "README.md")
    (config,) = card.data.configs
    assert config["data_files"] == [{"split": "test", "path": DATA_FILE}]
    info = card.data.dataset_info
    assert datasets.Features._from_yaml_list(info["features"]) == _features()
    (split,) = info["splits"]
    assert split["name"] == "test"
    assert split["num_examples"] == sum(1 for t in all_tasks(TASKS_DIR) if t.variant.demos)
    # its provenance is that of the task data
    from vical.dataset.build import provenance_summary, provenance_table

    tasks = [t for t in all_tasks(TASKS_DIR) if t.variant.demos]
    assert provenance_table(tasks) in card.text and provenance_summary(tasks) in card.text
