"""Taxi (Gymnasium Toy Text): the Taxi-v3 domain, run on ``Taxi-v4``.

``Taxi-v3`` is deprecated in Gymnasium 1.4 in favour of ``Taxi-v4``, whose only
change fixes the optional ``is_rainy`` and ``fickle_passenger`` modes. The
tasks run ``Taxi-v4`` with both modes off (their defaults), which is the
paper's ``Taxi-v3`` domain; ``tests/test_toytext.py`` checks every transition
of the 500-state model against an independent description of the v3 domain.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt
from gymnasium.envs.toy_text.taxi import TaxiEnv

from vical.envs import core
from vical.envs.core import Frame, Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import Milestones
from vical.envs.states import Facts, SimState, StateKindError
from vical.spec import TaskSpec

if TYPE_CHECKING:
    import gymnasium as gym
    import pygame

# Gymnasium 1.4 draws a house at a fixed place above the G stand and marks the
# destination only with a thin outline, so a start frame can show the house
# over one stand while the passenger must go to another. The adapter moves the
# building onto the destination: the house sprite, halved to 40x48 pixels
# (nearest neighbour, so its pixel art stays crisp), is composed into the
# destination marker that Gymnasium blits on the destination stand before the
# passenger and the taxi, and the fixed house is replaced by a transparent
# sprite. Everything is drawn from the package's own images: deterministic.
TAXI_BUILDING_SIZE = (40, 48)
TAXI_BUILDING_OFFSET = (24, 4)  # inside the 88x56 cell: centred, on the stand's coloured area


def _taxi_sprite(name: str) -> pygame.Surface:
    import pygame
    from gymnasium.envs.toy_text import taxi as gym_taxi

    img = Path(gym_taxi.__file__).parent / "img" / "taxi" / f"{name}.png"
    return pygame.image.load(str(img))


def taxi_destination_sprite() -> pygame.Surface:
    """The destination marker: Gymnasium's outline with the drop-off building in it."""
    import pygame

    marker = _taxi_sprite("marker_destination")
    surf = pygame.Surface(marker.get_size(), pygame.SRCALPHA)
    surf.blit(marker, (0, 0))
    house = pygame.transform.scale(_taxi_sprite("house"), TAXI_BUILDING_SIZE)
    surf.blit(house, TAXI_BUILDING_OFFSET)
    return surf


def taxi_building_pixels() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """(RGB array, opaque mask) of the halved building as drawn on a stand."""
    import pygame

    house = pygame.transform.scale(_taxi_sprite("house"), TAXI_BUILDING_SIZE)
    rgb = np.transpose(pygame.surfarray.array3d(house), (1, 0, 2)).astype(np.uint8, copy=False)
    alpha = np.transpose(pygame.surfarray.array_alpha(house), (1, 0))
    return rgb, np.asarray(alpha == 255, dtype=np.bool_)


def taxi_cell_origin(env: gym.Env[Any, Any], cell: tuple[int, int]) -> tuple[int, int]:
    """Top-left pixel (x, y) of a grid cell in the rendered frame."""
    taxi = cast(TaxiEnv, env.unwrapped)
    surf_loc = cast(Callable[[tuple[int, int]], tuple[int, int]], taxi.get_surf_loc)
    x, y = surf_loc(cell)
    return int(x), int(y)


TAXI_STANDS = ("red", "green", "yellow", "blue")  # the passenger's and destination's 0-3
TAXI_HEADINGS = ("down", "up", "right", "left")  # the taxi's orientation 0-3 (its move actions)
TAXI_IN_TAXI = 4  # the passenger index while the passenger rides


@dataclass(frozen=True)
class TaxiState(SimState):
    """Taxi's state: the taxi's cell, the passenger (a stand 0-3 or 4: in the taxi), the
    destination stand and the way the taxi faces (0-3, :data:`TAXI_HEADINGS`)."""

    row: int
    column: int
    passenger: int
    destination: int
    heading: int

    def facts(self) -> Facts:
        """What the frame shows of it, by name."""
        return {
            "taxi row": self.row,
            "taxi column": self.column,
            "taxi faces": TAXI_HEADINGS[self.heading],
            "passenger": (
                "in taxi" if self.passenger == TAXI_IN_TAXI else TAXI_STANDS[self.passenger]
            ),
            "destination": TAXI_STANDS[self.destination],
        }


