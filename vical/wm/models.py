"""World models: the interface, the controls, and the HTTP client.

A world model is a class with one method, :meth:`WorldModel.predict`: given a
case's public inputs (:class:`Request`: the context frames, the actions between
them, the intervention and the action vocabulary) it returns one predicted frame
per action of the intervention. Classes are registered by name with
:func:`register_wm` (as agent backends are) and made with :func:`get_wm`, which
also takes ``package.module:Class`` for a class outside vical.

The reference models ship as world models (``--wm NAME``); the first three are
the controls:

- ``copy-last``: every predicted frame is the last context frame (persistence;
  the skill scores of :mod:`vical.wm.score` put it at 0 by construction);
- ``branch-swap``: the simulator, from the context state, plays the
  intervention of another branch of the same context (the branches'
  interventions rotated by one), a perfect simulator given the wrong actions;
- ``simulator``: the simulator playing the intervention it is given, the
  ceiling (100 on every skill score by construction).

The adversarial references (:data:`ADVERSARIES`) are built to climb a careless
index without the action: ``fixed-action`` (the simulator under one fixed
action), ``all-action-average`` (the mean of the simulator's frames over every
action), ``other-case`` (another context's truth), ``context-mean``,
``blurred-copy-last`` and ``blurred-truth`` (the simulator's frames blurred: the
one among them that follows the action). ``docs/wm-index.md`` gives their scores.

The no-op and shuffled-action controls are interventions any model can be run
under, each with its own target (:mod:`vical.wm.controls`). ``branch-swap`` and
``simulator`` read the case's origin (privileged: they are baselines, not
candidates). ``http`` posts the request to an endpoint that
speaks the protocol of :mod:`vical.wm.protocol`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from vical.wm.cases import Case, Request
from vical.wm.sim import ContextSim


class WorldModel(ABC):
    """A world model: context and intervention in, one frame per action out."""

    name: ClassVar[str] = ""

    @abstractmethod
    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        """Predicted frames after each action of ``request.intervention``.

        ``case`` is given for the controls, which may consult the simulator; a
        candidate model must use only ``request``.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (connections)."""


_REGISTRY: dict[str, type[WorldModel]] = {}


def register_wm(name: str) -> Callable[[type[WorldModel]], type[WorldModel]]:
    """Class decorator: make a world model available as ``--wm NAME``."""

    def deco(cls: type[WorldModel]) -> type[WorldModel]:
        _REGISTRY[name] = cls
        cls.name = name
        return cls

    return deco


def wm_names() -> list[str]:
    return sorted(_REGISTRY)


def get_wm(name: str, **kwargs: Any) -> WorldModel:
    """A world model by registered name, or by ``package.module:Class`` (imported here)."""
    if ":" in name:
        import importlib

        module, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise KeyError(f"world model {name!r} cannot be loaded: {e}") from e
        if not (isinstance(cls, type) and issubclass(cls, WorldModel)):
            raise KeyError(f"{name!r} is not a vical.wm.models.WorldModel subclass")
        if not cls.name:
            cls.name = name
        return cls(**kwargs)
    if name not in _REGISTRY:
        raise KeyError(
            f"unknown world model {name!r}; available: {', '.join(wm_names())}, "
            "or package.module:Class"
        )
    return _REGISTRY[name](**kwargs)


CONTROLS = ("copy-last", "branch-swap", "simulator")
# the adversarial reference models: each can climb a careless index without the action
ADVERSARIES = (
    "fixed-action",
    "all-action-average",
    "other-case",
    "context-mean",
    "blurred-copy-last",
    "blurred-truth",
)
REFERENCES = CONTROLS + ADVERSARIES
# the reference models built with the case set (its interventions and folder)
NEEDS_CASES = ("branch-swap", "other-case")
BLUR_RADIUS = 1.0


def blur(frame: npt.NDArray[np.uint8], radius: float = BLUR_RADIUS) -> npt.NDArray[np.uint8]:
    """A frame through Pillow's Gaussian blur of ``radius`` pixels."""
    from PIL import Image, ImageFilter

    im = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB")
    return np.asarray(im.filter(ImageFilter.GaussianBlur(radius)), dtype=np.uint8).copy()


def simulate_request(case: Case, intervention: list[str]) -> list[npt.NDArray[np.uint8]]:
    """The simulator's frames for ``intervention`` from the case's context state (left
    alone when it takes no decision: the no-op control's target)."""
    from vical.wm.controls import simulate

    return simulate(case, intervention)


@register_wm("copy-last")
class CopyLastFrame(WorldModel):
    """Predicts that nothing changes: the last context frame, once per action."""

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        return [request.context[-1].copy() for _ in request.intervention]


def swapped_intervention(case: Case, interventions: dict[str, list[str]]) -> list[str]:
    """The intervention of the next branch of the case's context (branches rotated by one)."""
    nxt = case.branches[(case.branch + 1) % len(case.branches)]
    return interventions[nxt]


