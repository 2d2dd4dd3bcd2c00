"""The stratified blind sample and the labelling page, driven by a real browser."""

from __future__ import annotations

import json
import shutil

import pytest

from vical.audit.label import LabelServer, load_labels
from vical.audit.runner import audit_run
from vical.audit.sample import stratified_sample
from vical.errors import RunFolderError
from vical.serve import BaselineServer

FAST = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}
TASKS = "cliffwalking/base,cliffwalking/ledge-3"


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """Two audited runs of the same two tasks (two 'models'; the second a copy of the first,
    which the sample cannot tell apart), every verdict valid."""
    from vical.run import RunOptions, run_eval
    from vical.spec import select_tasks

    base = tmp_path_factory.mktemp("label")
    with BaselineServer() as srv:
        kw = {"endpoint": srv.openai_base_url, **FAST}
        run_eval(select_tasks(TASKS), base / "m1", agent="openai-chat",
                 agent_kwargs={**kw, "model": "first"},
                 options=RunOptions(workers=1, progress=False))  # fmt: skip
        audit_run(base / "m1", "openai-chat", {**kw, "model": "auditor-valid"})
    shutil.copytree(base / "m1", base / "m2")
    return base


def test_the_sample_is_stratified_seeded_and_blind(audited, tmp_path):
    runs = [audited / "m1", audited / "m2"]
    s = stratified_sample(runs, per_env=1, seed=3)
    assert s == stratified_sample(runs, per_env=1, seed=3)
    # one task of the one environment, taken in both runs
    assert len(s["cases"]) == 2 and len({c["task_id"] for c in s["cases"]}) == 1
    assert sorted(c["run"] for c in s["cases"]) == [0, 1]
    for c in s["cases"]:
        assert len(c["case"]) == 12 and "m1" not in c["case"] and c["env"] == "cliffwalking"
    both = stratified_sample(runs, per_env=3, seed=0)
    assert len(both["cases"]) == 4
    # tasks without valid verdicts in every run are not offered
    partial = tmp_path / "m3"
    shutil.copytree(audited / "m2", partial)
    for p in (partial / "audit").glob("*ledge*"):
        p.unlink()
    s = stratified_sample([audited / "m1", partial], per_env=3)
    assert {c["task_id"] for c in s["cases"]} == {"cliffwalking/base"}
    shutil.rmtree(partial / "audit")
    with pytest.raises(RunFolderError, match="audit the runs first"):
        stratified_sample([audited / "m1", partial])


def test_a_person_labels_two_episodes_in_the_browser(audited, tmp_path, browser):
    sample_path = tmp_path / "sample.json"
    sample = stratified_sample([audited / "m1"], per_env=3, seed=0)
    sample_path.write_text(json.dumps(sample))
    labels_path = tmp_path / "labels.json"
    first, second = (c["case"] for c in sample["cases"])
    with LabelServer(sample_path, labels_path) as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        page.click("#next")
        assert page.url.endswith(f"/case/{first}")
        html = page.content()
        # the trajectory is there; the verdicts, the run and the model are not
        assert html.count("<img") >= 3 and "Turn 1" in html and "Last frame" in html
        assert "Baseline auditor" not in html and str(audited) not in html
        assert "openai-chat" not in html and "auditor-valid" not in html
        page.wait_for_load_state("load")  # every image fetched
        images = page.eval_on_selector_all("img", "els => els.map(e => e.naturalWidth)")
        assert images and all(w > 0 for w in images)
        # saving without every judgment is refused with a message, nothing is written
        page.check("input[name=rule_transfer][value=successful]")
        page.click("button[type=submit]")
        assert "choose strategy transfer" in page.content() and not labels_path.exists()
        page.check("input[name=strategy_transfer][value=overfit]")
        page.check("input[name=player_failure_stage][value=state_grounding]")
        page.fill("input[name=note]", "hugs the cliff")
        page.click("button[type=submit]")
        assert page.url.endswith(f"/case/{second}")
        page.check("input[name=rule_transfer][value=unsuccessful]")
        page.check("input[name=strategy_transfer][value=correct]")
        page.check("input[name=player_failure_stage][value=none]")
        page.click("button[type=submit]")
        assert page.url.rstrip("/") == server.url and "Every case is labelled" in page.content()
        page.close()
    saved = load_labels(labels_path, sample_path)["labels"]
    assert set(saved) == {first, second}
    assert {k: saved[first][k] for k in ("rule_transfer", "strategy_transfer",
                                         "player_failure_stage", "note")} == {
        "rule_transfer": "successful", "strategy_transfer": "overfit",
        "player_failure_stage": "state_grounding", "note": "hugs the cliff",
    }  # fmt: skip
    assert saved[second]["player_failure_stage"] == "none"
    # a labels file belongs to its sample
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**sample, "seed": 9}))
    with pytest.raises(RunFolderError, match="another sample"):
        LabelServer(other, labels_path)
