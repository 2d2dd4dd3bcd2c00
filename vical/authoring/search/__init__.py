"""The search strategies the authoring tools use, written once.

All of them are deterministic (randomness only from :class:`random.Random` or
NumPy generators with fixed seeds) and work at decision level through the
runtime's own decision step, so a found action list replays exactly through
``make_env``. By concern:

- :mod:`~vical.authoring.search.play` — play and planning on a
  :class:`~vical.authoring.sim.DecisionSim` (the start state before scoring begins;
  every lost life reported): :func:`play_without_dying`, :func:`chunk_search`,
  :func:`lookahead_policy`, :func:`beam_search`, :func:`live_beam_search`;
- :mod:`~vical.authoring.search.scored` — play on a started
  :class:`~vical.envs.environment.VicalEnv` (the task's own score, pass and ending rules):
  :func:`lookahead_play`, :func:`scored_beam` (:func:`procgen_beam`,
  :func:`procgen_judged_beam`);
- :mod:`~vical.authoring.search.viable` — the viability check of generated starts
  (:func:`screen_viable`: no screen-blind policy of the reflex screen passes the task
  from the start);
- :mod:`~vical.authoring.search.starts` — human-init sequences from DecisionSim play:
  :func:`prefix_streams`, :func:`dense_starts`;
- :mod:`~vical.authoring.search.decision_points` — human-init sequences at decision
  points of a started env: :func:`decision_point_init`, :func:`init_for_variants`,
  :func:`decision_point_inits`.

The task files name these strategies as ``vical.authoring.search.<name>`` (their
``source`` and ``init_source`` fields), so this package is where they are imported
from. Saving and restoring is :meth:`VicalEnv.snapshot` / :meth:`VicalEnv.restore`
throughout.
"""

from __future__ import annotations

from vical.authoring.search.decision_points import (
    decision_point_init,
    decision_point_inits,
    init_for_variants,
)
from vical.authoring.search.play import (
    Policy,
    beam_search,
    chunk_search,
    live_beam_search,
    lookahead_policy,
    play_without_dying,
)
from vical.authoring.search.scored import (
    SearchResult,
    lookahead_play,
    procgen_beam,
    procgen_judged_beam,
    progress_value,
    rollout,
    scored_beam,
)
from vical.authoring.search.starts import dense_starts, prefix_streams
from vical.authoring.search.viable import (
    EXTRA_CANDIDATES,
    NoViableStart,
    Viable,
    reflex_pass,
    screen_viable,
)

__all__ = [
    "EXTRA_CANDIDATES",
    "NoViableStart",
    "Policy",
    "SearchResult",
    "Viable",
    "beam_search",
    "chunk_search",
    "decision_point_init",
    "decision_point_inits",
    "dense_starts",
    "init_for_variants",
    "live_beam_search",
    "lookahead_play",
    "lookahead_policy",
    "play_without_dying",
    "prefix_streams",
    "procgen_beam",
    "procgen_judged_beam",
    "progress_value",
    "reflex_pass",
    "rollout",
    "scored_beam",
    "screen_viable",
]
