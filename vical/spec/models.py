"""The task data's models: one environment file (:class:`EnvSpec`) and the tasks it
defines (:class:`TaskSpec`), validated by pydantic.

These classes know the shape of a task file and the rules between its fields; they
know nothing of files, folders or simulators (:mod:`vical.spec` loads the files,
:mod:`vical.spec.checks` holds them against the installed simulators).
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vical.errors import TaskSpecError
from vical.spec.families import FAMILIES

EnvType = Literal["Maze", "Shooter", "Control", "Dodge", "Collect", "Sport"]
ENV_TYPES: tuple[str, ...] = ("Maze", "Shooter", "Control", "Dodge", "Collect", "Sport")
Outcome = Literal["Victory", "Terminated", "Time Out", "Draw"]
OUTCOMES: tuple[str, ...] = ("Victory", "Terminated", "Time Out", "Draw")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_PROVENANCE_FORMS = ("paper:", "calibrated:")


def check_provenance(v: str) -> str:
    """A number's provenance: ``paper: <table/section>`` or ``calibrated: <how>``."""
    head, sep, rest = v.partition(":")
    if not sep or head not in ("paper", "calibrated") or len(rest.strip()) < 3:
        raise ValueError(
            f"provenance {v!r} must read 'paper: <table or section>' or "
            "'calibrated: <how the number was obtained>'"
        )
    return v


class Target(_Strict):
    """A reference value (normalisation target or threshold) with where it comes from."""

    value: float
    provenance: str = Field(
        description='"paper: <table/section>" when the paper states the number, '
        'else "calibrated: <how>"'
    )

    @field_validator("provenance")
    @classmethod
    def _provenance_form(cls, v: str) -> str:
        return check_provenance(v)


def numeric_keys(params: dict[str, Any]) -> list[str]:
    """Parameter names whose value is or holds a number (bools are switches, not numbers)."""

    def has_number(x: Any) -> bool:
        if isinstance(x, bool):
            return False
        if isinstance(x, (int, float)):
            return True
        if isinstance(x, dict):
            return any(has_number(v) for v in x.values())
        if isinstance(x, (list, tuple)):
            return any(has_number(v) for v in x)
        return False

    return [k for k, v in params.items() if has_number(v)]


class _WithParams(_Strict):
    """A rule with numeric parameters, each of which says where it comes from."""

    params: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, str] = Field(
        default_factory=dict,
        description="parameter name -> 'paper: <where>' or 'calibrated: <how>'",
    )

    @field_validator("provenance")
    @classmethod
    def _provenance_values(cls, v: dict[str, str]) -> dict[str, str]:
        for value in v.values():
            check_provenance(value)
        return v

    def missing_provenance(self) -> list[str]:
        """Numeric parameters that have no provenance entry."""
        return [k for k in numeric_keys(self.params) if k not in self.provenance]


class ScoringRule(_WithParams):
    """Which score family an environment uses, with its targets and parameters."""

    family: Literal[
        "capped_ratio", "event_count", "horizon_ratio", "path_efficiency", "milestones", "native"
    ]
    description: str
    targets: dict[str, Target] = Field(default_factory=dict)


class PassRule(_WithParams):
    """The success condition, evaluated independently of the score."""

    description: str


class Tags(_Strict):
    """Table 1 categories: multi-label type, memory requirement, dynamics."""

    types: list[EnvType] = Field(min_length=1)
    memory: Literal["Single", "Multiple"]
    dynamics: Literal["Static", "Dynamic"]
    provenance: str | None = Field(
        default=None, description="which evidence in the paper fixes these tags"
    )


class Rules(_Strict):
    """Rules text in two levels: non-visual constraints, and the full mechanics."""

    basic: str = Field(min_length=20)
    detailed: str = Field(min_length=40)


# ---------------------------------------------------------------------------
# Where a start sequence or a demo clip comes from (its origin)
# ---------------------------------------------------------------------------
ORIGINS: tuple[str, ...] = ("paper", "generated", "search", "scripted", "human")
# a start sequence (TaskVariant.init_source) and a demo clip (DemoClip.source)
INIT_ORIGINS: tuple[str, ...] = ("paper", "generated", "human")
CLIP_ORIGINS: tuple[str, ...] = ("search", "scripted", "human")
# how a source text starts -> its origin; "failure clip" is seeded random play by a program
_ORIGIN_PREFIXES: tuple[tuple[str, str], ...] = (
    ("paper:", "paper"),
    ("generated:", "generated"),
    ("human:", "human"),
    ("search expert", "search"),
    ("scripted", "scripted"),
    ("failure clip", "scripted"),
)
HUMAN_FORM = "human: <player>, <YYYY-MM-DD>, recorded with vical play; consent: <consent line>"
_HUMAN = re.compile(
    r"human:\s*(?P<player>[^,;\n]*?)\s*,\s*(?P<date>\d{4}-\d{2}-\d{2})\s*,\s*"
    r"recorded with vical play\s*;\s*consent:\s*(?P<consent>.*?)\s*",
    re.DOTALL,
)


