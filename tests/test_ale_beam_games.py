"""Per-game rules of the ALE games whose starts and experts come from dense-start and beam
search: Alien, Assault, Asterix, BattleZone, Berzerk and ChopperCommand (paper Table 7
"manual modifications").

For every game: a search-found (or scripted) trajectory scores strictly more
than doing nothing, scores stay on [0, 100], losing a life ends the episode
as "Terminated" without a pass, the pass rule fires on a trajectory that
meets it, and the stored human-init sequences equal a fresh run of the
game's generator. The trajectories below were found with
``vical.authoring.search.beam_search`` (life-safe beam search) or by
seeded random play, and are replayed here as plain action lists.
"""

from __future__ import annotations

import importlib

import pytest
from conftest import spread

from vical.envs import make_env
from vical.spec import get_task, load_envs

GAMES = ["alien", "assault", "asterix", "battlezone", "berzerk", "choppercommand"]

# Good trajectories (task id -> actions).
GOOD = {
    "alien/base": [
        "Right",
        "Up+Shoot",
        "Down+Right+Shoot",
        "Left",
        "Up+Shoot",
        "NOOP",
        "Shoot",
        "Right",
        "Left+Shoot",
        "Down+Shoot",
        "Up",
        "Right+Shoot",
        "Left+Shoot",
        "NOOP",
        "Shoot",
        "Down",
        "Up+Shoot",
        "Down",
        "Shoot",
        "Shoot",
        "Shoot",
        "Left",
        "Shoot",
        "Shoot",
        "Left+Shoot",
        "Up+Right",
        "Shoot",
        "Shoot",
        "Left+Shoot",
        "Right+Shoot",
        "Down+Shoot",
        "Up",
        "Left+Shoot",
        "Shoot",
        "Shoot",
        "Shoot",
        "Up",
        "Shoot",
        "NOOP",
        "Right",
        "Shoot",
        "NOOP",
        "NOOP",
    ],
    "asterix/base": [
        "Down+Right",
        "Down+Right",
        "Up+Right",
        "Up",
        "Up+Left",
        "Right",
        "NOOP",
        "Left",
        "Down+Left",
        "Left",
        "Down+Left",
        "Down",
        "Down+Left",
        "Left",
        "Up+Left",
        "Down+Left",
        "Right",
        "Up",
        "Right",
        "Right",
        "Up+Right",
        "Down+Right",
        "Up+Right",
        "Down+Left",
        "Down+Left",
        "Right",
        "Down",
        "Up+Left",
        "Up",
        "Left",
        "Up+Left",
        "Up+Left",
        "Down+Left",
        "Up+Left",
        "NOOP",
        "Right",
        "Down",
        "Left",
        "Up+Right",
        "Up+Right",
        "Up+Right",
        "Up+Right",
        "NOOP",
        "Right",
        "Down",
        "Up+Left",
        "Up+Left",
        "NOOP",
        "Up+Left",
        "Left",
    ],
    "berzerk/mode1": [
        "Shoot",
        "Down+Right+Shoot",
        "Up+Shoot",
        "Down+Right+Shoot",
        "Right",
        "Up+Left",
        "Left+Shoot",
        "Down+Left+Shoot",
        "Up+Left+Shoot",
        "Up+Left+Shoot",
        "NOOP",
        "Down",
        "Right",
        "Left+Shoot",
        "Shoot",
        "Left",
        "Down+Right",
        "Down+Right",
        "NOOP",
        "Up+Right+Shoot",
        "Right+Shoot",
        "Up+Left+Shoot",
        "Down+Right+Shoot",
        "Up+Left+Shoot",
        "Up+Shoot",
        "Down+Left+Shoot",
        "Down+Shoot",
        "Up+Shoot",
        "Shoot",
        "Down+Left",
        "Down+Left",
        "Down+Left+Shoot",
        "Right+Shoot",
        "NOOP",
        "Down+Left+Shoot",
        "Shoot",
        "Up+Left+Shoot",
        "Down+Right",
        "Up",
        "Right+Shoot",
        "Down+Left+Shoot",
        "Up",
        "Up+Left+Shoot",
        "Right",
        "Down+Left+Shoot",
        "NOOP",
        "Up+Left+Shoot",
        "Up+Right+Shoot",
        "Down+Right+Shoot",
        "Down+Left",
        "Up",
        "Up",
        "Up+Left",
        "Right",
        "Left+Shoot",
        "Left",
        "Down+Right",
        "Down+Left+Shoot",
        "Up+Right+Shoot",
        "Down+Shoot",
        "Down+Right+Shoot",
        "Down",
        "NOOP",
        "Up+Left+Shoot",
        "Right",
        "Up",
        "Left",
        "Up+Left+Shoot",
        "Up",
        "Up+Left+Shoot",
    ],
    "choppercommand/base": [
        "Up+Right+Shoot",
        "Left",
        "Up+Left",
        "Up+Right+Shoot",
        "Up+Left",
        "Shoot",
        "Up+Left+Shoot",
        "Up+Left",
        "Right+Shoot",
        "NOOP",
        "Left+Shoot",
        "Right",
        "Up+Left",
        "Up+Left",
        "Up",
        "Down+Left+Shoot",
        "Down+Left+Shoot",
        "Up+Left+Shoot",
        "NOOP",
        "Up+Right+Shoot",
        "Up+Left",
        "Up+Left+Shoot",
        "Up+Right+Shoot",
        "Left+Shoot",
        "Up+Left",
        "Down+Left",
        "Down",
        "Down+Right",
        "Up+Left",
        "Left",
        "Down+Shoot",
        "Down+Shoot",
    ],
    "battlezone/m1-s36": [
        "Right",
        "Down+Right+Shoot",
        "Up+Left",
        "Down+Right",
        "Down+Right",
        "Down+Left",
        "Up",
        "Up+Right+Shoot",
    ],
}