@register_wm("branch-swap")
class BranchSwap(WorldModel):
    """The simulator playing another branch's intervention from the context state.

    ``cases``: the case set (the evaluation passes it), for every case's intervention.
    """

    def __init__(self, cases: list[Case] | None = None, folder: Any = None):
        self.interventions = {c.id: list(c.intervention) for c in cases or []}

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        actions = swapped_intervention(case, self.interventions)
        with ContextSim(case.origin, snapshot=False) as sim:
            frames, _ = sim.play(actions)
        return frames


@register_wm("simulator")
class Simulator(WorldModel):
    """The simulator playing the intervention it is given: the ceiling."""

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        return simulate_request(case, list(request.intervention))


@register_wm("fixed-action")
class FixedAction(WorldModel):
    """The simulator under one fixed action whatever it is asked: left alone (its NOOP)
    where the game has one, else the vocabulary's first action held (an ending holds
    its last frame). Action-blind by construction."""

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        h = len(request.intervention)
        with ContextSim(case.origin, snapshot=False) as sim:
            if sim.env.noop is not None:
                return sim.play_noop(h)
            frames, _ = sim.play([request.actions[0]] * h, hold_end=True)
        return frames


@register_wm("all-action-average")
class AllActionAverage(WorldModel):
    """The per-pixel mean, at each step, of the simulator's frames under every action of
    the vocabulary held (an ending holds its last frame). Action-blind by construction;
    the answer of a model that averages over what it cannot tell apart."""

    def __init__(self) -> None:
        self._last: tuple[Any, list[npt.NDArray[np.uint8]]] | None = None

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        h = len(request.intervention)
        key = (case.origin, h, tuple(request.actions))
        if self._last is not None and self._last[0] == key:  # a context's branches
            return [f.copy() for f in self._last[1]]
        with ContextSim(case.origin) as sim:
            runs = [sim.play([a] * h, hold_end=True)[0] for a in request.actions]
        mean = [
            np.rint(np.mean([r[t].astype(np.float64) for r in runs], axis=0)).astype(np.uint8)
            for t in range(h)
        ]
        self._last = (key, mean)
        return [f.copy() for f in mean]


@register_wm("other-case")
class OtherCase(WorldModel):
    """Another case's truth: the same branch of the next context of the same environment
    in the case set (of the scenario, then of any, when it has no other context; a
    frame size that does not match is scored as a wrong frame; in a set of one
    context, the branch two along). Real frames of the right game, unrelated to this
    context."""

    def __init__(self, cases: list[Case] | None = None, folder: Any = None):
        self.cases = list(cases or [])
        self.folder = folder

    def _other(self, case: Case) -> Case:
        groups = list(dict.fromkeys(c.group for c in self.cases))
        for pool in (
            [c for c in self.cases if c.env == case.env],
            [c for c in self.cases if c.scenario == case.scenario],
            self.cases,
        ):
            mine = [g for g in groups if any(c.group == g for c in pool)]
            if len(mine) > 1:
                nxt = (
                    mine[(mine.index(case.group) + 1) % len(mine)]
                    if case.group in mine
                    else mine[0]
                )
                same = [c for c in pool if c.group == nxt]
                return same[min(case.branch, len(same) - 1)]
        # a set of one context: another branch of it (two along), the nearest stand-in
        same = [c for c in self.cases if c.group == case.group]
        return same[(case.branch + 2) % len(same)]

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        from vical.wm.cases import load_frames

        other = self._other(case)
        frames = load_frames(self.folder, other.truth_frames)
        h = len(request.intervention)
        return [frames[min(i, len(frames) - 1)] for i in range(h)]


@register_wm("context-mean")
class ContextMean(WorldModel):
    """The per-pixel mean of the context frames, once per action (request only)."""

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        mean = np.rint(np.mean([f.astype(np.float64) for f in request.context], axis=0))
        return [mean.astype(np.uint8) for _ in request.intervention]


@register_wm("blurred-copy-last")
class BlurredCopyLast(WorldModel):
    """The last context frame blurred (radius :data:`BLUR_RADIUS`), once per action."""

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        frame = blur(request.context[-1])
        return [frame.copy() for _ in request.intervention]


@register_wm("blurred-truth")
class BlurredTruth(WorldModel):
    """The simulator's frames for the intervention given, blurred (radius
    :data:`BLUR_RADIUS`): every action's effect right, every frame slightly soft."""

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        return [blur(f) for f in simulate_request(case, list(request.intervention))]


@register_wm("http")
class HttpWorldModel(WorldModel):
    """A world model behind an HTTP endpoint speaking :mod:`vical.wm.protocol`."""

    def __init__(self, endpoint: str = "", timeout: float = 120.0):
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(
                f"world-model endpoint {endpoint!r} must be an http:// or https:// URL "
                "(for example http://127.0.0.1:8000)"
            )
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        from vical.wm.protocol import post_predict

        return post_predict(self.endpoint, request, self.timeout)
