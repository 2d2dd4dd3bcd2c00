"""The adapter's public state API: typed simulator states and named facts.

Every adapter (:class:`vical.envs.core.Adapter`) answers three questions about
its simulator, so that callers outside :mod:`vical.envs` (the world-model
track) never reach into a simulator or an adapter's private attributes:

- :meth:`~vical.envs.core.Adapter.read_state` returns the state now as a
  :class:`SimState`, an immutable value;
- :meth:`~vical.envs.core.Adapter.set_state` puts the simulator in such a
  state: the next frame draws it;
- :meth:`~vical.envs.core.Adapter.state_facts` returns the state now as named,
  JSON-able facts (:data:`Facts`): ``"taxi row": 3``, ``"cell 4,2":
  "door-yellow-locked"``, ``"row 07": "..22.."``.

A game whose state is a handful of named values has a state class of its own,
built by hand as well as read (Taxi's :class:`~vical.envs.games.taxi.TaxiState`,
CliffWalking's :class:`~vical.envs.games.cliffwalking.CliffState`): a caller may draw any
state of that game by setting it. Any other adapter's state is a
:class:`NativeState`, its full snapshot (:meth:`~vical.envs.core.Adapter.snapshot`),
which only :meth:`~vical.envs.core.Adapter.read_state` makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Facts = dict[str, Any]
"""Named facts of a simulator state: JSON-able values (numbers, strings, booleans,
None and lists of them) under names that read as text."""


class SimState:
    """A simulator state returned by :meth:`~vical.envs.core.Adapter.read_state`.

    Subclasses are frozen dataclasses; an adapter's
    :meth:`~vical.envs.core.Adapter.set_state` accepts its own kind only.
    """


@dataclass(frozen=True, eq=False)
class NativeState(SimState):
    """The adapter's whole snapshot (simulator and scoring state), opaque to callers;
    two of them are equal only when they are the same object."""

    native: Any


class StateKindError(TypeError):
    """A state of another kind than the adapter's own was given to ``set_state``."""


def fact_value(v: object) -> Any:
    """A value as a fact: floats rounded to 3 decimals, numpy scalars as Python values,
    tuples as lists (recursively); anything else unchanged."""
    if isinstance(v, float | np.floating):
        return round(float(v), 3)
    if isinstance(v, np.integer | np.bool_):
        return v.item()
    if isinstance(v, list | tuple):
        return [fact_value(x) for x in v]
    return v
