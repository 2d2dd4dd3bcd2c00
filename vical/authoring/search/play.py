"""Play and planning on a :class:`~vical.authoring.sim.DecisionSim` (a task's start
before scoring begins, every lost life reported): deathless play, random shooting,
one-step look-ahead and beam searches.

All of them are deterministic (randomness only from :class:`random.Random` with fixed
seeds) and work at decision level through the runtime's own decision step, so a found
action list replays exactly through ``make_env``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from vical.authoring.sim import DecisionSim
from vical.envs.environment import Snapshot

Policy = Callable[[DecisionSim, random.Random], str]


def play_without_dying(
    sim: DecisionSim,
    policy: Policy,
    n: int,
    seed: int,
    back: int = 6,
    max_rewinds: int = 200,
) -> list[str]:
    """``n`` decisions of ``policy`` that never end the game or lose a life.

    Checkpoints are kept every decision; when a decision ends the game or costs
    a life, play rewinds ``back`` decisions (further on repeated failure) and
    continues with a fresh branch of the seeded random stream. Raises
    :class:`RuntimeError` if ``max_rewinds`` rewinds do not get past a danger.
    """
    rng = random.Random(seed)
    actions: list[str] = []
    states = [sim.clone()]
    rewinds = 0
    depth = back
    while len(actions) < n:
        name = policy(sim, rng)
        if sim.step(name).bad:
            rewinds += 1
            if rewinds > max_rewinds:
                raise RuntimeError(f"no safe continuation after {len(actions)} decisions")
            keep = max(0, len(actions) - depth)
            del actions[keep:]
            del states[keep + 1 :]
            sim.restore(states[keep])
            rng = random.Random(f"{seed}/{rewinds}")
            depth = min(depth + 2, 4 * back)
            continue
        actions.append(name)
        states.append(sim.clone())
        if len(actions) % back == 0:
            depth = back
    return actions


def lookahead_policy(
    sim: DecisionSim,
    actions: Sequence[str],
    horizon: int,
    value: Callable[[DecisionSim, float, bool], float],
    rollout: Callable[[int], Sequence[str]] | None = None,
) -> str:
    """Pick the action whose short rollout scores best; ties go to the earlier action.

    For each candidate action the state is saved, the action is taken and
    followed by ``horizon - 1`` decisions of ``rollout(i)`` (default: repeat the
    candidate), then ``value(sim, reward, survived)`` rates the end state. The
    state is restored before returning.
    """
    root = sim.clone()
    best_name, best_val = actions[0], -float("inf")
    for name in actions:
        sim.restore(root)
        plan = [name, *(rollout(horizon - 1) if rollout else [name] * (horizon - 1))]
        o = sim.run(plan)
        v = value(sim, o.reward, not o.bad)
        if v > best_val:
            best_name, best_val = name, v
    sim.restore(root)
    return best_name


def chunk_search(
    sim: DecisionSim,
    policy: Policy,
    n: int,
    seed: int,
    chunk: int = 5,
    candidates: int = 8,
    value: Callable[[DecisionSim, float], float] | None = None,
) -> list[str]:
    """Random-shooting planner: ``n`` decisions picked ``chunk`` at a time.

    For each chunk, ``candidates`` seeded policy rollouts of ``chunk``
    decisions are tried, each followed by one more chunk of policy play to
    check it does not walk into a death; the candidate with the best
    ``value(sim, reward)`` (default: reward of the chunk) plus half the reward
    of the follow-up chunk (shots still in flight) among the survivors is kept.
    Falls back to the best non-surviving candidate when none survives.
    """
    rng = random.Random(seed)
    actions: list[str] = []
    while len(actions) < n:
        root = sim.clone()
        best: tuple[float, list[str]] | None = None
        for _ in range(candidates):
            sim.restore(root)
            plan = [policy(sim, rng)]
            total, alive = 0.0, True
            for i in range(min(chunk, n - len(actions))):
                if i:
                    plan.append(policy(sim, rng))
                o = sim.step(plan[-1])
                total += o.reward
                if o.bad:
                    alive = False
                    break
            v = value(sim, total) if value and alive else total
            if alive:
                later = sim.run([policy(sim, rng) for _ in range(chunk)])
                v += 0.5 * later.reward
                alive = not later.bad
            rating = v + (0.0 if alive else -1e6)
            if best is None or rating > best[0]:
                best = (rating, plan)
        sim.restore(root)
        assert best is not None
        sim.run(best[1])
        actions.extend(best[1])
    return actions[:n]


def beam_search(
    sim: DecisionSim,
    depth: int,
    width: int = 8,
    actions: list[str] | None = None,
    value: Callable[[float, int], float] | None = None,
    seed: int = 0,
    full_depth: bool = False,
    counted: bool = False,
) -> tuple[float, list[str]]:
    """Highest-value action list of length <= ``depth`` that never loses a life.

    ``value(total_reward, steps)`` ranks beam entries (default: total reward;
    with ``counted``, only the reward the task's score counts). Entries whose
    RAM is identical are merged, and ties are broken by an RNG seeded with
    ``seed`` so the beam keeps exploring while no reward has been seen. Returns
    the best value found and its action list; with ``full_depth``, only lists
    that survive all ``depth`` decisions count.
    """
    names = actions or list(sim.actions)
    value = value or (lambda total, steps: total)
    rng = random.Random(seed)
    beam: list[tuple[float, list[str], Any]] = [(0.0, [], sim.clone())]
    best: tuple[float, list[str]] = (value(0.0, 0), [])
    for step in range(depth):
        # RAM -> (value, tie-break, total, actions, state)
        nxt: dict[bytes, tuple[float, float, float, list[str], Snapshot]] = {}
        for total, seq, state in beam:
            for name in names:
                sim.restore(state)
                o = sim.step(name)
                if o.bad:
                    continue
                t = total + (sim.counted(o.reward) if counted else o.reward)
                key = sim.ram().tobytes()
                if key in nxt and nxt[key][0] >= value(t, step + 1):
                    continue
                nxt[key] = (value(t, step + 1), rng.random(), t, [*seq, name], sim.clone())
        if not nxt:
            break
        ranked = sorted(nxt.values(), key=lambda x: (-x[0], x[1]))
        beam = [(t, s, st) for _, _, t, s, st in ranked[:width]]
        if ranked[0][0] > best[0] or (full_depth and step == depth - 1):
            best = (ranked[0][0], ranked[0][3])
    return best


def live_beam_search(
    sim: DecisionSim,
    depth: int,
    width: int = 32,
    actions: list[str] | None = None,
    seed: int = 0,
    events: Callable[[float], int] | None = None,
    goal: int | None = None,
    stuck_limit: int = 3,
) -> list[str]:
    """Beam search for ``goal`` events that also sets aside states already doomed.

    Like :func:`beam_search` (RAM-merged entries, lists that lose a life
    dropped, seeded tie-break), but an entry every one of whose actions leads
    to the same RAM ignores the input; after ``stuck_limit`` such expansions in
    a row the entry ranks below every other (some games play a long death
    animation before the life counter drops: in Frostbite about a dozen
    decisions of a sinking player). Entries rank by (not stuck, events,
    counted reward); ``events(reward)`` counts the events in a decision's raw
    reward (default: one per rewarded decision). Returns the first action list
    that reaches ``goal`` events, else the best one seen.
    """
    names = actions or list(sim.actions)
    count = events or (lambda r: 1 if r > 0 else 0)
    rng = random.Random(seed)
    # (rank, events, stuck, actions, state); rank = (alive, events, reward)
    beam: list[tuple[tuple[bool, int, float], int, list[str], Snapshot]] = [
        ((True, 0, 0.0), 0, [], sim.clone())
    ]
    best: tuple[tuple[int, float], list[str]] = ((0, 0.0), [])
    for _step in range(depth):
        nxt: dict[bytes, tuple[tuple[bool, int, float], float, int, list[str], Snapshot]] = {}
        for (_alive, ev, total), stuck, seq, state in beam:
            kids: list[tuple[bytes, int, float, list[str], Snapshot]] = []
            rams: set[bytes] = set()
            for name in names:
                sim.restore(state)
                o = sim.step(name)
                ram = sim.ram().tobytes()
                rams.add(ram)
                if o.bad:
                    continue
                e = ev + count(o.reward)
                if goal is not None and e >= goal:
                    return [*seq, name]
                kids.append((ram, e, total + sim.counted(o.reward), [*seq, name], sim.clone()))
            stuck2 = stuck + 1 if len(rams) == 1 and len(names) > 1 else 0
            for ram, e, t, s, st in kids:
                rank = (stuck2 < stuck_limit, e, t)
                if ram in nxt and nxt[ram][0] >= rank:
                    continue
                nxt[ram] = (rank, rng.random(), stuck2, s, st)
        if not nxt:
            break
        ranked = sorted(nxt.values(), key=lambda x: (x[0], -x[1]), reverse=True)
        beam = [(rank, stuck, s, st) for rank, _, stuck, s, st in ranked[:width]]
        top = ranked[0]
        if (top[0][1], top[0][2]) > best[0]:
            best = ((top[0][1], top[0][2]), top[3])
    return best[1]