GOOD["assault/base"] = ["Up"] * 30  # scripted: keep firing straight up

# Seeded random play (seed 31) that crashes the helicopter on the base task.
CHOPPER_CRASH = [
    "NOOP",
    "Up+Left+Shoot",
    "Right",
    "Left+Shoot",
    "Left",
    "Shoot",
    "Left",
    "Right",
    "Down+Left+Shoot",
    "Up+Left",
    "Left",
    "Left",
    "Shoot",
    "Shoot",
    "Left",
    "Up+Left",
    "Down+Left+Shoot",
    "Up+Right+Shoot",
    "Down+Right+Shoot",
    "Down+Shoot",
    "Up+Right",
    "Up",
    "Right",
    "NOOP",
    "Left+Shoot",
    "Up+Shoot",
]

# Trajectories that lose a life: (task id, actions).
LIFE_LOSS = {
    "alien": ("alien/base", ["NOOP"] * 76),
    "assault": ("assault/base", ["NOOP"] * 48),
    "asterix": ("asterix/base", ["NOOP"] * 50),
    "battlezone": ("battlezone/m3-s36-a", ["NOOP"] * 50),
    "berzerk": ("berzerk/mode1", ["NOOP"] * 70),
    "choppercommand": ("choppercommand/base", CHOPPER_CRASH),
}


def play(task_id: str, actions: list[str]):
    """Replay actions; return (final score, passed, outcome, every step score, lives lost)."""
    task = get_task(task_id)
    env = make_env(task)
    try:
        env.reset()
        lives0 = env.adapter.lives()
        scores = []
        for a in actions:
            if env.done:
                break
            scores.append(env.step(a).score)
        lost = lives0 - env.adapter.lives()
        return env.score(), env.passed(), env.outcome, scores, lost
    finally:
        env.close()


def do_nothing(task_id: str):
    return play(task_id, ["NOOP"] * get_task(task_id).max_steps)


@pytest.mark.parametrize("task_id", sorted(GOOD))
def test_good_trajectory_beats_doing_nothing(task_id):
    good, good_pass, _, scores, _ = play(task_id, GOOD[task_id])
    idle, idle_pass, _, idle_scores, _ = do_nothing(task_id)
    assert good > idle
    assert good_pass and not idle_pass
    assert all(0.0 <= s <= 100.0 for s in scores + idle_scores)


@pytest.mark.parametrize("game", GAMES)
def test_life_loss_terminates_without_pass(game):
    task_id, actions = LIFE_LOSS[game]
    assert get_task(task_id).env.life_loss_terminates
    score, passed, outcome, scores, lost = play(task_id, actions)
    assert outcome == "Terminated"
    assert not passed
    assert lost >= 1
    assert len(scores) < get_task(task_id).max_steps
    assert 0.0 <= score <= 100.0


# generators that screen each candidate start with the reflex screen's battery
# (vical.authoring.search.screen_viable) take tens of seconds: nox -s slow; the default
# suite holds them with a stand-in check (tests/test_authoring_viable_starts.py)
SCREENED = {"berzerk", "choppercommand"}


@pytest.mark.parametrize(
    "game",
    spread([pytest.param(g, marks=pytest.mark.slow) if g in SCREENED else g for g in GAMES], 1),
)
def test_stored_init_actions_match_generator(game):
    spec = load_envs()[game]
    module = importlib.import_module(f"vical.authoring.recipes.{game}")
    fresh = module.generate_init_actions(spec)
    # sequences the paper spells out (Figure 5: asterix/lanes) are data, not generator output
    generated = [t for t in spec.tasks if not (t.init_source or "").startswith("paper:")]
    stored = {t.variant: t.init_actions for t in generated if t.kind == "human-init"}
    assert fresh == stored
    for t in generated:
        if t.init_actions:
            assert f"vical.authoring.recipes.{game}.generate_init_actions" in (t.init_source or "")


