"""Former home of demo making; it now lives in :mod:`vical.authoring`.

Kept as a thin re-export so that ``from vical.demos.make import make_demos,
write_demos`` (the CLI's ``vical demos make`` and ``vical demos pack``) keeps
working: :func:`vical.authoring.make.make_demos` runs an environment's recipe
and :func:`vical.authoring.yamlio.write_demos` stores the clips in its task file.
"""

from __future__ import annotations

from vical.authoring.make import make_demos
from vical.authoring.yamlio import write_demos

__all__ = ["make_demos", "write_demos"]
