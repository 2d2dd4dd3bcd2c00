"""The strict reading of the Table 25 / Table 28 early-death bookkeeping, as a solver.

Table 25 splits the 624 failed leading-model episodes into 506 in-environment
endings (ET) and 118 timeouts, per game type; Table 28 splits the same 1,368
episodes per environment into early success, early death (ED) and budget
reached. An early death is "an in-environment failure [that] terminates the run
without a pass" with fewer steps than the budget, so every early death is an
in-environment failure; the 506 - 502 = 4 in-environment failures that are not
early deaths are runs that died on their last decision (length = budget, so
Table 28 files them under budget reached). Those 4 runs are episodes of some
environments. The strict reading asks for a placement ``s`` of the 4 runs
(``s[e]`` of them in environment ``e``) with, for every type T,

    ED(members of T) + s(members of T) = ET(T),

and likewise for the timeouts: per-environment counts ``to[e]`` with
``to[e] + s[e] <= budget reached[e]``, summing to 118 overall and to Table 25's
timeouts per type.

The solver keeps every other constraint ``tests/test_paper_fidelity.py`` holds
the tags to (type task counts, Control and Sport fixed, Collect = eight 5-task
environments, Dodge disjoint from Control/Sport and all Multiple memory, at most
21 Dodge environments, memory/dynamics as tagged, every environment with a type).
It searches in two ways, each listing assignments nearest first (distance = the
number of (environment, type) changes from the current tags):

* ``solve_menu``: complete inside ``MENU``, the types each game could carry on
  any reading of it;
* ``solve(max_flips)``: every assignment the tests allow within ``max_flips``
  changes, whatever the game.

The timeout rule is checked per assignment on request (``Solution.timeouts_ok``),
not during the search. The figures quoted in docs/paper-tags.md come from

    .venv/bin/python tests/strict_tags.py [--flips N] [--any-surplus-env]
"""

from __future__ import annotations

import argparse
import itertools
from collections import defaultdict
from dataclasses import dataclass
from functools import cache

from vical.paper import ENVS, TABLE25, TABLE28, TYPE_TASKS
from vical.spec import ENV_TYPES, load_envs

SURPLUS = 506 - 502  # in-environment failures that are not early deaths
TIMEOUTS = 118
FREE_TYPES = ("Maze", "Shooter", "Dodge", "Collect")  # Control and Sport are fixed
FIXED = {"Control": {"acrobot", "cartpole", "mountaincar"}, "Sport": {"pong", "tennis"}}
DODGE_MAX = 21  # tests/test_paper_fidelity.py::test_dodge_environment_count_fits_table1


@dataclass(frozen=True)
class Data:
    envs: tuple[str, ...]
    tasks: dict[str, int]
    ed: dict[str, int]
    budget: dict[str, int]
    current: dict[str, frozenset[str]]
    single: frozenset[str]


@cache
def load() -> Data:
    specs = {k: s for k, s in load_envs().items() if k in ENVS}  # the paper's environments
    envs = tuple(sorted(specs))
    ed, budget = {}, {}
    for k in envs:
        row = TABLE28[k]
        ed[k] = round(row.n * row.early_death / 100)
        budget[k] = row.n - ed[k] - round(row.n * row.early_success / 100)
    return Data(
        envs=envs,
        tasks={k: len(specs[k].tasks) for k in envs},
        ed=ed,
        budget=budget,
        current={k: frozenset(specs[k].tags.types) for k in envs},
        single=frozenset(k for k in envs if specs[k].tags.memory == "Single"),
    )


def targets() -> dict[str, tuple[int, int, int]]:
    """Type -> (tasks, in-environment failures, timeouts) from Table 25."""
    out = {}
    for t, (failed, _all, et_pct, _to) in TABLE25.items():
        et = round(failed * et_pct / 100)
        out[t] = (TYPE_TASKS[t], et, failed - et)
    return out


def surplus_capacity(d: Data, any_env: bool = False) -> dict[str, int]:
    """How many of the 4 runs each environment can hold: its budget-reached runs,
    and (unless ``any_env``) only where Table 28 shows in-environment failures."""
    cap = {}
    for k in d.envs:
        ok = d.budget[k] > 0 and (any_env or d.ed[k] > 0)
        cap[k] = min(d.budget[k], SURPLUS) if ok else 0
    return cap


# -- per-type moves ---------------------------------------------------------------


def _allowed(d: Data, t: str) -> set[str]:
    if t == "Collect":
        return {k for k in d.envs if d.tasks[k] == 5}
    if t == "Dodge":
        return {k for k in d.envs if k not in FIXED["Control"] | FIXED["Sport"] | d.single}
    return set(d.envs)


