"""V-ICAL as Inspect AI tasks: one sample per task x run, played through ``VicalEnv``.

Found through the ``inspect_ai`` entry point of the ``vical`` distribution, so with
the ``inspect`` extra installed::

    inspect eval vical/vical --model openai/gpt-4o -T tasks='taxi/*'
    inspect eval vical/vical_minigrid --model google/gemini-2.5-pro -T runs=3

Task parameters (``-T``): ``tasks`` (comma-separated id patterns, as ``vical eval
--tasks``; all 342 when empty), ``runs`` (runs per task, as ``--runs``), ``seed``
(the run seed, as ``--seed``), ``demos`` (``--demos/--no-demos``), ``rules``
(``basic`` or ``detailed``), ``demo_transport`` (``frames``: every demonstration as
its JPEG frames, the way ``openai-chat`` sends them; ``video``: one MP4 per
demonstration, for providers Inspect can send video to) and ``format_retries``.

The solver plays the episode the way the runner does (:func:`vical.run.runner.run_episode`):
reset, start the agent with the same context, one decision per turn, a step per
action, the same endings; the agent is :class:`vical.interop.inspect_agent.InspectAgent`,
vical's own protocol. What an episode produced goes into the sample's store under
``vical``: every decision's log records (requests, replies, parse outcomes, errors,
decisions), usage, the simulator's result (actions, frame hashes, score, pass,
outcome, failure mode), timings and the machine; ``vical import-inspect`` turns
them into a run folder. The sample's messages are the conversation (images
included) for ``inspect view``.

The scorer's value is ``{"score": 0-100, "passed": 0/1}``; the metrics are the mean
score, the pass rate (0-100) and vical's Table 1 (score and pass rate per column,
each the equal-weight mean over environments of the mean over their tasks of the
mean over runs, as ``vical report`` computes it).
"""

from __future__ import annotations

import inspect
import json
import time
from datetime import UTC, datetime
from statistics import mean
from typing import Any

from vical.interop.inspect_agent import inspect_ai_module

inspect_ai_module("the V-ICAL Inspect tasks")

