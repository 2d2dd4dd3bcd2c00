"""Demo packages with the paper's structure (Appendix 1.2): a deterministic selection.

The recipes (``vical.authoring``) produce a pool of clips per environment and a
first assignment of clips to tasks. The paper's packages are leaner: 342 tasks
receive 576 clip assignments drawn from 148 distinct clips (about four per
environment), 155 tasks get one clip, 145 two, 37 three and 5 four, and a
package holds 10-80 frames (mean 45.73, median 45). :func:`pack_env` turns an
environment's assignment into packages of that shape, driven by the quota in its
task file (``demo_quota``, :class:`vical.spec.DemoQuota`):

``demo_quota: {pool: <n_distinct>, clips: '<pattern>', loss_scope: <scope>}``

* ``pool``: size of the environment's *shared pool*, the clips all its packages
  are drawn from (over the 37 environments they sum to 148);
* ``clips``: one digit per task, in file order: how many clips that task's
  package gets (over the 37 environments the digits count 155 ones, 145 twos,
  37 threes and 5 fours: 576 assignments);
* ``loss_scope``: where a failure clip has to be shown: ``"env"`` (somewhere in
  the environment), ``"settings"`` (in every group of tasks with equal simulator
  settings), ``"every"`` (in every package), or a task parameter name such as
  ``"section"`` (in every value of that parameter).

Environments whose clips are short get more two- and three-clip packages, those
with long clips more single-clip ones; the four-clip packages go to environments
with short clips (battlezone, bossfight, caveflyer, leaper, ninja). The
beam-search ALE games show a loss in every game mode ("settings"); where a lost
life costs points every package shows one ("every"); River Raid sections and
TRON levels each show a loss ("section", "level").

The selection, for one environment ("success" means a clip labelled Victory,
"failure" any other label, or only Terminated under a loss scope other than "env"; a
clip is *valid* on a task when the task already shows
it, or when replaying it under the task's settings ends in its stored label and
does not start on the task's own opening frame):

1. **Shared pool.** Walk the tasks in file order; a task for which no success of
   the pool is valid adds the longest success among its own clips and those of
   tasks with equal settings, targets and parameters (ties by id), or its longest
   clip when none is a success. Then each loss-scope group for which no failure of
   the pool is valid adds its longest failure. The pool is filled up to
   ``n_distinct`` with the clip that most reduces the shortfall of tasks whose
   near clips are fewer than their digit, then the shorter (so that three and
   four clips still fit 80 frames), then the one shown by more tasks, then by id.
2. **Packages.** Each task takes ``k`` clips (its digit) from the shared pool.
   Among the combinations of ``k`` clips with 10-80 frames it prefers, in order:
   one with a success; (``k >= 2`` or scope ``"every"``) one with a failure; the
   frame total nearest :data:`TARGET_FRAMES` (one clip: the longest); the fewest
   clips the task does not already show; the most pool clips no earlier task
   shows; the ids. Other clips of the pool are only considered (and replayed)
   when the task's own clips lack a success or a needed failure, or, for one
   clip, when the pool holds a longer success. Clips are ordered successes
   first, longer first, then by id.
3. **Coverage.** A pool clip that no package took replaces, in the first task
   where it is valid, a clip of the same kind (success or not; under a loss scope
   other than "env", the same label) that another package also shows.

Packing packed data changes nothing: the pool then holds exactly the clips in
use, each task already shows ``k`` clips that won on every criterion but "not
already shown", and that criterion now favours them (``vical demos pack --check``
verifies it). ``make_demos`` runs the recipes and then this packing, so
regenerating reproduces the stored packages.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

from vical.errors import TaskDataError
from vical.spec import DemoClip, DemoQuota, EnvSpec, TaskDirs, TaskSpec

MIN_FRAMES, MAX_FRAMES = 10, 80
# the frame total a package of two or more clips aims at (the paper's mean is 45.73;
# single-clip packages fall short of it, so the combined packages aim a little higher)
TARGET_FRAMES = 54

# A game whose main objective is shown by particular success clips names their marker in
# its game module (OBJECTIVE_CLIP = "<marker>"): only clips whose id carries the marker
# count as successes when packing, so every package that shows a success shows the
# objective (Berzerk: walking out of the room, its early success in Table 28, rather than
# points held to the end of a clip).
OBJECTIVE_HOOK = "OBJECTIVE_CLIP"


class PackError(TaskDataError, ValueError):
    """An environment's clips cannot be packed as its quota asks."""


