"""gym3's private names, as Procgen uses them (``procgen2`` locked at 0.10.7, gym3 0.3.3).

``CEnv._info`` holds the info buffers the last C ``observe`` filled in (the frame
and the level-complete flag). Reading them avoids ``get_info()``, which runs
``observe`` again and draws a second 512x512 frame per step. If the name moves,
every Procgen task stops (the adapter reads the frame and the level end there).
"""

from __future__ import annotations

from typing import Any

from vical.envs.compat import Private

DISTRIBUTION = "gym3"
LOCKED_VERSION = "0.3.3"
RELIED_ON = (
    Private(
        "gym3.libenv:CEnv",
        "_info",
        "instance",
        "every Procgen frame and level-complete flag (vical.envs.procgen)",
    ),
)


def observed_info(env: Any) -> dict[str, Any]:
    """The info of the first (only) environment as the last ``observe()`` left it,
    read from gym3's buffers (``_info``) without observing again."""
    info: dict[str, Any] = {key: values[0] for key, values in env._info.items()}
    return info


def sample() -> Any:
    """A freshly made one-environment Procgen simulator, for the check of ``_info``."""
    from procgen import ProcgenGym3Env

    return ProcgenGym3Env(num=1, env_name="coinrun", start_level=0, num_levels=1, rand_seed=0)