class TaxiAdapter(GymAdapter):
    """Milestones: correct pickup, delivery progress, efficient completion.

    Weights come from ``scoring.params.weights`` (pickup, delivered, efficient).
    Before the pickup, partial credit is the share of the distance to the
    passenger closed; after it, the share of the distance to the destination
    closed (an incomplete delivery keeps that credit). The efficiency part is
    optimal steps / steps used, where the optimum is solved per start state
    by breadth-first search over the simulator's own transition table.
    """

    env: TaxiEnv

    def __init__(self, task: TaskSpec):
        super().__init__(task)
        kw = task.env_kwargs
        if (
            kw.get("is_rainy", False)
            or kw.get("fickle_passenger", False)
            or self.env.fickle_passenger
        ):
            raise ValueError(f"{task.id}: the Taxi-v3 tasks need is_rainy and fickle_passenger off")
        self.P = self.env.P

    def make_env(self) -> TaxiEnv:
        import pygame

        env = cast(TaxiEnv, super().make_env())
        # set before the first render: Gymnasium loads a sprite only while it is None
        # (and declares both sprites None until it loads one)
        env.destination_img = taxi_destination_sprite()  # type: ignore[assignment]
        env.house_img = pygame.Surface(  # type: ignore[assignment]
            _taxi_sprite("house").get_size(), pygame.SRCALPHA
        )
        return env

    def solve(self, state: int) -> int:
        """Fewest actions from ``state`` to a successful drop-off (BFS over P)."""
        seen = {state: 0}
        q = deque([state])
        while q:
            s = q.popleft()
            for a in range(6):
                ((_p, s2, _r, done),) = self.P[s][a]
                if done:
                    return seen[s] + 1
                if s2 not in seen:
                    seen[s2] = seen[s] + 1
                    q.append(s2)
        raise RuntimeError(f"Taxi state {state} cannot be solved")

    def _grid_dist(self, src: tuple[int, int], dst: tuple[int, int]) -> int:
        """Taxi moves between two cells, respecting walls (BFS with moves 0-3)."""
        env = self.env
        start = self._encode(src[0], src[1], 0, 0)
        seen = {start: 0}
        q = deque([start])
        while q:
            s = q.popleft()
            r, c, _, _ = env.decode(s)
            if (r, c) == dst:
                return seen[s]
            for a in range(4):
                ((_p, s2, _r, _d),) = self.P[s][a]
                if s2 not in seen:
                    seen[s2] = seen[s] + 1
                    q.append(s2)
        raise RuntimeError("unreachable taxi cell")

    def _decode(self) -> tuple[int, int, int, int]:
        r, c, p, d = (int(v) for v in self.env.decode(int(self.env.s)))
        return r, c, p, d

    def _encode(self, row: int, col: int, passenger: int, destination: int) -> int:
        encode = cast(Callable[[int, int, int, int], int], self.env.encode)
        return int(encode(row, col, passenger, destination))

    def read_state(self) -> TaxiState:
        e = self.env
        # Gymnasium turns the taxi towards its last move when it draws: the heading
        # here is the one the next frame shows, drawn yet or not
        last = e.lastaction
        heading = int(last) if last is not None and 0 <= last <= 3 else int(e.taxi_orientation)
        return TaxiState(*self._decode(), heading)

    def set_state(self, state: SimState) -> None:
        """Put the taxi, passenger and destination as ``state`` says, the taxi facing its
        way (scoring progress untouched)."""
        if not isinstance(state, TaxiState):
            raise StateKindError(f"{self.task.id}: Taxi sets a TaxiState")
        e = self.env
        e.s = self._encode(state.row, state.column, state.passenger, state.destination)
        e.lastaction = None  # the renderer keeps taxi_orientation as set
        e.taxi_orientation = state.heading
        self.obs = int(e.s)
        self._frame = None

    def state_facts(self) -> Facts:
        return self.read_state().facts()

    def start(self) -> None:
        r, c, p, d = self._decode()
        self.locs = cast("list[tuple[int, int]]", [tuple(x) for x in self.env.locs])
        self.dest = self.locs[d]
        self.optimal = self.solve(int(self.env.s))
        self.ms = Milestones(dict(self.task.params["weights"]))
        self.moves = 0
        self.to_pass0 = self._grid_dist((r, c), self.locs[p]) if p < 4 else 0
        self.best_to_pass = self.to_pass0
        self.to_dest0: int | None = None
        self.best_to_dest: int | None = None
        self.delivered = False
        self._update(False)

    def _update(self, terminated: bool) -> None:
        r, c, p, _ = self._decode()
        if p == 4 and "pickup" not in self.ms.reached:
            self.ms.hit("pickup")
            self.to_dest0 = self._grid_dist((r, c), self.dest)
            self.best_to_dest = self.to_dest0
        if terminated:
            self.delivered = True
            self.ms.hit("delivered")
            self.ms.partial = min(1.0, self.optimal / max(self.moves, 1))
        elif "pickup" in self.ms.reached:
            # both set when the pickup was reached
            assert self.to_dest0 is not None and self.best_to_dest is not None
            d = self._grid_dist((r, c), self.dest) if p == 4 else self.to_dest0
            self.best_to_dest = min(self.best_to_dest, d)
            self.ms.partial = (
                (self.to_dest0 - self.best_to_dest) / self.to_dest0 if self.to_dest0 else 1.0
            )
        else:
            self.best_to_pass = min(self.best_to_pass, self._grid_dist((r, c), self.locs[p]))
            # credit before the pickup is capped below the pickup milestone itself
            self.ms.partial = (
                0.0
                if not self.to_pass0
                else 0.5 * ((self.to_pass0 - self.best_to_pass) / self.to_pass0)
            )

    def on_tick(self, tick: Tick) -> None:
        self.moves += 1
        self._update(tick.terminated)

    def score(self) -> float:
        return self.ms.score()

    def passed(self) -> bool:
        return self.delivered

    def progress(self) -> dict[str, Any]:
        return {
            "milestones": sorted(self.ms.reached),
            "partial": round(self.ms.partial, 4),
            "optimal_steps": self.optimal,
            "moves": self.moves,
        }


