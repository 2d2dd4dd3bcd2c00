"""World models: the interface, the controls, and the HTTP client.

A world model is a class with one method, :meth:`WorldModel.predict`: given a
case's public inputs (:class:`Request`: the context frames, the actions between
them, the intervention and the action vocabulary) it returns one predicted frame
per action of the intervention. Classes are registered by name with
:func:`register_wm` (as agent backends are) and made with :func:`get_wm`, which
also takes ``package.module:Class`` for a class outside vical.

The control models ship as world models and appear in every table:

- ``copy-last``: every predicted frame is the last context frame (persistence;
  the skill scores of :mod:`vical.wm.score` put it at 0 by construction);
- ``branch-swap``: the simulator, from the context state, plays the
  intervention of another branch of the same context (the branches'
  interventions rotated by one), a perfect simulator given the wrong actions;
- ``simulator``: the simulator playing the intervention it is given, the
  ceiling (100 on every skill score by construction).

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

    ``interventions``: every case's intervention by id (the evaluation passes it).
    """

    def __init__(self, interventions: dict[str, list[str]] | None = None):
        self.interventions = interventions or {}

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        actions = swapped_intervention(case, self.interventions)
        with ContextSim(case.origin, snapshot=False) as sim:
            frames, _ = sim.play(actions)
        return frames


@register_wm("simulator")
class Simulator(WorldModel):
    """The simulator playing the intervention it is given: the ceiling."""

    def predict(self, request: Request, case: Case) -> list[npt.NDArray[np.uint8]]:
        with ContextSim(case.origin, snapshot=False) as sim:
            frames, _ = sim.play(request.intervention)
        return frames


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