def test_alien_pass_and_victory_thresholds():
    score, passed, outcome, scores, _ = play("alien/base", GOOD["alien/base"])
    assert passed and outcome == "Victory" and score == 100.0
    # the pass (75 points = 50 on the scale) came before the 150-point victory
    first_pass = next(i for i, s in enumerate(scores) if s >= 50.0)
    assert first_pass < len(scores) - 1


def test_alien_ignores_one_shot_bonuses():
    env = make_env(get_task("alien/base"))
    try:
        f = env.adapter.reward_filter
        assert f(10.0) == 10.0
        assert f(500.0) == 0.0
        assert f(510.0) == 10.0
    finally:
        env.close()


def test_assault_completion_bonus_rewards_speed():
    fast = play("assault/base", ["Up"] * 30)
    slow = play("assault/base", ["Up", "NOOP"] * 24)
    for score, passed, outcome, _, _ in (fast, slow):
        assert passed and outcome == "Victory"
        assert 80.0 < score <= 100.0
    assert fast[0] > slow[0]


def test_asterix_death_penalty_lowers_the_score():
    env = make_env(get_task("asterix/base"))
    try:
        env.reset()
        env.adapter.total = 250.0
        alive = env.score()
        env.adapter.died = True
        assert env.score() == pytest.approx(alive - 100.0 / 3.0)
    finally:
        env.close()


def test_battlezone_first_hit_timing_and_survival():
    """A hit scores by its timing, survival adds its share; the hit does not end the
    episode (Table 28: no early success) and the pass needs the life kept."""
    good = GOOD["battlezone/m1-s36"]
    task = get_task("battlezone/m1-s36")
    score, passed, outcome, scores, lost = play(
        "battlezone/m1-s36", good + ["NOOP"] * (task.max_steps - len(good))
    )
    n = len(good)  # the first hit comes with the last good action
    assert passed and outcome == "Time Out" and lost == 0 and len(scores) == task.max_steps
    assert score == pytest.approx(40 + 30 * (1 - (n - 1) / 50) + 30)
    idle = do_nothing("battlezone/m1-s36")
    assert idle[2] == "Time Out" and idle[0] == pytest.approx(30.0) and not idle[1]
    died = play(*LIFE_LOSS["battlezone"])
    assert died[2] == "Terminated" and not died[1] and 0.0 < died[0] < 30.0


def test_battlezone_hit_then_death_fails():
    """The issue's case: holding Shoot hits at decision 3 of m2-s110-b; the episode goes
    on, the tank is lost later, and the task fails (a pass needs the life kept)."""
    score, passed, outcome, scores, lost = play("battlezone/m2-s110-b", ["Shoot"] * 50)
    assert outcome == "Terminated" and lost == 1 and not passed
    assert 3 < len(scores) < 50
    # the cap after death: the hit's 40 + 30 * (1 - 2/50) is not kept, only what a live
    # player without a hit could score (the survival part, 30)
    assert score == pytest.approx(30.0)
    assert max(scores[:-1]) >= 40 + 30 * (1 - 2 / 50)  # held while the tank was alive


def test_berzerk_points_without_survival_do_not_pass():
    score, passed, outcome, _, _ = do_nothing("berzerk/mode3")
    assert outcome == "Terminated" and score >= 60.0 and not passed


# Found by a short life-safe beam search toward the top gap of the outer wall.
BERZERK_EXIT = ["Up", "Up+Right", "Up+Right", "Up+Left", "Up+Right", "Up+Left", "Up+Right"]
BERZERK_EXIT += ["Up+Right", "Up+Right", "Right+Shoot", "Up+Right", "Right", "Right", "Up+Right"]


def test_berzerk_leaving_the_room_ends_early_in_victory():
    """The room's own objective: walking out through a gap passes at once (Table 28's
    early successes) and scores full marks, though it earns fewer points than the
    survival pass threshold; every decision before the exit scores points only."""
    task = get_task("berzerk/mode1")
    score, passed, outcome, scores, lost = play("berzerk/mode1", BERZERK_EXIT)
    assert outcome == "Victory" and passed and lost == 0
    assert len(scores) == len(BERZERK_EXIT) < task.max_steps
    assert score == 100.0
    assert max(scores[:-1]) < 100.0 * task.target("pass_reward") / task.target("reward")