def frames(clip: DemoClip) -> int:
    """Frames a clip contributes: the start, one per action, the terminal copy."""
    return len(clip.actions) + 2


def objective_marker(spec: EnvSpec) -> str | None:
    """The marker of the clips that show the game's objective (its game module's
    ``OBJECTIVE_CLIP``), or None: every success clip shows it."""
    from vical.envs import game_module

    marker = getattr(game_module(spec), OBJECTIVE_HOOK, None)
    return marker if isinstance(marker, str) else None


def is_win(clip: DemoClip, marker: str | None = None) -> bool:
    """A success clip; with an objective ``marker``, one whose id carries it."""
    return clip.label == "Victory" and (marker is None or marker in clip.id)


def _order_key(c: DemoClip, marker: str | None = None) -> tuple[bool, int, str]:
    return (not is_win(c, marker), -frames(c), c.id)


def _class_key(task: TaskSpec) -> str:
    """Tasks with equal settings, targets and parameters replay a clip alike."""
    return repr(
        (
            sorted(task.env_kwargs.items()),
            sorted((k, x.value) for k, x in task.targets.items()),
            sorted(task.params.items()),
        )
    )


def _loss_groups(spec: EnvSpec, scope: str) -> list[list[str]]:
    tasks = [TaskSpec(env=spec, variant=v) for v in spec.tasks]
    if scope == "env":
        return [[t.variant.variant for t in tasks]]
    if scope == "every":
        return [[t.variant.variant] for t in tasks]
    groups: dict[str, list[str]] = {}
    for t in tasks:
        if scope == "settings":
            key = repr(sorted(t.env_kwargs.items()))
        else:
            key = repr(t.params.get(scope))
        groups.setdefault(key, []).append(t.variant.variant)
    return list(groups.values())


def _default_valid(task: TaskSpec, clip: DemoClip) -> bool:
    """The clip replays to its label on the task and does not open on the task's frame."""
    from vical.demos.render import ClipReplayError, replay_clip, task_start_sha256

    try:
        r = replay_clip(task, clip)
    except (ClipReplayError, RuntimeError):
        return False
    return r.start_sha256 != task_start_sha256(task)


def pack_env(
    spec: EnvSpec,
    demos: dict[str, list[DemoClip]],
    *,
    valid: Callable[[TaskSpec, DemoClip], bool] | None = None,
) -> dict[str, list[DemoClip]]:
    """The environment's packages in the paper's shape: ``{variant: [DemoClip, ...]}``."""
    packer = _Packer(spec, demos, valid or _default_valid)
    shared = packer.shared_pool()
    chosen, used = packer.packages(shared)
    packer.cover(shared, chosen, used)
    return {
        v: sorted((packer.pool[c] for c in chosen[v]), key=lambda c: _order_key(c, packer.marker))
        for v in packer.variants
    }


def _quota(spec: EnvSpec) -> DemoQuota:
    """The environment's quota, with one digit per task (PackError otherwise)."""
    quota = spec.demo_quota
    if quota is None:
        raise PackError(
            f"{spec.env}.yaml has no demo_quota; add one line such as "
            f"demo_quota: {{pool: <distinct clips>, clips: '<one digit 1-4 per task>', "
            f"loss_scope: env}} before its tasks"
        )
    if len(quota.clips) != len(spec.tasks):  # a spec changed in code, not loaded from a file
        raise PackError(
            f"{spec.env}: demo_quota.clips has {len(quota.clips)} digits for "
            f"{len(spec.tasks)} tasks"
        )
    return quota


# a package's rank among the combinations of a task's candidates (lower is better)
_Score = tuple[bool, bool, int, int, int, list[str]]