def _subsets(items: list[str], d: Data, kmax: int):
    by_tasks = defaultdict(list)
    for k in range(kmax + 1):
        for c in itertools.combinations(items, k):
            by_tasks[sum(d.tasks[e] for e in c)].append((frozenset(c), sum(d.ed[e] for e in c)))
    return by_tasks


def type_moves(d: Data, t: str, kmax: int) -> list[tuple[int, frozenset[str], int]]:
    """(flips, new member set, surplus it needs) for every member set of type ``t``
    within ``kmax`` flips that has Table 25's task count and leaves 0-4 of the type's
    in-environment failures unexplained by early deaths."""
    tasks, et, _to = targets()[t]
    m0 = {k for k in d.envs if t in d.current[k]}
    allowed = _allowed(d, t)
    rem = _subsets(sorted(m0), d, kmax)
    add = _subsets(sorted(allowed - m0), d, kmax)
    ed0 = sum(d.ed[k] for k in m0)
    t0 = sum(d.tasks[k] for k in m0)
    out = []
    for tr, rs in rem.items():
        for r, er in rs:
            for a, ea in add.get(tr + tasks - t0, ()):  # tasks(A) - tasks(R) = target - current
                n = len(r) + len(a)
                if n > kmax:
                    continue
                need = et - (ed0 - er + ea)
                if not 0 <= need <= SURPLUS:
                    continue
                members = frozenset((m0 - r) | a)
                if t == "Collect" and len(members) != 8:
                    continue
                if t == "Dodge" and len(members) > DODGE_MAX:
                    continue
                out.append((n, members, need))
    out.sort(key=lambda x: (x[0], sorted(x[1])))
    return out


# -- the surplus and timeout placements ------------------------------------------


def _fixed_need(d: Data) -> dict[str, int]:
    tg = targets()
    return {t: tg[t][1] - sum(d.ed[k] for k in FIXED[t]) for t in FIXED}


def surplus_fits(members: dict[str, frozenset[str]], need: dict[str, int], cap) -> bool:
    """Is there a placement of the SURPLUS runs (each in one environment, counting
    for every type of that environment, within each environment's capacity) that
    gives every type exactly its ``need``?"""
    types = sorted(members)
    held = tuple(sorted((k, c) for k, c in cap.items() if c))
    pats = tuple(tuple(int(k in members[t]) for t in types) for k, _ in held)
    return _fits(pats, tuple(c for _, c in held), tuple(need[t] for t in types))


@cache
def _fits(pats: tuple[tuple[int, ...], ...], caps: tuple[int, ...], need: tuple[int, ...]) -> bool:
    """``pats[i]``: the types environment i counts for; ``caps[i]``: how many runs it
    can hold. Depth-first over environments, at most SURPLUS runs deep."""
    merged: dict[tuple[int, ...], int] = defaultdict(int)
    for p, c in zip(pats, caps, strict=True):
        merged[p] += c
    kinds = sorted(merged.items())
    widest = max((sum(p) for p, _ in kinds), default=0)

    @cache
    def place(left: int, i: int, rest: tuple[int, ...]) -> bool:
        if left == 0:
            return not any(rest)
        if sum(rest) > left * widest:
            return False
        for j in range(i, len(kinds)):
            p, c = kinds[j]
            for n in range(1, min(c, left) + 1):
                r = tuple(x - n * y for x, y in zip(rest, p, strict=True))
                if min(r) < 0:
                    break
                if place(left - n, j + 1, r):
                    return True
        return False

    return place(SURPLUS, 0, need)


def surplus_placements(members: dict[str, frozenset[str]], need: dict[str, int], cap):
    """Every placement of the 4 runs meeting every type's need (a tuple of env keys)."""
    envs = [k for k in sorted(cap) if cap[k] > 0]
    found = []
    for combo in itertools.combinations_with_replacement(envs, SURPLUS):
        if any(combo.count(k) > cap[k] for k in set(combo)):
            continue
        if all(sum(1 for e in combo if e in members[t]) == need[t] for t in need):
            found.append(combo)
    return found