from inspect_ai import Task, task  # noqa: E402
from inspect_ai.dataset import MemoryDataset, Sample  # noqa: E402
from inspect_ai.scorer import (  # noqa: E402
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    metric,
    scorer,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver  # noqa: E402

from vical.interop import inspect_exit  # noqa: E402, F401  (its hook: no sample completed -> exit 1)
from vical.spec.families import FAMILIES  # noqa: E402

STORE_KEY = "vical"
STORE_FORMAT = 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def episode_samples(
    tasks: str | list[str] | None, runs: int, seed: int, family: str | None = None
) -> list[Sample]:
    """One sample per (task, run index), in ``vical eval``'s order: tasks, then runs."""
    from vical.outcomes import episode_name
    from vical.run.runner import episode_seed
    from vical.spec import select_tasks

    chosen = select_tasks(tasks)
    if family is not None:
        chosen = [t for t in chosen if t.env.family == family]
    if runs < 1:
        raise ValueError(f"runs must be at least 1, not {runs}")
    return [
        Sample(
            id=episode_name(t.id, k),
            input=f"Play V-ICAL task {t.id} (run {k}) from its start frame.",
            metadata={
                "task_id": t.id,
                "run_index": k,
                "seed": episode_seed(seed, t.id, k),
                "env": t.env.env,
                "family": t.env.family,
                "tags": t.env.tags.model_dump(),
            },
        )
        for t in chosen
        for k in range(runs)
    ]


def _model_info(model: Any) -> tuple[str, str | None, dict[str, Any]]:
    """(model name, base URL or None, the generate options set) of an Inspect model."""
    config = model.config
    try:
        from inspect_ai.model._generate_config import active_generate_config

        config = config.merge(active_generate_config())
    except (ImportError, AttributeError):  # the private helper moved: the model's own
        pass
    options = {k: v for k, v in config.model_dump(exclude_none=True).items() if v not in ({}, [])}
    return str(model), getattr(model.api, "base_url", None), _jsonable(options)


@solver
def vical_player(
    demos: bool = True,
    rules: str = "basic",
    demo_transport: str = "frames",
    format_retries: int = 3,
) -> Solver:
    """Play one V-ICAL episode with the task's model, through vical's protocol."""
    from vical.agent.prompts import RULES_LEVELS

    if rules not in RULES_LEVELS:
        raise ValueError(f"rules must be one of {', '.join(RULES_LEVELS)}, not {rules!r}")

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        import anyio
        import anyio.to_thread
        from inspect_ai.model import get_model
        from inspect_ai.util import LimitExceededError

        from vical.agent import EpisodeContext, Observation
        from vical.envs import make_env
        from vical.envs.core import frame_sha256
        from vical.interop.inspect_agent import InspectAgent
        from vical.outcomes import FailureMode, episode_failure
        from vical.run.machine import machine
        from vical.spec import get_task

        meta = state.metadata
        task = get_task(meta["task_id"])
        model = get_model()
        name, base_url, config = _model_info(model)
        agent = InspectAgent(
            model=name,
            generate=model.generate,
            endpoint=base_url,
            config=config,
            demo_transport=demo_transport,
            format_retries=format_retries,
        )
        started = _now()
        t0 = time.perf_counter()
        agent_time = 0.0
        decisions: list[dict[str, Any]] = []
        actions: list[str] = []
        hashes: list[str] = []
        agent_failure: str | None = None

        def record(cut_short: str | None) -> None:
            """The episode as it stands into the sample's store (``cut_short``: the
            Inspect limit that stopped it before its end, or None)."""
            score, passed, outcome = env.score(), env.passed(), env.outcome
            if cut_short is None:
                failure = episode_failure(outcome, passed, agent_failure)
            else:  # a budget ran out, Inspect's instead of the task's step budget
                failure = None if passed else FailureMode.TIMEOUT
            usage: dict[str, int] = {}
            for d in decisions:
                for k, v in d["usage"].items():
                    usage[k] = usage.get(k, 0) + int(v)
            data = {
                "format": STORE_FORMAT,
                "task_id": task.id,
                "run_index": meta["run_index"],
                "seed": meta["seed"],
                "demos": demos,
                "rules": rules,
                "decisions": decisions,
                "result": {
                    "score": score,
                    "passed": passed,
                    "outcome": outcome,
                    "failure_mode": failure,
                    "steps": len(actions),
                    "actions": actions,
                    "frame_hashes": hashes,
                    "progress": env.progress(),
                    "usage": usage,
                },
                "timing": {
                    "started_at": started,
                    "finished_at": _now(),
                    "wall_seconds": round(time.perf_counter() - t0, 3),
                    "agent_seconds": round(agent_time, 3),
                },
                "machine": machine(),
            }
            if cut_short is not None:
                data["cut_short"] = cut_short
            state.store.set(STORE_KEY, _jsonable(data))

        env = make_env(task)
        try:
            frame = env.reset()
            hashes.append(frame_sha256(frame))
            shown: list[Any] = []
            if demos and task.variant.demos:
                from vical.demos import load_demo_package

                shown = load_demo_package(task)
            agent.start(
                EpisodeContext(
                    task=task,
                    run_index=meta["run_index"],
                    seed=meta["seed"],
                    action_names=task.action_names,
                    max_steps=task.max_steps,
                    demos=shown,
                    rules=rules,
                )
            )
            previous: str | None = None
            while not env.done:
                obs = Observation(
                    step=env.steps, frame=frame, frame_sha256=hashes[-1], previous_action=previous
                )
                ta = time.perf_counter()
                try:
                    decision = await anyio.to_thread.run_sync(agent.act, obs)
                finally:
                    agent_time += time.perf_counter() - ta
                decisions.append(
                    {
                        "step": obs.step,
                        "action": decision.action,
                        "failure": decision.failure,
                        "records": decision.records,
                        "usage": decision.usage,
                    }
                )
                if decision.action is None:
                    agent_failure = decision.failure
                    break
                s = env.step(decision.action)
                frame, previous = s.frame, decision.action
                actions.append(decision.action)
                hashes.append(s.frame_sha256)
            if agent_failure == FailureMode.API_ERROR:  # infrastructure: no result
                raise RuntimeError(
                    f"{task.id} run {meta['run_index']}: the model request failed "
                    "(api_error); this is an infrastructure failure, not a result"
                )
            record(None)
        except LimitExceededError as e:  # Inspect's message/token/... limit: truncated
            record(e.type)
            raise
        except anyio.get_cancelled_exc_class():  # Inspect's time or working limit
            if hashes:
                record("time")
            raise
        finally:
            env.close()
            agent.close()
            if agent.conversation:
                state.messages = list(agent.conversation)
        return state

    return solve


# -- metrics ----------------------------------------------------------------------


def _values(scores: list[SampleScore], key: str) -> list[float]:
    out = []
    for s in scores:
        v = s.score.value
        if isinstance(v, dict) and v.get(key) is not None:
            out.append(float(v[key]))
    return out


@metric
def mean_score() -> Metric:
    """Mean episode score, 0-100."""

    def compute(scores: list[SampleScore]) -> float:
        vals = _values(scores, "score")
        return mean(vals) if vals else 0.0

    return compute


@metric
def pass_rate() -> Metric:
    """Share of passed episodes, in percent."""

    def compute(scores: list[SampleScore]) -> float:
        vals = _values(scores, "passed")
        return 100.0 * mean(vals) if vals else 0.0

    return compute


def table1_cells(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Table 1 from per-episode rows (``task_id``, ``env``, ``tags``, ``score``, ``passed``):
    ``{column: {"S": score, "P": pass rate %}}``, aggregated as :mod:`vical.report.table`
    does (runs -> task mean, tasks -> environment mean, environments -> equal-weight
    column mean, an environment counting in each of its type columns)."""
    from vical.paper import TABLE1_COLUMNS

    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_task.setdefault(r["task_id"], []).append(r)
    envs: dict[str, dict[str, Any]] = {}
    for runs in by_task.values():
        e = envs.setdefault(runs[0]["env"], {"tags": runs[0]["tags"], "S": [], "P": []})
        e["S"].append(mean(float(r["score"]) for r in runs))
        e["P"].append(100.0 * mean(float(r["passed"]) for r in runs))
    cells: dict[str, dict[str, float]] = {}
    for col in TABLE1_COLUMNS:
        members = [
            e
            for e in envs.values()
            if col in (*e["tags"]["types"], e["tags"]["memory"], e["tags"]["dynamics"], "All")
        ]
        if members:
            cells[col] = {
                "S": mean(mean(e["S"]) for e in members),
                "P": mean(mean(e["P"]) for e in members),
            }
    return cells


@metric
def table1() -> Metric:
    """vical's Table 1: ``<column> S`` and ``<column> P%`` for every column with episodes."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        rows = []
        for s in scores:
            meta = s.score.metadata or {}
            v = s.score.value
            if not isinstance(v, dict) or "task_id" not in meta:
                continue
            rows.append({**meta, "score": v["score"], "passed": v["passed"]})
        out: dict[str, float] = {}
        for col, cell in table1_cells(rows).items():
            out[f"{col} S"] = round(cell["S"], 4)
            out[f"{col} P%"] = round(cell["P"], 4)
        return out

    return compute


@scorer(metrics=[mean_score(), pass_rate(), table1()])
def vical_scorer() -> Scorer:
    """The simulator's score (0-100) and pass flag of the episode the solver played."""

    async def score(state: TaskState, target: Target) -> Score:
        data = state.store.get(STORE_KEY)
        meta = state.metadata
        if not data:  # stopped before its start frame: an episode of no step
            return Score(
                value={"score": 0.0, "passed": 0.0},
                answer="",
                explanation="cut short before the episode's first frame: score 0, fail",
                metadata={
                    "task_id": meta["task_id"],
                    "run_index": meta["run_index"],
                    "env": meta["env"],
                    "tags": meta["tags"],
                    "outcome": None,
                    "failure_mode": "timeout",
                    "steps": 0,
                    "cut_short": "before start",
                },
            )
        r = data["result"]
        cut = data.get("cut_short")
        return Score(
            value={"score": float(r["score"]), "passed": 1.0 if r["passed"] else 0.0},
            answer=" ".join(r["actions"]),
            explanation=(
                (f"cut short by Inspect's {cut} limit after {r['steps']} step(s): " if cut else "")
                + f"score {r['score']:g}, {'pass' if r['passed'] else 'fail'}, outcome "
                f"{r['outcome']}, failure mode {r['failure_mode'] or 'none'}, "
                f"{r['steps']} step(s)"
            ),
            metadata={
                "task_id": meta["task_id"],
                "run_index": meta["run_index"],
                "env": meta["env"],
                "tags": meta["tags"],
                "outcome": r["outcome"],
                "failure_mode": r["failure_mode"],
                "steps": r["steps"],
                "cut_short": cut,
            },
        )

    return score


# -- tasks ------------------------------------------------------------------------


def _check_dependencies(demos: bool) -> None:
    """What every sample needs, checked before the first is played: the demonstrations'
    MP4 decoder; otherwise one :class:`~vical.errors.MissingDependency` naming the extra
    (Inspect stops with it instead of erroring every sample the same way)."""
    from vical.errors import import_optional

    if demos:
        import_optional(
            "imageio_ffmpeg",
            package="imageio-ffmpeg",
            extra="inspect",
            needed_for="the V-ICAL Inspect tasks' demonstrations",
        )


def vical_task(
    tasks: str | list[str] | None = None,
    runs: int = 1,
    seed: int = 0,
    demos: bool = True,
    rules: str = "basic",
    demo_transport: str = "frames",
    format_retries: int = 3,
    family: str | None = None,
) -> Task:
    """The Inspect task for a set of V-ICAL tasks (see the module's docstring)."""
    from vical import __version__
    from vical.spec import task_patterns, tasks_digest

    _check_dependencies(demos)
    samples = episode_samples(tasks, runs, seed, family)
    if not samples:
        raise ValueError(f"no V-ICAL task of family {family!r} matches {tasks!r}")
    return Task(
        dataset=MemoryDataset(samples, name=f"vical-{family or 'all'}"),
        solver=vical_player(demos, rules, demo_transport, format_retries),
        scorer=vical_scorer(),
        metadata={
            STORE_KEY: {
                "tasks": sorted({str((s.metadata or {})["task_id"]) for s in samples}),
                "task_pattern": ",".join(task_patterns(tasks)) or None,
                "family": family,
                "runs": runs,
                "run_seed": seed,
                "demos": demos,
                "rules": rules,
                "demo_transport": demo_transport,
                "format_retries": format_retries,
                "tasks_digest": tasks_digest(),
                "vical_version": __version__,
            }
        },
    )


def _family_task(family: str | None) -> Any:
    """The Inspect task ``vical_<family>`` of one family's tasks; ``vical`` for every task.

    Its parameters (the ``-T`` options, which Inspect reads from the signature) are
    :func:`vical_task`'s but ``family``."""

    def make(*args: Any, **kwargs: Any) -> Task:
        kwargs["family"] = family
        return vical_task(*args, **kwargs)

    sig = inspect.signature(vical_task)
    make.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[p for p in sig.parameters.values() if p.name != "family"]
    )
    name = "vical" if family is None else f"vical_{family}"
    make.__name__ = make.__qualname__ = name
    make.__doc__ = (
        "V-ICAL: the 342 tasks, or those ``tasks`` selects (``taxi/*,cartpole/seed41``)."
        if family is None
        else f"V-ICAL, the {family} family's tasks (or those of them ``tasks`` selects)."
    )
    return task(name=name)(make)


vical = _family_task(None)
# one Inspect task per family: vical_toytext, vical_classic, vical_ale, ... (registered when made)
for _family in FAMILIES:
    globals()[f"vical_{_family}"] = _family_task(_family)
