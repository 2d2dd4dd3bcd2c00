"""Start states restored from a snapshot equal start states replayed, for every task.

A simulator's first reset plays the seed, the initial skip and the human-init
actions; its second plays them again and saves the state when the adapter's
snapshot proves exact there (``save_first_start`` saves at the first); every
later reset restores that state. ``make_env`` hands
a closed environment's simulator to the next environment of the same task.
These tests compare each path with a fresh simulator's replayed start: the
start frame, score, pass flag, progress and lives, and the frames and scores of
a fixed sequence of decisions afterwards, with whole episodes played between
resets (a restore must undo everything they changed).
"""

from __future__ import annotations

import logging
import random
from collections import Counter

import pytest
from conftest import ALL_TASKS, per_env_sweep, spread

from vical.envs import close_idle, environment, make_adapter, make_env
from vical.envs.core import frame_sha256
from vical.envs.environment import (
    REPLAY_STARTS_VAR,
    VicalEnv,
    reusable,
    snapshot_fallbacks,
    start_state,
)

N_ACTIONS = 10


def sweep_params():
    """Every task; the default suite takes one plain and one human-init task per
    environment, ``nox -s slow`` (marker ``slow``) the rest."""
    return per_env_sweep(ALL_TASKS)


def fixed_actions(task, salt: str) -> list[str]:
    rng = random.Random(f"{task.id}|{salt}")
    return [rng.choice(task.action_names) for _ in range(N_ACTIONS)]


def observe(env: VicalEnv, actions: list[str]) -> list[tuple]:
    """Reset, then the fixed decisions: what a run of the task records."""
    frame = env.reset()
    lives = env.adapter.lives()
    out: list[tuple] = [
        ("start", frame_sha256(frame), env.score(), env.passed(), env.progress(), lives)
    ]
    assert (env.steps, env.done, env.outcome) == (0, False, None)
    for a in actions:
        if env.done:
            break
        s = env.step(a)
        out.append(
            (s.index, s.frame_sha256, s.score, s.passed, s.outcome, s.truncated, env.progress())
        )
    return out


def play_episode(env: VicalEnv, salt: str, limit: int = 60) -> None:
    """Reset and play random decisions (at most ``limit``), moving the simulator far off."""
    env.reset()
    rng = random.Random(f"{env.task.id}|{salt}")
    for _ in range(limit):
        if env.done:
            break
        env.step(rng.choice(env.task.action_names))


def fresh_env(task) -> VicalEnv:
    """An environment on a new simulator (never one from the pool): its reset replays."""
    return VicalEnv(task, make_adapter(task))


@pytest.mark.parametrize("task", spread(sweep_params(), 20))
def test_restored_start_equals_replayed_start(task):
    actions = fixed_actions(task, "after-start")
    with fresh_env(task) as env:
        expected = observe(env, actions)

    # as make_env builds it: the first reset replays the start and saves it
    env = VicalEnv(task, make_adapter(task), save_first_start=True)
    try:
        assert observe(env, actions) == expected, "first (replayed, saved) start differs"
        assert start_state(env.adapter) is not None, (
            f"{task.id}: the adapter's snapshot did not prove exact at the start state"
        )
        play_episode(env, "between")  # restored start, then an episode
        assert observe(env, actions) == expected, "restored start differs after an episode"
        assert observe(env, actions) == expected, "restored start differs on a repeat"
    finally:
        env.close()

    # verification's path: saved unchecked at the first reset, restored from then on
    trusted = VicalEnv(task, make_adapter(task), starts="trusted")
    try:
        assert observe(trusted, actions) == expected, "first (replayed, trusted) start differs"
        play_episode(trusted, "between")
        assert observe(trusted, actions) == expected, "trusted restored start differs"
    finally:
        trusted.close()