def timeouts_fit(d: Data, members: dict[str, frozenset[str]], s: tuple[str, ...]) -> bool:
    """Per-environment timeouts summing to 118 and to each type's Table 25 count, each
    at most the environment's budget-reached runs less its share of the 4 runs."""
    import numpy as np
    from scipy.optimize import LinearConstraint, milp

    tg = targets()
    envs = list(d.envs)
    ub = np.array([d.budget[k] - s.count(k) for k in envs], dtype=float)
    rows = [[1.0] * len(envs)]
    rhs = [TIMEOUTS]
    for t in ENV_TYPES:
        rows.append([1.0 if k in members[t] else 0.0 for k in envs])
        rhs.append(tg[t][2])
    res = milp(
        c=np.zeros(len(envs)),
        constraints=LinearConstraint(np.array(rows), rhs, rhs),
        integrality=np.ones(len(envs)),
        bounds=(np.zeros(len(envs)), ub),
    )
    return res.status == 0


# -- the menu: which types each game's mechanics could carry --------------------
#
# Generous on purpose: a type is listed when any reading of the game (Table 7's
# description, the evaluated action vocabulary of Table 26, the game itself) could
# support it. Control and Sport are fixed by the tests. The weakest entries are
# marked; Tetris, which no type describes well, may take any open type.
MENU: dict[str, frozenset[str]] = {
    k: frozenset(v.split())
    for k, v in {
        "acrobot": "Control",
        "cartpole": "Control",
        "mountaincar": "Control",
        "pong": "Sport",
        "tennis": "Sport",
        "alien": "Maze Shooter Dodge Collect",  # corridors, flamethrower, aliens, eggs
        "assault": "Shooter Dodge",
        "asterix": "Dodge Collect",
        "battlezone": "Shooter Dodge",
        "berzerk": "Maze Shooter Dodge",
        "bigfish": "Dodge Collect",
        "bossfight": "Shooter Dodge",
        "breakout": "Shooter",  # weak: bricks as targets; its old Control is closed
        "caveflyer": "Maze Shooter Dodge",  # caves, Shoot action, obstacles
        "choppercommand": "Shooter Dodge",
        "cliffwalking": "Maze",
        "demonattack": "Shooter Dodge",
        "dodgeball": "Maze Shooter Dodge",
        "enduro": "Dodge",
        "flappybird": "Dodge",
        "freeway": "Dodge",
        "frostbite": "Dodge Collect",
        "heist": "Maze Collect",
        "highway": "Dodge",
        "lavacrossing": "Maze Dodge",  # weak Dodge: the lava does not move
        "leaper": "Dodge",
        "mspacman": "Maze Collect Dodge",
        "multiroom": "Maze",
        "ninja": "Dodge",  # Table 26: five actions, no throwing star
        "riverraid": "Shooter Dodge",
        "roadrunner": "Dodge Collect",
        "seaquest": "Shooter Dodge Collect",  # divers rescued
        "taxi": "Maze Collect",
        "tetris": "Maze Shooter Dodge Collect",  # no type fits; any open one allowed
        "trondead": "Shooter Dodge",
        "turmoil": "Shooter Dodge Collect",  # weak Collect: the lane-end prize
        "unlockpickup": "Maze Collect",
    }.items()
}


def menu_member_sets(d: Data, t: str, menu=MENU) -> list[tuple[frozenset[str], int]]:
    """Every member set of type ``t`` inside the menu with Table 25's task count and
    0-4 in-environment failures left over: (members, the surplus it needs)."""
    tasks, et, _to = targets()[t]
    cands = [k for k in d.envs if t in menu[k] and k in _allowed(d, t)]
    forced = [k for k in cands if menu[k] == {t}]
    opt = [k for k in cands if k not in forced]
    half = len(opt) // 2

    def subsets(items):
        out = defaultdict(list)
        for r in range(len(items) + 1):
            for c in itertools.combinations(items, r):
                out[sum(d.tasks[e] for e in c)].append((c, sum(d.ed[e] for e in c)))
        return out

    left, right = subsets(opt[:half]), subsets(opt[half:])
    ft, fe = sum(d.tasks[k] for k in forced), sum(d.ed[k] for k in forced)
    out = []
    for ta, la in left.items():
        for ca, ea in la:
            for cb, eb in right.get(tasks - ft - ta, ()):
                need = et - fe - ea - eb
                members = frozenset(forced) | frozenset(ca) | frozenset(cb)
                if not 0 <= need <= SURPLUS:
                    continue
                if t == "Collect" and len(members) != 8:
                    continue
                if t == "Dodge" and len(members) > DODGE_MAX:
                    continue
                out.append((members, need))
    return out