class HumanSource(NamedTuple):
    """The parts of a ``human:`` source: who played, when, and their consent line."""

    player: str
    date: datetime.date
    consent: str


def source_origin(text: str) -> str:
    """The origin a start-sequence or demo-clip source text states, from its prefix.

    ``paper`` (``paper: <figure>``, stated by the paper), ``generated``
    (``generated: <recipe>``, made by an authoring recipe), ``search`` (``search
    expert ...``), ``scripted`` (``scripted ...`` or ``failure clip ...``: a fixed
    program, seeded random failure play included) or ``human`` (``human: <player>,
    <date>, recorded with vical play; consent: <line>``). Raises ValueError for a text
    with none of these prefixes.
    """
    head = text.lstrip()
    for prefix, origin in _ORIGIN_PREFIXES:
        if head.startswith(prefix):
            return origin
    raise ValueError(
        f"source {text[:40]!r} names no known origin; start it with 'paper:', 'generated:', "
        f"'search expert', 'scripted', 'failure clip' or '{HUMAN_FORM}'"
    )


def parse_human_source(text: str) -> HumanSource:
    """The player, date and consent line of a ``human:`` source; ValueError if malformed."""
    m = _HUMAN.fullmatch(text.strip())
    problem = None
    if m is None:
        problem = "does not read"
    elif not m["player"]:
        problem = "names no player in"
    elif not m["consent"]:
        problem = "has an empty consent line in"
    if m is None or problem is not None:
        raise ValueError(
            f"human source {text[:60]!r} {problem} the form '{HUMAN_FORM}' "
            "(the consent line is required: what the player agreed to)"
        )
    try:
        day = datetime.date.fromisoformat(m["date"])
    except ValueError:
        raise ValueError(
            f"human source {text[:60]!r}: {m['date']!r} is not a calendar date (YYYY-MM-DD)"
        ) from None
    return HumanSource(m["player"], day, " ".join(m["consent"].split()))


def human_source(player: str, date: datetime.date | str, consent: str) -> str:
    """The ``human:`` source text for a recording (checked by :func:`parse_human_source`)."""
    if any(c in player for c in ",;\n"):
        raise ValueError(f"player name {player!r} may not hold ',', ';' or a line break")
    day = date.isoformat() if isinstance(date, datetime.date) else date
    text = f"human: {player.strip()}, {day}, recorded with vical play; consent: {consent.strip()}"
    parse_human_source(text)
    return text


def _check_source(v: str, allowed: tuple[str, ...], field: str) -> str:
    origin = source_origin(v)
    if origin not in allowed:
        raise ValueError(
            f"{field} {v[:40]!r}... has origin {origin!r}; a {field} is one of {', '.join(allowed)}"
        )
    if origin == "human":
        parse_human_source(v)
    return v


class DemoClip(_Strict):
    """A demonstration clip as data: a start state, actions and a terminal label.

    ``source`` says who played it: ``search expert ...``, ``scripted ...`` or
    ``failure clip ...`` (programs) or ``human: <player>, <date>, recorded with vical
    play; consent: <line>`` (a person); :attr:`origin` is that as one word.
    """

    id: str
    seed: int | None = None
    initial_skip: int = 0
    init_actions: list[str] = Field(default_factory=list)
    actions: list[str] = Field(min_length=1)
    label: Outcome
    source: str = Field(
        description="how the clip was produced: 'search expert ...', 'scripted ...', "
        f"'failure clip ...' (programs, with tool and settings) or '{HUMAN_FORM}'"
    )

    @field_validator("source")
    @classmethod
    def _source_form(cls, v: str) -> str:
        return _check_source(v, CLIP_ORIGINS, "demo clip source")

    @property
    def origin(self) -> str:
        """``search``, ``scripted`` or ``human`` (:func:`source_origin`)."""
        return source_origin(self.source)


class ReflexException(_Strict):
    """A recorded exception to the reflex screen (``vical tasks screen``).

    The paper's own rule for the task lets a policy that never looks at the screen
    pass (Freeway's crossing is holding Up). The exception names the policies it
    excuses (globs over the screen's policy names, e.g. ``const:Up``, ``cycle:*``),
    the paper's words that state the rule and where they stand; the screen reports
    the task with them instead of failing it, and fails an exception that excuses
    nothing any more (claimed but absent).
    """

    policies: list[str] = Field(min_length=1, description="screen policy names or globs")
    where: str = Field(description="'paper: <table/section>' where the quoted rule stands")
    quote: str = Field(min_length=10, description="the paper's words that state the rule")
    why: str = Field(min_length=10, description="why the rule admits a reflex pass here")

    @field_validator("where")
    @classmethod
    def _where_is_paper(cls, v: str) -> str:
        head, sep, rest = v.partition(":")
        if head != "paper" or not sep or len(rest.strip()) < 3:
            raise ValueError(
                f"reflex_exception.where {v!r} must read 'paper: <table or section>': "
                "only a rule the paper states can excuse a reflex pass"
            )
        return v