@pytest.mark.parametrize("task", spread(sweep_params(), 12))
def test_restored_start_without_begin_equals_replayed(task):
    """The authoring tools' start (``begin=False``): same frame and the same decisions."""
    actions = fixed_actions(task, "no-begin")

    def run(env: VicalEnv) -> list:
        out: list = [frame_sha256(env.reset(begin=False))]
        for a in actions:
            o = env.decide(a, started=False, watch_lives=True)
            out.append((o, frame_sha256(env.adapter.frame())))
            if o.bad:
                break
        return out

    with fresh_env(task) as env:
        expected = run(env)
    with fresh_env(task) as env:  # saves its start at the second reset
        play_episode(env, "first")
        assert run(env) == expected, "second (replayed, saved) start differs"
        assert start_state(env.adapter) is not None, (
            f"{task.id}: the adapter's snapshot did not prove exact at the start state"
        )
        play_episode(env, "between")
        assert run(env) == expected, "restored start differs"


def test_make_env_reuses_a_closed_simulator_and_restores_its_start():
    task = next(t for t in ALL_TASKS if t.env.env == "tennis")
    actions = fixed_actions(task, "pool")
    with fresh_env(task) as env:
        expected = observe(env, actions)
    close_idle()
    env = make_env(task)
    adapter = env.adapter
    assert observe(env, actions) == expected
    env.close()
    with make_env(task) as again:
        assert again.adapter is adapter, "the closed simulator was not reused"
        assert observe(again, actions) == expected  # its second start: replayed and saved
        assert start_state(adapter) is not None
        other = make_env(task)  # the pooled simulator is in use: a new one
        assert other.adapter is not adapter
        other.close()
    with make_env(task) as third:
        assert third.adapter is adapter
        assert observe(third, actions) == expected  # restored
    with pytest.raises(RuntimeError, match="closed"):
        third.reset()
    close_idle()


def test_start_snapshots_can_be_turned_off(monkeypatch):
    task = next(t for t in ALL_TASKS if t.env.env == "taxi")
    monkeypatch.setenv(REPLAY_STARTS_VAR, "1")
    close_idle()
    env = make_env(task)
    adapter = env.adapter
    for _ in range(3):
        play_episode(env, "off", limit=5)
    assert start_state(adapter) is None
    env.close()
    with make_env(task) as env2:
        assert env2.adapter is not adapter, "a simulator was pooled with start snapshots off"


def test_starts_names_one_of_three_ways():
    task = next(t for t in ALL_TASKS if t.env.env == "taxi")
    adapter = make_adapter(task)
    with pytest.raises(ValueError, match=r"starts='fast'.*checked, trusted, replayed"):
        VicalEnv(task, adapter, starts="fast")
    adapter.close()


def test_replayed_starts_save_nothing_and_are_never_pooled():
    task = next(t for t in ALL_TASKS if t.env.env == "pong")
    close_idle()
    env = make_env(task, starts="replayed")
    adapter = env.adapter
    frames = []
    for _ in range(3):
        frames.append(frame_sha256(env.reset()))
        play_episode(env, "replayed", limit=5)
    assert len(set(frames)) == 1
    assert start_state(adapter) is None and not reusable(adapter)
    env.close()
    with make_env(task) as env2:
        assert env2.adapter is not adapter


def test_trusted_and_checked_starts_keep_their_own_snapshots():
    """A simulator pooled by a trusted environment does not lend its unchecked
    snapshot to a checked one: the checked environment still replays and checks."""
    task = next(t for t in ALL_TASKS if t.env.env == "taxi")
    close_idle()
    env = make_env(task, starts="trusted")
    adapter = env.adapter
    first = frame_sha256(env.reset())
    assert frame_sha256(env.reset()) == first  # restored from the unchecked snapshot
    assert reusable(adapter) and start_state(adapter) is None
    env.close()
    with make_env(task) as checked:
        assert checked.adapter is adapter
        assert frame_sha256(checked.reset()) == first  # replayed: no checked start yet
        assert start_state(adapter) is None
    close_idle()


def test_snapshot_failing_at_the_start_falls_back_to_replay():
    """An adapter whose snapshot cannot be taken fails the check: every start is replayed,
    and its simulator is never pooled."""
    task = next(t for t in ALL_TASKS if t.env.env == "taxi")
    base = type(make_adapter(task))

    def snapshot(self):
        raise NotImplementedError("no save/restore in this simulator")

    broken = type("NoSnapshot", (base,), {"snapshot": snapshot})
    actions = fixed_actions(task, "broken")
    with fresh_env(task) as env:
        expected = observe(env, actions)
    env = VicalEnv(task, broken(task))
    for i in range(4):
        assert observe(env, actions) == expected, f"reset {i + 1}"
    assert start_state(env.adapter) is None
    assert not reusable(env.adapter)
    env.close()


