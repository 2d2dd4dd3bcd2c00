"""The paper's analyses on small hand-built result sets; every expected number is worked by hand."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from vical.report import analyses as an
from vical.run.results import EvalResult


def ep(  # noqa: PLR0913 (a record factory: one keyword per EvalResult field a test varies)
    env="a",
    variant="v",
    k=0,
    score=0.0,
    passed=False,
    mode="early_termination",
    actions=("Up",),
    max_steps=50,
    types=("Maze",),
    memory="Single",
    dynamics="Static",
    tokens=0,
    start="s0",
):
    acts = list(actions)
    return EvalResult(
        task_id=f"{env}/{variant}",
        env=env,
        variant=variant,
        run_index=k,
        agent="test",
        seed=0,
        score=score,
        passed=passed,
        outcome="Victory" if passed else ("Time Out" if mode == "timeout" else "Terminated"),
        failure_mode=None if passed else mode,
        steps=len(acts),
        max_steps=max_steps,
        actions=acts,
        frame_hashes=[start] + [f"h{i}" for i in range(len(acts))],
        tags={"types": list(types), "memory": memory, "dynamics": dynamics},
        usage={"input_tokens": tokens, "output_tokens": 0} if tokens else {},
        wall_seconds=0,
        agent_seconds=0,
        started_at="t",
        finished_at="t",
        vical_version="0",
    )


# ---------------------------------------------------------------------------
# failure modes and φ (Table 25)
# ---------------------------------------------------------------------------
def test_failure_by_type_shares_and_phi_by_hand():
    results = [
        # Shooter: 1 pass, 3 early terminations, 0 timeouts
        ep("s", passed=True, types=("Shooter",)),
        ep("s", mode="early_termination", types=("Shooter",)),
        ep("s", mode="early_termination", types=("Shooter",)),
        ep("s", mode="early_termination", types=("Shooter", "Dodge")),
        # Maze: 2 timeouts, 1 early termination, 1 token overflow (other)
        ep("m", mode="timeout"),
        ep("m", mode="timeout"),
        ep("m", mode="early_termination"),
        ep("m", mode="token_overflow"),
    ]
    rows = {r["type"]: r for r in an.failure_by_type(results)}
    sh = rows["Shooter"]
    assert (sh["failed"], sh["episodes"]) == (3, 4)
    assert sh["failure_rate"] == pytest.approx(0.75)
    assert sh["early_termination"] == 1.0 and sh["timeout"] == 0.0
    mz = rows["Maze"]
    assert (mz["failed"], mz["episodes"]) == (4, 4)
    assert mz["timeout"] == pytest.approx(0.5) and mz["early_termination"] == pytest.approx(0.25)
    assert mz["other"] == pytest.approx(0.25)
    # φ among the 6 failures that ended by timeout or early termination:
    # Shooter membership x timeout: n11=0, n10=3 (shooter, early), n01=2 (maze timeouts),
    # n00=1 (maze early). φ = (0*1 - 3*2) / sqrt(3*3*2*4) = -6/sqrt(72)
    assert sh["phi_timeout"] == pytest.approx(-6 / math.sqrt(72))
    # Maze: n11=2, n10=1, n01=0, n00=3 -> (2*3 - 1*0)/sqrt(3*3*2*4) = 6/sqrt(72)
    assert mz["phi_timeout"] == pytest.approx(6 / math.sqrt(72))
    # Dodge: one member (early). n11=0,n10=1,n01=2,n00=3 -> (0-2)/sqrt(1*5*2*4)
    assert rows["Dodge"]["phi_timeout"] == pytest.approx(-2 / math.sqrt(40))
    assert "Sport" not in rows


def test_phi_undefined_without_variation():
    assert an.phi([True, True], [True, False]) is None


def test_failure_modes_per_run():
    rows = an.failure_modes(
        {"m": [ep(passed=True), ep(mode="timeout"), ep(mode="timeout"), ep(mode="api_error")]}
    )
    (r,) = rows
    assert (r["episodes"], r["passed"], r["failed"]) == (4, 1, 3)
    assert r["counts"]["timeout"] == 2 and r["counts"]["api_error"] == 1
    assert r["shares"]["timeout"] == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------
# episode length (Tables 27–28)
# ---------------------------------------------------------------------------
def test_episode_length_categories_and_statistics():
    results = [
        ep(passed=True, actions=["Up"] * 4, max_steps=10),  # early success (4 < 10)
        ep(passed=True, actions=["Up"] * 10, max_steps=10),  # pass at the budget -> budget
        ep(mode="early_termination", actions=["Up"] * 2, max_steps=10),  # early death
        ep(mode="timeout", actions=["Up"] * 10, max_steps=10),  # budget reached
        ep(mode="token_overflow", actions=["Up"] * 6, max_steps=10),  # other early stop
    ]
    cats = [an.length_category(r) for r in results]
    assert cats == [
        "early_success",
        "budget_reached",
        "early_death",
        "budget_reached",
        "early_other",
    ]
    s = an.length_stats(results)
    # lengths 4, 10, 2, 10, 6: mean 32/5 = 6.4; sample variance
    # ((4-6.4)^2 + (10-6.4)^2*2 + (2-6.4)^2 + (6-6.4)^2) / 4 = (5.76+25.92+19.36+0.16)/4 = 12.8
    assert s["mean"] == pytest.approx(6.4)
    assert s["sd"] == pytest.approx(math.sqrt(12.8))
    # sorted 2,4,6,10,10: median 6; linear quartiles at positions 1 and 3 -> 4 and 10
    assert (s["median"], s["q1"], s["q3"]) == (6.0, 4.0, 10.0)
    assert (s["min"], s["max"]) == (2, 10)
    assert s["early_success"] == pytest.approx(0.2) and s["budget_reached"] == pytest.approx(0.4)
    assert s["early_death"] == pytest.approx(0.2) and s["early_other"] == pytest.approx(0.2)


def test_episode_lengths_by_env_sorted_by_mean():
    runs = {
        "m1": [ep("long", actions=["Up"] * 9), ep("short", actions=["Up"] * 3)],
        "m2": [ep("long", actions=["Up"] * 7), ep("short", actions=["Up"] * 1)],
    }
    out = an.episode_lengths(runs)
    assert [r["run"] for r in out["by_model"]] == ["m1", "m2"]
    assert [(r["env"], r["n"], r["mean"]) for r in out["by_env"]] == [
        ("short", 2, 2.0),
        ("long", 2, 8.0),
    ]


# ---------------------------------------------------------------------------
# action distributions and the bias audit (Table 19)
# ---------------------------------------------------------------------------
def test_bias_audit_tv_and_excess_by_hand():
    # game g, 20 actions each. m1: 16 Left 4 Right; m2: 8 Left 12 Right.
    # pool: 24 Left 16 Right of 40 -> 0.6 / 0.4.
    # m1: Left 0.8 (excess +0.2), TV = 0.5(|0.8-0.6| + |0.2-0.4|) = 0.2 -> flagged (both >= 0.20)
    # m2: Right 0.6 (excess +0.2), TV = 0.5(|0.4-0.6| + |0.6-0.4|) = 0.2 -> flagged
    runs = {
        "m1": [ep("g", actions=["Left"] * 16 + ["Right"] * 4)],
        "m2": [ep("g", actions=["Left"] * 8 + ["Right"] * 12)],
    }
    audit = an.bias_audit(runs)
    rows = {r["run"]: r for r in audit["rows"]}
    assert rows["m1"]["action"] == "Left" and rows["m2"]["action"] == "Right"
    assert rows["m1"]["run_freq"] == pytest.approx(0.8)
    assert rows["m1"]["pool_freq"] == pytest.approx(0.6)
    assert rows["m1"]["excess"] == pytest.approx(0.2)
    assert rows["m1"]["tv"] == pytest.approx(0.2)
    assert rows["m1"]["bias"] and rows["m2"]["bias"]


def test_bias_audit_min_actions_and_tv_threshold():
    # m1 30 actions: 15 A, 15 B; m2 10 actions (not audited): 10 C.
    # pool: 15 A, 15 B, 10 C of 40 -> .375/.375/.25.
    # m1 excess on A/B: 0.5 - 0.375 = 0.125 < 0.2 ; TV = 0.5(0.125+0.125+0.25) = 0.25 -> no flag
    runs = {
        "m1": [ep("g", actions=["A"] * 15 + ["B"] * 15)],
        "m2": [ep("g", actions=["C"] * 10)],
    }
    audit = an.bias_audit(runs)
    assert [r["run"] for r in audit["rows"]] == ["m1"]
    (r,) = audit["rows"]
    assert r["excess"] == pytest.approx(0.125) and r["tv"] == pytest.approx(0.25)
    assert not r["bias"]


def test_action_distributions_rows_sum_to_one():
    runs = {"m1": [ep("g", actions=["A", "A", "B"])], "m2": [ep("g", actions=["B"])]}
    d = an.action_distributions(runs)["g"]
    assert d["actions"] == ["A", "B"]  # pooled 2 A, 2 B: tie broken by name
    assert d["rows"]["m1"]["freq"] == pytest.approx([2 / 3, 1 / 3])
    assert d["rows"]["m2"]["freq"] == [0.0, 1.0]


def test_total_variation():
    assert an.total_variation({"a": 1.0}, {"b": 1.0}) == 1.0
    assert an.total_variation({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}) == 0.0


# ---------------------------------------------------------------------------
# fixation and conflicting actions (Table 22)
# ---------------------------------------------------------------------------
def test_fixation_proxy_boundaries():
    nine_one = ["Up"] * 9 + ["Down"]  # 10 steps, 90% Up -> fixated when failed
    assert an.is_fixated(ep(actions=nine_one))
    assert not an.is_fixated(ep(actions=nine_one, passed=True))  # passed runs never count
    assert not an.is_fixated(ep(actions=["Up"] * 9))  # 9 steps < 10
    eight_two = ["Up"] * 8 + ["Down"] * 2  # 80% < 90%
    assert not an.is_fixated(ep(actions=eight_two))
    rows = an.action_fixation({"m": [ep(actions=nine_one), ep(actions=eight_two)]})
    assert rows[0]["fixated"] == 1 and rows[0]["examples"][0]["action"] == "Up"


def test_conflicting_responses_from_log(tmp_path):
    ep_dir = tmp_path / "episodes" / "a__v__r0"
    ep_dir.mkdir(parents=True)
    recs = [
        {"type": "response", "step": 0, "text": "[Action:Up]\nthen [Action:Down]"},
        {"type": "response", "step": 1, "answer": "[Action:Up] because [action: Up]"},
        {
            "type": "response",
            "step": 2,
            "text": "<think>[Action:Left]</think>[Action:Up]",
            "answer": "[Action:Up]",
        },
        {"type": "decision", "step": 2, "format_retries": 1},
        {"type": "response", "step": 3, "text": "[ Action : Left ] or [Action:Right]"},
    ]
    (ep_dir / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    audit = an.log_audit(tmp_path)
    # responses 0 and 3 name two different actions; 1 repeats one; 2's think block is not answer
    assert audit["responses"] == 4 and audit["conflicting"] == 2
    assert audit["format_retry_episodes"] == 1
    assert audit["examples"][1]["markers"] == ["Left", "Right"]


# ---------------------------------------------------------------------------
# difficulty strata (Eq. 2, Table 23)
# ---------------------------------------------------------------------------
def test_strata_boundaries_exact():
    rand = [ep("e70", score=10), ep("e30", score=20), ep("e71", score=0), ep("e29", score=1)]
    runs = {
        "m1": [ep("e70", score=80), ep("e30", score=50), ep("e71", score=71), ep("e29", score=30)],
        # m2 is better on e70 in one task but its environment mean is what counts:
        # tasks 60 and 90 -> mean 75 -> Δ = 65 ; the max over runs is m1's 80 -> Δ 70
        "m2": [ep("e70", "x", score=60), ep("e70", "y", score=90)],
    }
    rows = {r["env"]: r for r in an.difficulty_strata(runs, rand)}
    assert rows["e70"]["delta"] == pytest.approx(70) and rows["e70"]["tier"] == "Medium"
    assert rows["e70"]["best_run"] == "m1"
    assert rows["e30"]["delta"] == pytest.approx(30) and rows["e30"]["tier"] == "Medium"
    assert rows["e71"]["tier"] == "Easy"
    assert rows["e29"]["delta"] == pytest.approx(29) and rows["e29"]["tier"] == "Hard"
    assert an.tier(70.0000001) == "Easy" and an.tier(29.9999) == "Hard"


def test_strata_use_task_means_then_env_mean():
    # random: task x has runs 0 and 30 (mean 15), task y has 45 -> env mean 30
    rand = [ep("g", "x", 0, 0), ep("g", "x", 1, 30), ep("g", "y", 0, 45)]
    runs = {"m": [ep("g", "x", score=100), ep("g", "y", score=80)]}  # env mean 90
    (row,) = an.difficulty_strata(runs, rand)
    assert row["random_score"] == pytest.approx(30) and row["delta"] == pytest.approx(60)


# ---------------------------------------------------------------------------
# attribute associations (Table 24)
# ---------------------------------------------------------------------------
def test_memory_association_matches_scipy():
    # cells (run, env): memory tag and env mean score
    spec = [
        ("m1", "a", "Single", 80),
        ("m1", "b", "Multiple", 40),
        ("m1", "c", "Multiple", 50),
        ("m2", "a", "Single", 60),
        ("m2", "b", "Multiple", 45),
        ("m2", "c", "Multiple", 20),
    ]
    runs: dict[str, list] = {}
    for run, env, mem, s in spec:
        runs.setdefault(run, []).append(ep(env, score=s, memory=mem))
    out = an.attribute_associations(runs)["memory_score"]
    x = [int(m == "Multiple") for *_, m, _ in spec]
    y = [s for *_, s in spec]
    ref = stats.pointbiserialr(x, y)
    assert out["cells"] == 6
    assert out["r_pb"] == pytest.approx(ref.statistic)
    assert out["p"] == pytest.approx(ref.pvalue)
    assert out["group_means"]["Single"] == pytest.approx(70)
    assert out["group_means"]["Multiple"] == pytest.approx((40 + 50 + 45 + 20) / 4)


def test_dynamics_tokens_standardized_within_run():
    # m1 uses ~100x the tokens of m2; standardizing log tokens within run removes that scale.
    spec = {
        "m1": [("a", "Static", 1000), ("b", "Dynamic", 4000), ("c", "Dynamic", 2000)],
        "m2": [("a", "Static", 30), ("b", "Dynamic", 10), ("c", "Static", 20)],
    }
    runs = {
        run: [ep(env, dynamics=dyn, tokens=t) for env, dyn, t in cells]
        for run, cells in spec.items()
    }
    out = an.attribute_associations(runs)["dynamics_tokens"]
    xs, zs = [], []
    for cells in spec.values():
        logs = [math.log(t) for *_, t in cells]
        mu = sum(logs) / 3
        sd = math.sqrt(sum((v - mu) ** 2 for v in logs) / 3)
        zs += [(v - mu) / sd for v in logs]
        xs += [int(d == "Dynamic") for _, d, _ in cells]
    ref = stats.pointbiserialr(xs, zs)
    assert out["cells"] == 6
    assert out["r_pb"] == pytest.approx(ref.statistic)
    assert out["p"] == pytest.approx(ref.pvalue)
    assert out["group_means"]["Static"] == pytest.approx((1000 + 30 + 20) / 3)


def test_tokens_exclude_reasoning_double_count():
    r = ep(tokens=100)
    r.usage.update(output_tokens=50, reasoning_tokens=40)
    assert an.episode_tokens(r) == 150


def test_random_agent_without_tokens_has_no_token_cells():
    runs = {"random": [ep("a", dynamics="Static"), ep("b", dynamics="Dynamic")]}
    out = an.attribute_associations(runs)["dynamics_tokens"]
    assert out["cells"] == 0 and out["r_pb"] is None


# ---------------------------------------------------------------------------
# demo context (Figure 6) and trajectory strips (Figure 9)
# ---------------------------------------------------------------------------
def test_demo_context_counts_frames_per_clip():
    from vical.spec import all_tasks

    tasks = [t for t in all_tasks() if t.variant.demos][:3]
    dc = an.demo_context(tasks)
    for t in tasks:
        assert dc["frames"][t.id] == sum(len(c.actions) + 2 for c in t.variant.demos)
    assert dc["min"] == min(dc["frames"].values())


def test_trajectory_rows_same_start_and_pick():
    runs = {
        "m1": [ep("g", actions=["A", "B"], passed=True), ep("h", actions=["A"])],
        "m2": [ep("g", actions=["A"]), ep("g", k=1, actions=["B"], start="other")],
    }
    assert an.pick_strip_task(runs) == "g/v"  # the only task both played
    rows = an.trajectory_rows(runs, "g/v")
    assert [(r["run"], r["run_index"], r["same_start"]) for r in rows] == [
        ("m1", 0, True),
        ("m2", 0, True),
        ("m2", 1, False),
    ]
    assert rows[0]["episode"] == "g__v__r0"


def test_provenance_of_the_evaluated_tasks_and_its_section():
    """Counted from the task data of the tasks played (each once), shares stated; ids the
    task data does not hold are named, not counted."""
    from vical.report.sections import _provenance
    from vical.spec import get_task, origin_counts

    ids = ["asterix/lanes", "trondead/level2-a", "taxi/state1", "asterix/lanes", "nope/x"]
    prov = an.provenance(ids)
    tasks = [get_task(i) for i in ("asterix/lanes", "trondead/level2-a", "taxi/state1")]
    counts = origin_counts(tasks)
    assert prov["tasks"] == 3 and prov["unknown"] == ["nope/x"] and len(prov["digest"]) == 64
    assert prov["starts"] == counts["starts"] == {"paper": 1, "generated": 1, "human": 0}
    assert prov["clips"] == counts["clips"]
    section = _provenance(prov)
    caption = " ".join(section.caption.split())
    assert (
        "Of the 3 evaluated tasks, 2 start from a replayed start sequence: 1 (50%) the "
        "paper's, 1 (50%) generated by seeded recipes, 0 (0%) recorded by people." in caption
    )
    n = sum(counts["clips"].values())
    search, scripted = counts["clips"]["search"], counts["clips"]["scripted"]
    assert f"Their {n} distinct demonstration clips: {search} ({100 * search / n:.0f}%)" in caption
    assert "1 task(s) are not in the installed task data" in caption
    assert section.rows[0][:5] == ["start sequences", "2", "1 (50%)", "1 (50%)", "0 (0%)"]
    assert section.rows[1][1] == str(n) and section.rows[1][4] == "0 (0%)"
    assert section.rows[1][5:] == [
        f"{search} ({100 * search / n:.0f}%)",
        f"{scripted} ({100 * scripted / n:.0f}%)",
    ]