class _Packer:
    """One environment's packing, the three steps of the module docstring: its clips by
    id, each task's candidates, and the replay checks (``valid``) made so far."""

    def __init__(
        self,
        spec: EnvSpec,
        demos: dict[str, list[DemoClip]],
        valid: Callable[[TaskSpec, DemoClip], bool],
    ) -> None:
        quota = _quota(spec)
        self.spec, self.env = spec, spec.env
        self.marker = objective_marker(spec)
        self.n_distinct, self.scope = quota.pool, quota.loss_scope
        variants = self.variants = [v.variant for v in spec.tasks]
        self.want = {v: int(d) for v, d in zip(variants, quota.clips, strict=True)}
        self.tasks = {v.variant: TaskSpec(env=spec, variant=v) for v in spec.tasks}
        self.own = {v: [c.id for c in demos.get(v, [])] for v in variants}
        self.pool: dict[str, DemoClip] = {}
        for v in variants:
            for clip in demos.get(v, []):
                if self.pool.setdefault(clip.id, clip) != clip:
                    raise PackError(f"{spec.env}: clip {clip.id} is defined twice, differently")
        self.shown_by = {cid: sum(cid in self.own[v] for v in variants) for cid in self.pool}
        # candidates of a task: its own clips, those of tasks that replay alike, then the rest
        keys = {v: _class_key(self.tasks[v]) for v in variants}
        self.near: dict[str, list[str]] = {}
        self.elig: dict[str, list[str]] = {}
        for v in variants:
            ids = list(self.own[v])
            for u in variants:
                if keys[u] == keys[v]:
                    ids += [c for c in self.own[u] if c not in ids]
            self.near[v] = ids
            self.elig[v] = ids + [c for c in self.pool if c not in ids]
        self.fr = {cid: frames(c) for cid, c in self.pool.items()}
        self._valid = valid
        self._valid_cache: dict[tuple[str, str], bool] = {}

    def longest(self, ids: list[str]) -> str:
        return min(ids, key=lambda i: (-self.fr[i], i))

    def win(self, cid: str) -> bool:
        return is_win(self.pool[cid], self.marker)

    def loss(self, cid: str) -> bool:
        # a scoped loss is a lost life or game (Terminated); otherwise any unsuccessful end
        label = self.pool[cid].label
        return label == "Terminated" if self.scope != "env" else label != "Victory"

    def ok(self, v: str, cid: str) -> bool:
        """Clip ``cid`` is valid on task ``v`` (replayed once per pair)."""
        if cid in self.own[v]:
            return True
        if (v, cid) not in self._valid_cache:
            self._valid_cache[(v, cid)] = self._valid(self.tasks[v], self.pool[cid])
        return self._valid_cache[(v, cid)]

    # -- 1. the shared pool --------------------------------------------------------------
    def shared_pool(self) -> list[str]:
        shared: list[str] = []
        for v in self.variants:
            wins = [c for c in self.near[v] if self.win(c)]
            if wins:
                if not any(self.win(c) and self.ok(v, c) for c in shared):
                    shared.append(self.longest(wins))
            elif not any(self.ok(v, c) for c in shared) and self.own[v]:
                shared.append(self.longest(self.own[v]))
        for group in _loss_groups(self.spec, self.scope):
            fails = [c for v in group for c in self.near[v] if self.loss(c)]
            if fails and not any(self.loss(c) and self.ok(v, c) for v in group for c in shared):
                owned = [c for v in group for c in self.own[v] if self.loss(c)]
                shared.append(self.longest(owned or fails))
        if len(shared) > self.n_distinct:
            raise PackError(
                f"{self.env}: covering every task and loss group takes {len(shared)} clips, "
                f"the quota allows {self.n_distinct}"
            )
        while len(shared) < self.n_distinct and len(shared) < len(self.pool):
            shared.append(self._next_for_pool(shared))
        return shared

    def _next_for_pool(self, shared: list[str]) -> str:
        """The clip that most reduces the shortfall of near clips, then the shorter, then
        the one more tasks show, then by id."""
        have = {v: sum(c in shared for c in self.near[v]) for v in self.variants}

        def rank(c: str) -> tuple[int, int, int, str]:
            deficit = sum(
                max(0, self.want[v] - have[v]) for v in self.variants if c in self.near[v]
            )
            return (-deficit, self.fr[c], -self.shown_by[c], c)

        return min((c for c in self.pool if c not in shared), key=rank)

    # -- 2. the packages -----------------------------------------------------------------
    def packages(self, shared: list[str]) -> tuple[dict[str, list[str]], dict[str, int]]:
        """Each task's clips, and how many packages show each clip."""
        in_shared = set(shared)
        longest_win = max((self.fr[c] for c in shared if self.win(c)), default=0)
        used: dict[str, int] = {}
        chosen: dict[str, list[str]] = {}
        for v in self.variants:
            k = self.want[v]
            mine = [c for c in self.own[v] if c in in_shared]
            best = self._best_of(v, mine, used)
            # the task's own clips do unless they lack a success or a needed failure, or
            # (one clip) a longer success of the shared pool may replay on the task
            if (
                best is None
                or best[0][0]
                or best[0][1]
                or (k == 1 and sum(self.fr[c] for c in best[1]) < longest_win)
            ):
                more = [
                    c for c in self.elig[v] if c in in_shared and c not in mine and self.ok(v, c)
                ]
                best = self._best_of(v, mine + more, used) or best
            if best is None:
                raise PackError(
                    f"{self.env}/{v}: no {k} clips of the shared pool make 10-80 frames"
                )
            chosen[v] = list(best[1])
            for c in chosen[v]:
                used[c] = used.get(c, 0) + 1
        return chosen, used

    def _best_of(
        self, v: str, cands: list[str], used: dict[str, int]
    ) -> tuple[_Score, tuple[str, ...]] | None:
        """The best combination of task ``v``'s digit of clips among ``cands``, with its
        score (None: no combination makes 10-80 frames)."""
        k = self.want[v]
        need_fail = k >= 2 or self.scope == "every"
        best: tuple[_Score, tuple[str, ...]] | None = None
        for combo in combinations(cands, k):
            total = sum(self.fr[c] for c in combo)
            if not MIN_FRAMES <= total <= MAX_FRAMES:
                continue
            score: _Score = (
                not any(self.win(c) for c in combo),
                need_fail and not any(self.loss(c) for c in combo),
                abs(total - (TARGET_FRAMES if k > 1 else MAX_FRAMES)),
                sum(c not in self.own[v] for c in combo),
                -sum(c not in used for c in combo),
                sorted(combo),
            )
            if best is None or score < best[0]:
                best = (score, combo)
        return best

    # -- 3. coverage: every clip of the shared pool is shown somewhere -------------------
    def cover(self, shared: list[str], chosen: dict[str, list[str]], used: dict[str, int]) -> None:
        for cid in shared:
            if used.get(cid):
                continue
            for v in self.variants:
                if cid not in self.elig[v] or not self.ok(v, cid):
                    continue
                swap = [c for c in chosen[v] if used[c] > 1 and self._swappable(chosen[v], c, cid)]
                if swap:
                    c = swap[0]
                    chosen[v] = [cid if x == c else x for x in chosen[v]]
                    used[c] -= 1
                    used[cid] = 1
                    break

    def _swappable(self, package: list[str], c: str, cid: str) -> bool:
        """Clip ``cid`` may replace ``c`` in ``package``: the same kind (success or not;
        under a loss scope other than "env", the same label), and still 10-80 frames."""
        if self.scope == "env":
            same = self.win(c) == self.win(cid)
        else:
            same = self.pool[c].label == self.pool[cid].label
        total = sum(self.fr[x] for x in package) - self.fr[c] + self.fr[cid]
        return same and MIN_FRAMES <= total <= MAX_FRAMES


def pack_stored(
    env_key: str, tasks_dir: TaskDirs | None = None
) -> tuple[dict[str, list[DemoClip]], bool]:
    """The packed packages of a stored task file and whether they differ from the stored
    ones (``tasks_dir``: the task folders, by default the built-in set and
    ``$VICAL_TASKS_DIR``)."""
    from vical.spec import TASK_DIRS, env_file, load_env_file

    spec = load_env_file(env_file(env_key, TASK_DIRS if tasks_dir is None else tasks_dir))
    stored = {v.variant: list(v.demos) for v in spec.tasks}
    packed = pack_env(spec, stored)
    return packed, packed != stored