def test_a_snapshot_fallback_is_logged_once_per_environment_and_counted(monkeypatch, caplog):
    """A snapshot that raises sends the start and a mid-episode snapshot back to replay:
    both fallbacks are counted for the environment, and one warning names the task, the
    environment and the reason; another environment's broken snapshot warns on its own,
    with the reason a restore that brings nothing back gives."""
    monkeypatch.setattr(environment, "_FALLBACKS", Counter())
    monkeypatch.setattr(environment, "_WARNED", set())
    taxi = next(t for t in ALL_TASKS if t.env.env == "taxi")
    cliff = next(t for t in ALL_TASKS if t.env.env == "cliffwalking")

    def snapshot(self):
        raise NotImplementedError("no save/restore in this simulator")

    def restore(self, state):  # keeps the simulator where it is
        return None

    raising = type("NoSnapshot", (type(make_adapter(taxi)),), {"snapshot": snapshot})
    lax = type("NoRestore", (type(make_adapter(cliff)),), {"restore": restore})
    with caplog.at_level(logging.WARNING, logger="vical.envs"):
        env = VicalEnv(taxi, raising(taxi))
        for _ in range(3):  # the second reset tries to save the start
            env.reset()
        env.step(taxi.action_names[0])
        snap = env.snapshot()  # mid-episode: the check fails too
        assert snap.native is None
        env.close()
        env = VicalEnv(cliff, lax(cliff))
        env.reset()
        env.reset()
        env.close()
    assert snapshot_fallbacks() == {"taxi": 2, "cliffwalking": 1}
    warnings = [r.getMessage() for r in caplog.records if r.name == "vical.envs"]
    assert len(warnings) == 2, warnings
    assert taxi.id in warnings[0] and "'taxi'" in warnings[0]
    assert "NotImplementedError: no save/restore in this simulator" in warnings[0]
    assert cliff.id in warnings[1] and "'cliffwalking'" in warnings[1]
    assert "played probe decisions differently" in warnings[1]


def test_restore_that_misses_state_is_caught():
    """A restore that brings back the Python-side state but leaves the simulator where
    the probe left it is not trusted: the starts stay replayed and identical."""
    task = next(t for t in ALL_TASKS if t.env.env == "tennis")
    base = type(make_adapter(task))

    def restore(self, state):
        base.restore(self, (self.ale.cloneState(), state[1]))

    lax = type("EmulatorNotRestored", (base,), {"restore": restore})
    actions = fixed_actions(task, "lax")
    with fresh_env(task) as env:
        expected = observe(env, actions)
    env = VicalEnv(task, lax(task))
    for i in range(3):
        assert observe(env, actions) == expected, f"reset {i + 1}"
    assert start_state(env.adapter) is None
    env.close()


def _emulator_pairs():
    """For every ALE game, two tasks whose emulators share their construction settings."""
    pairs, seen = [], set()
    for task in ALL_TASKS:
        if task.env.family != "ale" or task.env.env in seen:
            continue
        kw = dict(task.env_kwargs)
        other = next(
            (
                t
                for t in ALL_TASKS
                if t.env.env == task.env.env and t.id != task.id and dict(t.env_kwargs) == kw
            ),
            None,
        )
        if other is not None:
            seen.add(task.env.env)
            pairs.append(pytest.param(task, other, id=f"{task.id}+{other.variant.variant}"))
    return pairs


def _on_a_new_emulator(task, salt: str) -> tuple[list[str], list[tuple]]:
    """(fixed actions, what they record) on an emulator built for ``task``; the pool
    of idle emulators is left empty."""
    from vical.envs import ale

    actions = fixed_actions(task, salt)
    ale._IDLE_EMULATORS.clear()
    with fresh_env(task) as env:
        expected = observe(env, actions)
    ale._IDLE_EMULATORS.clear()
    return actions, expected


