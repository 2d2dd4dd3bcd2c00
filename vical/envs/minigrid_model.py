"""An exact model of the MiniGrid games' dynamics, and breadth-first search over it.

:class:`GridModel` is an exact model of the deterministic minigrid dynamics over
states (position, heading, carried object, object positions, door states), built
from a live simulator. Breadth-first search (:func:`bfs`) over it gives the fewest
decisions to any sub-goal: the MiniGrid adapters (:mod:`vical.envs.minigrid`)
score with those distances and :func:`vical.envs.minigrid.plan` returns a
shortest action sequence.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

from minigrid.core.world_object import Box, Door, Goal, Key, Lava, Wall, WorldObj
from minigrid.minigrid_env import MiniGridEnv

# native actions (minigrid.core.actions.Actions order)
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
DIR_VEC = ((1, 0), (0, 1), (-1, 0), (0, -1))  # east, south, west, north
HEADINGS = ("east", "south", "west", "north")

# A state: (x, y, heading, carried object index or -1, object positions
# (None while carried), door states (0 open, 1 closed, 2 locked)).
State = tuple[int, int, int, int, tuple[tuple[int, int] | None, ...], tuple[int, ...]]
# Events of a transition.
GOAL, LAVA, TARGET, DESTROYED = "goal", "lava", "target", "destroyed"

DOOR_OPEN, DOOR_CLOSED, DOOR_LOCKED = 0, 1, 2


def _door_state(door: Door) -> int:
    if door.is_open:
        return DOOR_OPEN
    return DOOR_LOCKED if door.is_locked else DOOR_CLOSED


class GridModel:
    """The deterministic dynamics of one minigrid layout, as pure functions of a :data:`State`.

    Built from a live environment; walls, lava and the goal are static, doors
    and pickable objects (keys, balls, boxes) are tracked by identity. The
    transition function mirrors ``MiniGridEnv.step`` and ``UnlockPickupEnv``:
    Forward enters empty cells, open doors, lava (death) and the goal; Pickup
    takes the object in front when the hands are empty (the target box ends the
    episode); Drop puts the carried object on an empty cell in front; Toggle
    unlocks a locked door with the key of its colour, opens or closes an
    unlocked door, and opens a box (which makes it vanish).
    """

    def __init__(self, env: MiniGridEnv):
        self.width, self.height = env.width, env.height
        self.static: dict[tuple[int, int], str] = {}
        self.doors: list[Door] = []
        self.door_at: dict[tuple[int, int], int] = {}
        self.objects: list[WorldObj] = []
        for y in range(env.height):
            for x in range(env.width):
                cell = env.grid.get(x, y)
                if cell is None:
                    continue
                if isinstance(cell, Wall):
                    self.static[(x, y)] = "wall"
                elif isinstance(cell, Lava):
                    self.static[(x, y)] = "lava"
                elif isinstance(cell, Goal):
                    self.static[(x, y)] = "goal"
                elif isinstance(cell, Door):
                    self.door_at[(x, y)] = len(self.doors)
                    self.doors.append(cell)
                elif cell.can_pickup():
                    self.objects.append(cell)
                else:
                    raise ValueError(f"unsupported minigrid object {cell.type!r} at {(x, y)}")
        if env.carrying is not None:
            self.objects.append(env.carrying)
        target = getattr(env, "obj", None)
        self.target = next((i for i, o in enumerate(self.objects) if o is target), -1)

    # -- reading the live environment -------------------------------------
    def state_of(self, env: MiniGridEnv) -> State:
        """The current state of ``env`` (which must hold this model's layout)."""
        where: dict[int, tuple[int, int]] = {}
        ids = {id(o): i for i, o in enumerate(self.objects)}
        for y in range(env.height):
            for x in range(env.width):
                cell = env.grid.get(x, y)
                if cell is not None and id(cell) in ids:
                    where[ids[id(cell)]] = (x, y)
        carrying = ids.get(id(env.carrying), -1) if env.carrying is not None else -1
        positions = tuple(where.get(i) for i in range(len(self.objects)))
        doors = tuple(_door_state(d) for d in self.doors)
        x, y = (int(v) for v in env.agent_pos)
        return (x, y, int(env.agent_dir), carrying, positions, doors)

    def target_exists(self, state: State) -> bool:
        """False once the target box was opened (it vanishes and cannot be picked up)."""
        if self.target < 0:
            return True
        return state[3] == self.target or state[4][self.target] is not None

    # -- dynamics -----------------------------------------------------------
    def _object_at(self, state: State, pos: tuple[int, int]) -> int:
        for i, p in enumerate(state[4]):
            if p == pos:
                return i
        return -1

    def step(self, state: State, action: int) -> tuple[State, str | None]:
        """The next state and the event of the transition (goal, lava, target, destroyed)."""
        x, y, d, carrying, positions, doors = state
        if action == LEFT:
            return (x, y, (d - 1) % 4, carrying, positions, doors), None
        if action == RIGHT:
            return (x, y, (d + 1) % 4, carrying, positions, doors), None
        if action == DONE:
            return state, None
        dx, dy = DIR_VEC[d]
        front = (x + dx, y + dy)
        kind = self.static.get(front)
        door = self.door_at.get(front, -1)
        obj = self._object_at(state, front)
        if action == FORWARD:
            if kind == "wall" or obj >= 0 or (door >= 0 and doors[door] != DOOR_OPEN):
                return state, None
            moved = (front[0], front[1], d, carrying, positions, doors)
            return moved, (GOAL if kind == "goal" else LAVA if kind == "lava" else None)
        if action == PICKUP:
            if obj < 0 or carrying >= 0:
                return state, None
            pos2 = (*positions[:obj], None, *positions[obj + 1 :])
            return (x, y, d, obj, pos2, doors), (TARGET if obj == self.target else None)
        if action == DROP:
            if carrying < 0 or kind is not None or door >= 0 or obj >= 0:
                return state, None
            pos2 = (*positions[:carrying], front, *positions[carrying + 1 :])
            return (x, y, d, -1, pos2, doors), None
        if action == TOGGLE:
            if door >= 0:
                s = doors[door]
                if s == DOOR_LOCKED:
                    held = self.objects[carrying] if carrying >= 0 else None
                    if not (isinstance(held, Key) and held.color == self.doors[door].color):
                        return state, None
                    new = DOOR_OPEN
                else:
                    new = DOOR_CLOSED if s == DOOR_OPEN else DOOR_OPEN
                doors2 = (*doors[:door], new, *doors[door + 1 :])
                return (x, y, d, carrying, positions, doors2), None
            if obj >= 0 and isinstance(self.objects[obj], Box):
                pos2 = (*positions[:obj], None, *positions[obj + 1 :])
                return (x, y, d, carrying, pos2, doors), DESTROYED
            return state, None
        raise ValueError(f"unknown minigrid action {action}")

    def successors(self, state: State) -> Iterator[tuple[int, State, str | None]]:
        """Transitions worth searching: every action that changes the state, except
        closing a door (a closed door only ever blocks) and opening a box (it
        destroys the target)."""
        for a in (LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE):
            nxt, event = self.step(state, a)
            if nxt == state or event == DESTROYED:
                continue
            if a == TOGGLE and sum(nxt[5]) > sum(state[5]):
                continue  # closed a door
            yield a, nxt, event


Goal_ = Callable[[State, str | None], bool]


def bfs(model: GridModel, start: State, reached: Goal_) -> list[int] | None:
    """Fewest actions from ``start`` to a transition satisfying ``reached(state, event)``.

    Returns the native action list (empty when ``start`` already satisfies the
    sub-goal), or None when it cannot be reached. Lava and the goal end the
    episode, so the search never expands past them.
    """
    if reached(start, None):
        return []
    parent: dict[State, tuple[State, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        for a, nxt, event in model.successors(s):
            if nxt in parent:
                continue
            parent[nxt] = (s, a)
            if reached(nxt, event):
                path = [a]
                cur = s
                while parent[cur] is not None:
                    cur, a0 = parent[cur]  # type: ignore[misc]
                    path.append(a0)
                return path[::-1]
            if event in (LAVA, GOAL, TARGET):
                continue
            queue.append(nxt)
    return None


def at_goal(_state: State, event: str | None) -> bool:
    return event == GOAL


def picked_target(_state: State, event: str | None) -> bool:
    return event == TARGET
