"""The cap after death (paper Appendix 2.2: "selected environments additionally cap the
retained score after death"): a dying episode keeps at most what a live player who does
not pass can score; a surviving one keeps its score; environments the task data does not
select are never capped."""

from __future__ import annotations

import pytest

from vical.envs import make_env
from vical.envs.scoring import CAP_AFTER_DEATH, cap_after_death, capped_ratio
from vical.spec import all_tasks, load_envs

ENVS = load_envs()
CAPPED = sorted(k for k, e in ENVS.items() if e.scoring.params.get(CAP_AFTER_DEATH))


def first_task(env_key: str):
    return next(t for t in all_tasks() if t.env.env == env_key)


def test_rule_on_its_own():
    on = {CAP_AFTER_DEATH: True}
    assert cap_after_death(on, died=True, non_pass_ceiling=lambda: 42.0) == 42.0
    assert cap_after_death(on, died=False, non_pass_ceiling=lambda: 42.0) is None
    assert cap_after_death({}, died=True, non_pass_ceiling=lambda: 42.0) is None
    assert cap_after_death(on, died=True, non_pass_ceiling=lambda: 140.0) == 100.0
    with pytest.raises(ValueError, match="cap_after_death must be true or false"):
        cap_after_death({CAP_AFTER_DEATH: 50}, died=True, non_pass_ceiling=lambda: 1.0)


def test_selected_environments_are_the_ones_whose_pass_needs_the_life():
    # the docs' list (docs/random-row.md): every game whose pass needs the life kept to
    # the end while its score can reach the pass level before that end
    assert CAPPED == [
        "asterix",
        "battlezone",
        "berzerk",
        "choppercommand",
        "demonattack",
        "mspacman",
        "ninja",
        "riverraid",
        "seaquest",
        "trondead",
        "turmoil",
    ]
    for key in CAPPED:
        prov = ENVS[key].scoring.provenance.get(CAP_AFTER_DEATH, "")
        assert prov.startswith("calibrated: ours") and "Appendix 2.2" in prov, key


@pytest.mark.parametrize("env_key", CAPPED)
def test_a_death_is_capped_at_the_non_pass_ceiling_and_a_life_kept_is_not(env_key):
    env = make_env(first_task(env_key))
    try:
        env.reset()
        ad = env.adapter
        ceiling = ad.non_pass_ceiling()
        assert 0.0 < ceiling < 100.0
        assert ad.death_cap() is None  # alive: nothing capped
        ad.died = True
        assert ad.death_cap() == pytest.approx(ceiling)
        assert not env.passed()  # a death fails these tasks whatever was reached
    finally:
        env.close()


def test_battlezone_hit_then_death_keeps_only_the_survival_part():
    task = first_task("battlezone")
    p = task.params
    env = make_env(task)
    try:
        env.reset()
        ad = env.adapter
        ad.event_at, ad.slots = 1, 40 * task.env.frame_skip  # a hit at once, 40 decisions
        alive = env.score()
        assert alive == pytest.approx(
            p["hit_weight"] + p["timing_weight"] + p["survival_weight"] * 40 / task.max_steps
        )
        ad.died = True  # the same episode, ended by a hit on the tank
        assert env.score() == pytest.approx(p["survival_weight"])  # 30, not 93.4
        assert env.score() < alive and not env.passed()
    finally:
        env.close()


def test_points_game_death_keeps_at_most_the_threshold_score():
    task = first_task("riverraid")
    env = make_env(task)
    try:
        env.reset()
        ad = env.adapter
        ad.total = 0.9 * task.target("reward")  # well past the pass threshold
        assert env.score() == pytest.approx(90.0) and env.passed()
        ad.died = True
        threshold = capped_ratio(task.target("pass_reward"), task.target("reward"))
        assert env.score() == pytest.approx(threshold) and not env.passed()
        ad.total = 0.1 * task.target("reward")  # below the cap: kept as it is
        assert env.score() == pytest.approx(10.0)
    finally:
        env.close()


def test_unselected_environment_keeps_its_score_after_death():
    assert "alien" not in CAPPED
    task = first_task("alien")
    env = make_env(task)
    try:
        env.reset()
        env.adapter.total = task.target("reward")
        env.adapter.died = True
        assert env.adapter.death_cap() is None and env.score() == 100.0
    finally:
        env.close()