@pytest.mark.parametrize(("first", "second"), spread(_emulator_pairs(), 4))
def test_an_emulator_handed_to_another_task_starts_it_as_a_new_one(first, second):
    """A closed ALE adapter's emulator serves the next adapter of the same game: the
    seeded reset reloads the ROM, so the second task's start and decisions are those
    of an emulator built for it."""
    from vical.envs import ale

    actions, expected = _on_a_new_emulator(second, "handover")
    used = fresh_env(first)
    play_episode(used, "before the handover")
    emulator = used.adapter.env
    used.close()
    with fresh_env(second) as env:
        assert env.adapter.env is emulator, "the idle emulator was not reused"
        assert observe(env, actions) == expected
        play_episode(env, "between")
        assert observe(env, actions) == expected
    ale._IDLE_EMULATORS.clear()


def test_make_env_hands_an_idle_emulator_to_the_next_task_of_its_game():
    """An idle ALE simulator kept for its own task is closed when ``make_env`` builds
    another task of the same game, and the new adapter takes over its emulator; the
    new task plays as on an emulator of its own."""
    from vical.envs import _IDLE, ale

    first, second = _emulator_pairs()[0].values
    close_idle()
    actions, expected = _on_a_new_emulator(second, "idle handover")
    used = make_env(first)
    play_episode(used, "before")
    emulator = used.adapter.env
    used.close()
    assert any(entry[2] is used.adapter for entry in _IDLE), "not kept idle for its task"
    with make_env(second) as env:
        assert env.adapter.env is emulator, "the idle emulator was not handed on"
        assert not any(entry[2] is used.adapter for entry in _IDLE)
        assert observe(env, actions) == expected
    close_idle()
    ale._IDLE_EMULATORS.clear()


def _games():
    return sorted({t.env.env for t in ALL_TASKS if t.env.family == "ale"})


@pytest.mark.parametrize("game", spread(_games(), 4))
def test_trusted_starts_shared_between_tasks_equal_replayed_starts(game, monkeypatch):
    """Trusted starts of one game in one process resume from emulator states saved on
    the way to earlier tasks' starts (the seeded reset, points of the initial skip):
    every task's start and decisions are those of its replayed start, whichever order
    the tasks come in, and the ROM is loaded once for all of them where a step follows."""
    from ale_py.env import AtariEnv

    from vical.envs import ale

    tasks = [t for t in ALL_TASKS if t.env.env == game]
    expected = {}
    for task in tasks:
        with fresh_env(task) as env:
            expected[task.id] = observe(env, fixed_actions(task, "shared"))
    loads: list[int] = []
    reset = AtariEnv.reset

    def counted(self, *args, **kwargs):
        loads.append(1)
        return reset(self, *args, **kwargs)

    monkeypatch.setattr(AtariEnv, "reset", counted)
    ale._SEEDED.clear()
    ale._SKIPPED.clear()
    by_skip = sorted(tasks, key=lambda t: t.variant.initial_skip)
    try:
        for order in (by_skip[::-1], by_skip):  # smaller skips after larger ones, then after
            for task in order:
                env = VicalEnv(task, make_adapter(task), starts="trusted")
                try:
                    got = observe(env, fixed_actions(task, "shared"))
                finally:
                    env.close()
                assert got == expected[task.id], f"{task.id}: shared trusted start differs"
    finally:
        ale._SEEDED.clear()
        ale._SKIPPED.clear()
        ale._IDLE_EMULATORS.clear()
    counts_own_play = ale.plays_own_start(type(make_adapter(tasks[0])))
    unstepped = [t for t in tasks if not t.variant.initial_skip and not t.variant.init_actions]
    # emulators differ by construction settings (mode, difficulty) and seed
    kinds = {(repr(sorted(t.env_kwargs.items())), t.variant.seed) for t in tasks}
    if counts_own_play:
        assert len(loads) == 2 * len(tasks)  # such games play their whole start
    else:
        # one load per kind of emulator; starts with no step to redraw the screen load again
        assert len(loads) <= len(kinds) + 2 * len(unstepped), f"{len(loads)} ROM loads"