def solve_menu(menu=MENU, any_surplus_env: bool = False) -> list[Solution]:
    """Every type assignment inside ``menu`` that meets the strict reading and the
    tests' other constraints (complete, not bounded by distance), nearest first."""
    d = load()
    cap = surplus_capacity(d, any_surplus_env)
    held = [k for k in d.envs if cap[k]]
    caps = tuple(cap[k] for k in held)
    types = sorted(ENV_TYPES)
    fixed_need = _fixed_need(d)
    per_type = {t: menu_member_sets(d, t, menu) for t in FREE_TYPES}
    current = {t: frozenset(k for k in d.envs if t in d.current[k]) for t in FREE_TYPES}
    everyone = set(d.envs)
    sols = []
    for combo in itertools.product(*(per_type[t] for t in FREE_TYPES)):
        members = dict(zip(FREE_TYPES, (m for m, _ in combo), strict=True)) | FIXED
        if len(everyone.difference(*members.values())):  # every env has a type
            continue
        need = dict(zip(FREE_TYPES, (n for _, n in combo), strict=True)) | fixed_need
        pats = tuple(tuple(int(k in members[t]) for t in types) for k in held)
        if not _fits(pats, caps, tuple(need[t] for t in types)):
            continue
        flips = sum(len(members[t] ^ current[t]) for t in FREE_TYPES)
        sols.append(Solution(flips, members, need))
    sols.sort(key=lambda s: (s.flips, s.changes(d)))
    return sols


# -- the search -------------------------------------------------------------------


@dataclass(frozen=True)
class Solution:
    flips: int
    members: dict[str, frozenset[str]]
    need: dict[str, int]

    def placements(self, any_surplus_env: bool = False) -> list[tuple[str, ...]]:
        return surplus_placements(
            self.members, self.need, surplus_capacity(load(), any_surplus_env)
        )

    def timeouts_ok(self, any_surplus_env: bool = False) -> bool:
        d = load()
        return any(timeouts_fit(d, self.members, p) for p in self.placements(any_surplus_env))

    def changes(self, d: Data) -> list[str]:
        out = []
        for t in FREE_TYPES:
            cur = {k for k in d.envs if t in d.current[k]}
            out += [f"+{t} {k}" for k in sorted(self.members[t] - cur)]
            out += [f"-{t} {k}" for k in sorted(cur - self.members[t])]
        return out


def solve(max_flips: int = 4, any_surplus_env: bool = False) -> list[Solution]:
    d = load()
    cap = surplus_capacity(d, any_surplus_env)
    moves = {t: type_moves(d, t, max_flips) for t in FREE_TYPES}
    fixed_need = _fixed_need(d)
    sols = []

    def rec(i: int, used: int, chosen: dict):
        if i == len(FREE_TYPES):
            members = {t: m for t, (m, _) in chosen.items()} | FIXED
            covered = set().union(*members.values())
            if covered != set(d.envs):  # every environment has a type (Figure 1)
                return
            need = {t: n for t, (_, n) in chosen.items()} | fixed_need
            if not surplus_fits(members, need, cap):
                return
            sols.append(Solution(used, members, need))
            return
        t = FREE_TYPES[i]
        for n, m, need in moves[t]:
            if used + n > max_flips:
                break
            rec(i + 1, used + n, chosen | {t: (m, need)})

    rec(0, 0, {})
    sols.sort(key=lambda s: (s.flips, s.changes(d)))
    return sols


def report(sols: list[Solution], show: int, any_surplus_env: bool) -> None:
    from collections import Counter

    d = load()
    print(len(sols), "assignments; by flips:", dict(sorted(Counter(s.flips for s in sols).items())))
    for s in sols[:show]:
        ps = s.placements(any_surplus_env)
        ok = s.timeouts_ok(any_surplus_env)
        print(f"{s.flips} flips  {' '.join(s.changes(d))}")
        print(f"   need {s.need}  timeouts {'fit' if ok else 'DO NOT FIT'}")
        print(f"   {len(ps)} placements, e.g. {ps[:4]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flips", type=int, help="search every assignment within N flips")
    ap.add_argument("--any-surplus-env", action="store_true")
    ap.add_argument("--show", type=int, default=20)
    a = ap.parse_args()
    d = load()
    if a.flips is None:
        for t in FREE_TYPES:
            print(t, "member sets inside the menu:", len(menu_member_sets(d, t)))
        sols = solve_menu(any_surplus_env=a.any_surplus_env)
    else:
        for t in FREE_TYPES:
            print(t, "member sets within", a.flips, "flips:", len(type_moves(d, t, a.flips)))
        sols = solve(a.flips, a.any_surplus_env)
    report(sols, a.show, a.any_surplus_env)


if __name__ == "__main__":
    main()