class TaskVariant(_WithParams):
    """One task: a start state on an environment, with per-task overrides."""

    variant: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    kind: Literal["base", "parameterized", "human-init"]
    seed: int
    initial_skip: int = Field(default=0, ge=0)
    init_actions: list[str] = Field(default_factory=list)
    init_source: str | None = Field(
        default=None,
        description="where the start sequence comes from: 'paper: <figure/section>', "
        f"'generated: <recipe>' or '{HUMAN_FORM}'",
    )
    max_steps: int | None = Field(default=None, gt=0)
    targets: dict[str, Target] = Field(default_factory=dict)
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    demos: list[DemoClip] = Field(default_factory=list)
    reflex_exception: ReflexException | None = Field(
        default=None,
        description="a paper rule that lets a screen-blind policy pass this task "
        "(reported by `vical tasks screen`)",
    )

    @field_validator("init_source")
    @classmethod
    def _init_source_form(cls, v: str | None) -> str | None:
        if v is None:
            return v
        head = v.lstrip()
        if not head.startswith(("paper:", "generated:", "human:")):
            raise ValueError(
                f"init_source {v[:40]!r}... must start with 'paper: <where the paper states "
                f"the sequence>', 'generated: <how it was produced>' or '{HUMAN_FORM}'"
            )
        return _check_source(v, INIT_ORIGINS, "init_source")

    @property
    def init_origin(self) -> str | None:
        """``paper``, ``generated`` or ``human``; None when the task has no start sequence."""
        if not self.init_actions or self.init_source is None:
            return None
        return source_origin(self.init_source)

    @model_validator(mode="after")
    def _init_source_required(self) -> TaskVariant:
        if self.init_actions and not self.init_source:
            raise ValueError("init_source is required when init_actions is not empty")
        return self


LOSS_SCOPES: tuple[str, ...] = ("env", "settings", "every")


