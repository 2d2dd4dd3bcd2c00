"""tetris-gymnasium's private names (``Tetris``, locked at 0.3.0).

The observation dict (board with the falling piece, queue, holder) is built by a
private method; ``step`` returns it too, but the state API needs it at any
moment without stepping. If a release renames it, the Tetris state facts, the
world-model track's Tetris frame reader and the Tetris demo recipe break.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vical.envs.compat import Private

if TYPE_CHECKING:
    from tetris_gymnasium.envs.tetris import Tetris

DISTRIBUTION = "tetris-gymnasium"
LOCKED_VERSION = "0.3.0"
RELIED_ON = (
    Private(
        "tetris_gymnasium.envs.tetris:Tetris",
        "_get_obs",
        "class",
        "the Tetris state facts (pixel ids) and everything that reads them",
    ),
)


def observation(env: Tetris) -> dict[str, Any]:
    """The observation of the current state: ``board``, ``holder``, ``queue`` and ``mask``
    arrays (``_get_obs``), without stepping."""
    obs: dict[str, Any] = env._get_obs()
    return obs