# -- the world-model track's frame reader -----------------------------------------
def _dist(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> float:
    return float(np.sum((a.astype(np.int32) - b.astype(np.int32)) ** 2))


def _search(
    draw: Callable[..., Frame], frame: Frame, start: list[int], domains: list[range]
) -> list[int] | None:
    """Coordinate search: change one variable at a time while the drawing gets closer."""
    cur = list(start)
    probe = draw(*cur)
    if probe.shape != frame.shape:
        return None
    best = _dist(probe, frame)
    improved = True
    while improved and best > 0:
        improved = False
        for k, dom in enumerate(domains):
            for v in dom:
                if v == cur[k]:
                    continue
                cand = [*cur[:k], v, *cur[k + 1 :]]
                dd = _dist(draw(*cand), frame)
                if dd < best:
                    best, cur, improved = dd, cand, True
    return cur


def read_frame(renderer: core.Adapter, frame: Frame, hint: Facts) -> Facts | None:
    """The facts an RGB ``frame`` shows (a true one or a model's prediction), or None.

    ``renderer`` is a Taxi adapter of the same task that draws the candidates (its
    state is set to each); the search starts from ``hint``, the context state's
    facts, and changes one variable at a time (taxi cell and heading, passenger,
    destination) until no single change brings the drawing closer to the frame.
    """
    if not isinstance(renderer, TaxiAdapter):
        raise TypeError(
            f"{renderer.task.id}: its adapter is a {type(renderer).__name__}, not a TaxiAdapter"
        )
    stands = [*TAXI_STANDS, "in taxi"]
    # the taxi's cell and heading form one variable (100 drawings): searched apart, a
    # taxi drawn facing the wrong way can look closer in another cell than in its own
    start = [
        (int(hint["taxi row"]) * 5 + int(hint["taxi column"])) * 4
        + TAXI_HEADINGS.index(hint["taxi faces"]),
        stands.index(hint["passenger"]),
        TAXI_STANDS.index(hint["destination"]),
    ]

    def draw(taxi: int, p: int, d: int) -> Frame:
        cell, heading = divmod(taxi, 4)
        renderer.set_state(TaxiState(cell // 5, cell % 5, p, d, heading))
        return np.asarray(renderer.frame())

    found = _search(draw, frame, start, [range(100), range(5), range(4)])
    if found is None:
        return None
    cell, heading = divmod(found[0], 4)
    return TaxiState(cell // 5, cell % 5, found[1], found[2], heading).facts()


# the environment's adapter (vical.envs.make_adapter)
Adapter = TaxiAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("grid-navigation", 1)