class DemoQuota(_Strict):
    """How the environment's demo clips are packed (:mod:`vical.demos.packages`).

    ``pool``: distinct clips in the environment's shared pool; ``clips``: one digit
    (1-4) per task, in file order, the clips of that task's package; ``loss_scope``:
    where a failure clip must be shown, ``env``, ``settings``, ``every`` or the name
    of a task parameter (a loss shown for every value of it).
    """

    pool: int = Field(ge=1, description="distinct clips in the shared pool")
    clips: str = Field(
        pattern=r"^[1-4]+$", description="clips per task package, one digit per task in file order"
    )
    loss_scope: str = Field(default="env", min_length=1)

    @field_validator("clips", mode="before")
    @classmethod
    def _digits_as_text(cls, v: Any) -> Any:
        # an unquoted digit string reads as a YAML integer; its digits are the same
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class EnvSpec(_Strict):
    """One environment file (``vical/tasks/<env>.yaml``)."""

    env: str = Field(pattern=r"^[a-z0-9]+$")
    name: str
    paper_id: str = Field(description="the environment id used in the paper's tables")
    family: str = Field(description="the environment family (vical.spec.families.FAMILIES)")
    sim_id: str = Field(description="the id handed to the simulator package")
    package: str
    actions: dict[str, Any] = Field(description="canonical action name -> native action")
    noop: Any = Field(default=None, description="native action used for NOOP fill and skips")
    frame_skip: int = Field(ge=1)
    action_steps: int = Field(ge=1)
    max_steps: int = Field(gt=0)
    life_loss_terminates: bool = False
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    scoring: ScoringRule
    pass_rule: PassRule
    tags: Tags
    rules: Rules
    demo_quota: DemoQuota | None = Field(
        default=None, description="how the demo clips are packed (vical demos pack)"
    )
    tasks: list[TaskVariant] = Field(min_length=1)

    @field_validator("family")
    @classmethod
    def _known_family(cls, v: str) -> str:
        if v not in FAMILIES:
            raise ValueError(f"unknown family {v!r}; families: {', '.join(FAMILIES)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> EnvSpec:
        if self.action_steps > self.frame_skip:
            raise ValueError(
                f"action_steps ({self.action_steps}) cannot exceed frame_skip ({self.frame_skip})"
            )
        if self.action_steps < self.frame_skip and self.noop is None:
            raise ValueError("noop is required when action_steps < frame_skip (NOOP fill)")
        seen: set[str] = set()
        for t in self.tasks:
            if t.variant in seen:
                raise ValueError(f"duplicate task variant {t.variant!r}")
            seen.add(t.variant)
            for a in t.init_actions:
                if a not in self.actions:
                    raise ValueError(
                        f"task {self.env}/{t.variant}: init action {a!r} is not one of "
                        f"{list(self.actions)}"
                    )
            for clip in t.demos:
                for a in [*clip.init_actions, *clip.actions]:
                    if a not in self.actions:
                        raise ValueError(
                            f"task {self.env}/{t.variant}: demo {clip.id} action {a!r} is not "
                            f"one of {list(self.actions)}"
                        )
        if sum(t.kind == "base" for t in self.tasks) != 1:
            raise ValueError("exactly one task must have kind 'base'")
        self._check_param_provenance()
        return self

    def demo_quota_problem(self) -> str | None:
        """What is wrong with the quota against this file's tasks (None: nothing).

        Checked when a task file loads (:func:`load_env_file`), not by the model: an
        environment taken with some of its tasks (a generator's or a test's copy)
        keeps the file's quota, which describes the file.
        """
        q = self.demo_quota
        if q is None:
            return None
        if len(q.clips) != len(self.tasks):
            return (
                f"demo_quota.clips {q.clips!r} has {len(q.clips)} digits for {len(self.tasks)} "
                "tasks; give one digit (1-4) per task, in file order"
            )
        names = {k for t in self.tasks for k in t.params}
        names |= set(self.scoring.params) | set(self.pass_rule.params)
        if q.loss_scope not in LOSS_SCOPES and q.loss_scope not in names:
            return (
                f"demo_quota.loss_scope {q.loss_scope!r} is neither one of "
                f"{', '.join(LOSS_SCOPES)} nor a task parameter "
                f"({', '.join(sorted(names)) or 'none defined'})"
            )
        return None

    def _check_param_provenance(self) -> None:
        """Every numeric rule or task parameter must say where it comes from."""
        fix = (
            'add it under {where} as {key}: "paper: <table or section>" or '
            '{key}: "calibrated: <how the number was obtained>"'
        )
        problems = []
        for name, rule in (("scoring", self.scoring), ("pass_rule", self.pass_rule)):
            for key in rule.missing_provenance():
                problems.append(
                    f"{self.env}.yaml: {name}.params.{key} has no provenance; "
                    + fix.format(where=f"{name}.provenance", key=key)
                )
        for t in self.tasks:
            for key in t.missing_provenance():
                problems.append(
                    f"{self.env}.yaml: task {self.env}/{t.variant}: params.{key} has no "
                    "provenance; " + fix.format(where="the task's provenance", key=key)
                )
        if problems:
            raise ValueError("\n".join(problems))


class TaskSpec(BaseModel):
    """A resolved task: its environment plus one variant, overrides applied."""

    model_config = ConfigDict(frozen=True)

    env: EnvSpec
    variant: TaskVariant

    @property
    def id(self) -> str:
        return f"{self.env.env}/{self.variant.variant}"

    @property
    def max_steps(self) -> int:
        return self.variant.max_steps or self.env.max_steps

    @property
    def targets(self) -> dict[str, Target]:
        return {**self.env.scoring.targets, **self.variant.targets}

    def target(self, name: str) -> float:
        try:
            return self.targets[name].value
        except KeyError:
            raise TaskSpecError(
                f"task {self.id}: scoring target {name!r} is missing; add it under "
                f"scoring.targets in {self.env.env}.yaml or under the task's targets"
            ) from None

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return {**self.env.env_kwargs, **self.variant.env_kwargs}

    @property
    def params(self) -> dict[str, Any]:
        return {**self.env.scoring.params, **self.env.pass_rule.params, **self.variant.params}

    @property
    def action_names(self) -> list[str]:
        return list(self.env.actions)


def origin_counts(tasks: Iterable[TaskSpec]) -> dict[str, dict[str, int]]:
    """How many of the tasks' start sequences and distinct demo clips have each origin.

    ``{"starts": {"paper": n, "generated": n, "human": n}, "clips": {"search": n,
    "scripted": n, "human": n}}``. A task without a start sequence counts in no start
    origin; a clip shown with several tasks of its environment (the same id) counts once.
    """
    starts: Counter[str] = Counter({o: 0 for o in INIT_ORIGINS})
    clips: dict[tuple[str, str], str] = {}
    for t in tasks:
        if t.variant.init_origin is not None:
            starts[t.variant.init_origin] += 1
        for clip in t.variant.demos:
            clips.setdefault((t.env.env, clip.id), clip.origin)
    return {
        "starts": dict(starts),
        "clips": {o: sum(v == o for v in clips.values()) for o in CLIP_ORIGINS},
    }
