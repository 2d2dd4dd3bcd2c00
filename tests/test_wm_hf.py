"""World-model cases as the dataset's second configuration, loaded by `datasets`."""

import numpy as np
import pytest

from vical.dataset import build_dataset, verify_dataset
from vical.dataset.build import load_dataset_folder
from vical.wm.cases import Scenario, build_scenario, load_cases, load_frames, write_cases
from vical.wm.hf import row_to_case


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("wm-ds")
    cases = build_scenario(Scenario("t-taxi", "taxi", ("taxi",)), root / "cases", contexts=1)
    write_cases(root / "cases", cases)
    return root / "cases", build_dataset(root / "ds", "taxi/state1", wm_cases=root / "cases")


def test_wm_config_loads_and_round_trips(built):
    cases_dir, root = built
    assert verify_dataset(root) == []
    ds = load_dataset_folder(root, config="wm")
    cases = load_cases(cases_dir)
    assert ds.num_rows == len(cases)
    for row, case in zip(ds, cases, strict=True):
        assert row_to_case(row) == case
        truth = load_frames(cases_dir, case.truth_frames)
        got = [np.asarray(im.convert("RGB")) for im in row["truth_frames"]]
        assert all(np.array_equal(a, b) for a, b in zip(got, truth, strict=True))
        assert len(row["context_frames"]) == len(case.context_frames)


def test_default_config_is_still_the_tasks(built):
    _, root = built
    ds = load_dataset_folder(root)
    assert ds.num_rows == 1 and ds[0]["id"] == "taxi/state1"
    card = (root / "README.md").read_text()
    assert "config_name: wm" in card and "## World-model cases" in card


def test_load_dataset_by_name(built, tmp_path, monkeypatch):
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    _, root = built
    ds = datasets.load_dataset(str(root), "wm", split="test", cache_dir=str(tmp_path))
    assert ds.num_rows == 5 and ds[0]["scenario"] == "t-taxi"


def test_a_corrupted_row_is_refused(built):
    _, root = built
    row = dict(load_dataset_folder(root, config="wm")[0])
    row["intervention"] = ["Up"]
    with pytest.raises(ValueError, match="disagrees with case_json"):
        row_to_case(row)
