"""The words the protocol sends to a model.

Every text block of the conversation comes from a function here, so the
wording lives in one place and a change to it is one diff. The wording is
our own; it carries what paper Appendix 2.1 says each turn must carry
(environment id, basic rules, decision horizon, legal action names,
demonstration context, the current frame; later the previous action and the
new frame) and nothing more. Reward numbers are never mentioned. Under the
ablation condition ``--rules detailed`` the first turn also carries the task's
detailed rules (:func:`rules_text`).

The legal actions are always listed on one line that starts with
:data:`ACTIONS_PREFIX`; the baseline server reads that line to know what it
may answer, the way a model reads it.
"""

from __future__ import annotations

import re

from vical.agent.parse import EMPTY, EMPTY_NAME, ILLEGAL, NOT_ALONE, NOT_FIRST_LINE, ParsedReply
from vical.spec import TaskSpec

ACTIONS_PREFIX = "Legal actions: "
_ACTIONS_LINE_RE = re.compile(r"^" + re.escape(ACTIONS_PREFIX) + r"(.+)$", re.MULTILINE)


def actions_line(action_names: list[str]) -> str:
    return ACTIONS_PREFIX + ", ".join(action_names)


def find_actions_line(text: str) -> list[str] | None:
    """The action names listed on an ``ACTIONS_PREFIX`` line of ``text``, if any."""
    m = _ACTIONS_LINE_RE.search(text)
    if not m:
        return None
    return [a.strip() for a in m.group(1).split(",") if a.strip()]


RULES_LEVELS = ("basic", "detailed")


def rules_text(task: TaskSpec, rules: str = "basic") -> str:
    """The rules block of the first turn under one rules condition (paper Section 4.4).

    ``basic``: the task's basic rules, what the screen cannot show (the default,
    the benchmark's setting). ``detailed``: the same, then the task's detailed
    rules, which spell out the mechanics the demonstrations otherwise show
    (Table 5's "detailed rule" rows).
    """
    if rules not in RULES_LEVELS:
        raise ValueError(f"rules must be one of {', '.join(RULES_LEVELS)}, not {rules!r}")
    text = task.env.rules.basic.strip()
    if rules == "detailed":
        text += "\n\nHow the game works:\n" + task.env.rules.detailed.strip()
    return text


def task_intro(
    task: TaskSpec, action_names: list[str], max_steps: int, rules: str = "basic"
) -> str:
    """Opening block of the first turn: what game, its hidden rules, the budget, the actions."""
    return (
        f"Game: {task.env.name} (environment id: {task.env.paper_id}).\n"
        "You control this game one move per message and you only see its screen. "
        "Each time you answer, your move is applied and you receive the screen that follows.\n"
        "\n"
        "What the screen cannot show you:\n"
        f"{rules_text(task, rules)}\n"
        "\n"
        f"You have at most {max_steps} moves in this episode.\n"
        f"{actions_line(action_names)}"
    )


def demos_intro(n: int) -> str:
    clips = "one demonstration video" if n == 1 else f"{n} demonstration videos"
    return (
        f"To learn how the game works, study the {clips} below, recorded in this same game. "
        "Under every frame a caption names the action that led to it, and the last frame "
        "says how the recording ended."
    )


def demo_heading(i: int, n: int) -> str:
    """Label placed before demonstration ``i`` (1-based) of ``n``."""
    return f"Demonstration video {i} of {n}:"


def demo_frames_intro(i: int, n_frames: int) -> str:
    """Introduces a demonstration sent as still images to a backend that takes no video."""
    noun = "picture is the only frame" if n_frames == 1 else f"{n_frames} pictures are the frames"
    return (
        f"The next {noun} of video {i}, in playback order. "
        "Treat them as a single continuous recording, from the first picture to the last."
    )


def start_frame_text() -> str:
    return "Your episode starts from the screen below."


def answer_contract(action_names: list[str]) -> str:
    return (
        "How to answer: the first line of your reply must be [Action:<name>], with <name> "
        "written exactly as in the list of legal actions. Any explanation goes on the lines "
        "after it. You will not be told any score; judge your progress from the screen.\n"
        f"{actions_line(action_names)}"
    )


def next_turn_text(previous_action: str) -> str:
    return f"Your move {previous_action} has been applied. This is the screen now."


def imagination_intro(candidates: int, horizon: int) -> str:
    """Introduces a world model's imagined rollouts of the candidate moves (``vical wm couple``)."""
    moves = "one candidate move" if candidates == 1 else f"{candidates} candidate moves"
    times = "once" if horizon == 1 else f"{horizon} times in a row"
    return (
        f"A world model imagined the screens that would follow {moves} from the current "
        f"screen, each move played {times}. These pictures are its predictions, which may "
        "be wrong; only the real screen is certain."
    )


def imagined_heading(action: str, frames: int) -> str:
    """Label placed before the imagined screens of one candidate move."""
    noun = "screen" if frames == 1 else f"{frames} screens, in order"
    return f"Imagined if you play {action} ({noun}):"


def next_turn_reminder() -> str:
    return "Reply with [Action:<name>] on the first line."


_PROBLEMS = {
    EMPTY: "it was empty",
    NOT_FIRST_LINE: "the [Action:<name>] marker was not on the first line",
    NOT_ALONE: "the first line held more than the [Action:<name>] marker",
    EMPTY_NAME: "the marker did not contain an action name",
}


def retry_text(parsed: ParsedReply, action_names: list[str]) -> str:
    """The message sent after a reply that yielded no legal action."""
    if parsed.error == ILLEGAL:
        problem = f"{parsed.name!r} is not a legal action"
    else:
        problem = _PROBLEMS.get(parsed.error or "", "it had no [Action:<name>] marker")
    return (
        f"That reply could not be used: {problem}. "
        "Answer again for the same screen. Start with a line [Action:<name>] where <name> "
        "is copied exactly from this list.\n"
        f"{actions_line(action_names)}"
    )
