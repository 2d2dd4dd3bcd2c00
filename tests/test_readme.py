"""README.md's commands against the real command line, so the two cannot drift apart.

Every shell command in a fenced block of README.md that invokes ``vical`` (directly,
as ``.venv/bin/vical``, as ``python -m vical.cli``, behind ``VAR=value`` prefixes,
inside ``bash -c '...'``, or as the arguments of a ``docker run``/``podman run`` of
the vical image) gets one of two treatments, chosen by :func:`treatment`:

* **run**: executed through the typer app in a scratch workspace, restricted to a
  tiny task set (``TINY``) where the README command would run many tasks;
* **parse only**: for commands that need a container engine, the Hugging Face Hub,
  a remote model API or minutes of work. The command is parsed by the click command
  typer builds (``make_context``), so an unknown option, a missing required
  argument or a wrongly typed value fails with the README line in the message.

Both treatments also check every task selection (``--tasks`` globs, task id
arguments, ``--strip-task``, ``--env``) against the real task data, with the same
``_select`` the command line uses. Inline code in the prose is checked more
loosely (``vical ...`` mentions name real commands and options; glob examples and
Gymnasium ids exist). Nothing here lists the CLI's options: they are read from the
app at test time, so new flags need no change in this file.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest
import typer
import typer.main
from typer.testing import CliRunner

import vical.cli
from vical.spec import TaskSpecError, get_task, load_envs, select_tasks

README = Path(__file__).resolve().parents[1] / "README.md"

# The task set executed commands are restricted to: two quick tasks of different families.
TINY = ("taxi/state1", "cartpole/seed41")

# Values for <placeholder> words in README commands. A placeholder that is not here fails
# the test, so whoever writes a new one decides what a harmless stand-in is.
PLACEHOLDERS = {
    "id": "taxi/state1",  # a task id, as in `vical tasks show <id>`
    "task": "taxi/state1",
    "env": "taxi",  # an environment key
    "folder": "runs/readme",  # a run folder
    "run": "runs/readme",
    "key": "keys/team.key",  # a signing key file from `vical keygen`
}

# Treatment of each command path (the subcommand words after `vical`). A path in neither
# table fails test_every_readme_command_has_a_treatment: decide before documenting it.
RUN = {
    ("tasks", "list"): "reads the task files",
    ("tasks", "show"): "one task; the --png start frame is one reset",
    ("tasks", "sheet"): "one environment's start frames",
    ("tasks", "digest"): "hashes the task files",
    ("eval",): "random agent, or the local baseline server, on the tiny task set",
    ("baseline", "random"): "random agent on the tiny task set",
    ("report",): "reads run folders made earlier in the README",
    ("keygen",): "writes a key pair into the scratch home",
    ("submit",): "packs a tiny run (with --partial added, it covers two tasks)",
    ("verify",): "replays the tiny bundle's episodes",
    ("dataset", "verify"): "checks a folder's manifest",
    ("dataset", "stats"): "reads the task files",
    ("merge",): "merges the shard folders made just before it",
    ("view",): "exports the viewer of runs made earlier as static files (with --export)",
    ("audit", "run"): "audits a tiny run through the local baseline server's auditor",
    ("audit", "report"): "reads the audits made earlier in the README",
    ("audit", "sample"): "draws the blind sample from runs audited earlier",
    ("wm", "build"): "one scenario, one context: five world-model cases",
    ("wm", "eval"): "the baseline server's world model on the cases built just before",
    ("wm", "report"): "reads world-model runs made earlier in the README",
    ("wm", "verify"): "re-scores a world-model run made earlier in the README",
}
PARSE_ONLY = {
    ("serve-baseline",): "serves until interrupted",
    ("import-inspect",): "needs an Inspect log; tests/test_inspect_eval.py runs it",
    ("dataset", "build"): "renders every demonstration clip (minutes)",
    ("dataset", "push"): "uploads to the Hugging Face Hub",
    ("demos", "make"): "re-runs the expert tools and rewrites task files",
    ("demos", "pack"): "rewrites task files",
    ("demos", "render"): "renders a demonstration package",
    ("tasks", "make-init"): "re-runs a human-init generator",
    ("doctor",): "replays every environment (half a minute); tests/test_doctor.py runs it",
    ("leaderboard", "add"): "needs a bundle of a full run",
    ("leaderboard", "build"): "needs verified submissions",
    ("play",): "serves the play page until interrupted",
    ("audit", "label"): "serves the labelling page until interrupted",
    ("audit", "agreement"): "needs a person's labels",
    ("wm", "couple"): "plays 20 tasks three times through a baseline server (minutes)",
    ("wm", "couple-table"): "reads the coupled runs of the command before it",
    ("hub", "serve"): "serves until interrupted; tests/test_hub_e2e.py runs it",
    ("hub", "worker"): "works until interrupted; tests/test_hub_e2e.py runs it",
}
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}

# `docker run` / `podman run` options that take a value (everything else is a flag).
_CONTAINER_VALUE_OPTS = {
    "-v", "--volume", "-e", "--env", "--env-file", "-p", "--publish", "-w", "--workdir",
    "--name", "-u", "--user", "--network", "--net", "--entrypoint", "--mount", "--platform",
    "-h", "--hostname", "--add-host", "--device", "--gpus", "--ipc", "-m", "--memory",
    "--cpus", "--shm-size", "-l", "--label", "--security-opt", "--cap-add", "--cap-drop",
    "--userns", "--pull", "--tmpfs", "--ulimit", "--log-driver", "--cidfile",
}  # fmt: skip
_SHELLS = {"bash", "sh", "zsh", "dash"}
_WRAPPERS = {"env", "time", "exec", "command", "nohup"}
_OPERATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"}
_REDIRECTS = {">", ">>", "<", "<<", ">&", "&>", "<<<"}
_NON_SHELL_FENCES = {"python", "py", "pycon", "json", "yaml", "yml", "toml", "diff", "text"}
_PLACEHOLDER_RE = re.compile(r"<([A-Za-z][\w.-]*)>")
_ASSIGN_RE = re.compile(r"^[A-Za-z_]\w*=")
_VAR_RE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_PYTHON_RE = re.compile(r"^python(\d+(\.\d+)*)?$")


# ---------------------------------------------------------------------------
# extraction
# ---------------------------------------------------------------------------
@dataclass
class Command:
    """One `vical` invocation found in a fenced block."""

    lineno: int  # README line the command starts on
    text: str  # the logical shell line (continuations joined)
    argv: list[str]  # the words after `vical`, unresolved
    env: dict[str, str] = field(default_factory=dict)  # VAR=value prefixes
    via: str = "vical"  # vical | python -m MODULE | docker | podman
    block: int = 0  # index of the fenced block

    @property
    def container(self) -> bool:
        return self.via in ("docker", "podman")

    def __str__(self) -> str:
        return f"README.md:{self.lineno}: {self.text.strip()}"


def fenced_blocks(text: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """(language, [(line number, line)]) for every fenced code block."""
    blocks, current, fence, lang = [], None, "", ""
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if current is None:
            m = re.match(r"(`{3,}|~{3,})\s*([\w+.-]*)", stripped)
            if m:
                fence, lang, current = m.group(1), m.group(2).lower(), []
        elif stripped.startswith(fence) and stripped.strip(fence[0]) == "":
            blocks.append((lang, current))
            current = None
        else:
            current.append((n, line))
    return blocks


def logical_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join backslash continuations; with `$ ` prompts, keep only the prompted lines."""
    prompted = any(line.lstrip().startswith("$ ") for _, line in lines)
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for n, line in lines:
        if pending is not None:
            start, acc = pending
            acc = acc[:-1] + " " + line.strip()
        elif prompted:
            if not line.lstrip().startswith("$ "):
                continue  # program output
            start, acc = n, line.lstrip()[2:].rstrip()
        else:
            start, acc = n, line.rstrip()
        acc = acc.rstrip()
        if acc.endswith("\\"):
            pending = (start, acc)
        else:
            pending = None
            out.append((start, acc))
    if pending is not None:
        out.append((pending[0], pending[1][:-1]))
    return out


def shell_words(line: str) -> list[str]:
    """Shell words and operators of one line, comments dropped; <placeholders> kept whole."""
    protected = _PLACEHOLDER_RE.sub(lambda m: f"\0{m.group(1)}\0", line)
    lex = shlex.shlex(protected, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    return [w.replace("\0", "<", 1).replace("\0", ">", 1) if "\0" in w else w for w in lex]


def _segments(words: list[str]) -> list[list[str]]:
    segs, cur = [], []
    for w in words:
        if w in _OPERATORS:
            segs.append(cur)
            cur = []
        else:
            cur.append(w)
    segs.append(cur)
    out = []
    for seg in segs:  # drop redirections and their targets
        clean, skip = [], False
        for w in seg:
            if skip:
                skip = False
            elif w in _REDIRECTS:
                skip = True
            else:
                clean.append(w)
        if clean:
            out.append(clean)
    return out


def _mentions_vical(words: list[str]) -> bool:
    return any(w == "vical" or w.endswith("/vical") or w.startswith("vical.cli") for w in words)


def commands_in(line: str, lineno: int, block: int) -> tuple[list[Command], list[str]]:
    """The vical invocations in one logical shell line, and segments that name vical in a
    form this extractor does not understand (the test fails on those)."""
    found, unknown = [], []
    for seg in _segments(shell_words(line)):
        env: dict[str, str] = {}
        while seg and (_ASSIGN_RE.match(seg[0]) or seg[0] in _WRAPPERS):
            if _ASSIGN_RE.match(seg[0]):
                k, v = seg[0].split("=", 1)
                env[k] = v
            seg = seg[1:]
        if not seg:
            continue
        head = os.path.basename(seg[0])
        if head == "vical":
            found.append(Command(lineno, line, seg[1:], env, "vical", block))
        elif _PYTHON_RE.match(head) and len(seg) > 2 and seg[1] == "-m":
            if seg[2].split(".")[0] == "vical":
                found.append(Command(lineno, line, seg[3:], env, f"python -m {seg[2]}", block))
        elif head in _SHELLS and len(seg) > 2 and seg[1].startswith("-") and "c" in seg[1]:
            inner, bad = commands_in(seg[2], lineno, block)
            for c in inner:
                c.text, c.env = line, {**env, **c.env}
            found += inner
            unknown += bad
        elif head in ("docker", "podman") and len(seg) > 1 and seg[1] == "run":
            rest = seg[2:]
            while rest and rest[0].startswith("-"):
                takes_value = rest[0] in _CONTAINER_VALUE_OPTS and "=" not in rest[0]
                rest = rest[2:] if takes_value else rest[1:]
            image = rest[0] if rest else ""
            name = re.split(r"[:@]", image.rsplit("/", 1)[-1])[0]
            if name == "vical":
                args = rest[1:]
                if args and os.path.basename(args[0]) == "vical":
                    args = args[1:]
                found.append(Command(lineno, line, args, env, head, block))
            elif _mentions_vical(rest):
                unknown.append(" ".join(seg))
        elif head in ("docker", "podman") and len(seg) > 1 and seg[1] == "build":
            continue  # `-t vical` names the image being built
        elif head == "inspect":
            continue  # Inspect AI's own CLI (`vical/vical` is a task name there); run by
            # tests/test_inspect_eval.py
        elif head == "inspect":
            continue  # Inspect AI's own CLI (`vical/vical` is a task name there): run by
            # tests/test_inspect_eval.py
        elif _mentions_vical(seg):
            unknown.append(" ".join(seg))
    return found, unknown


def extract(text: str) -> tuple[list[Command], list[str]]:
    commands, unknown = [], []
    for i, (lang, lines) in enumerate(fenced_blocks(text)):
        if lang in _NON_SHELL_FENCES:
            continue
        for lineno, line in logical_lines(lines):
            found, bad = commands_in(line, lineno, i)
            commands += found
            unknown += [f"README.md:{lineno}: {b}" for b in bad]
    return commands, unknown


def prose_spans(text: str) -> list[tuple[int, str, str]]:
    """(line number, inline code, its paragraph) for the text outside fenced blocks."""
    fenced = {n for _, lines in fenced_blocks(text) for n, _ in lines}
    lines = text.splitlines()
    spans, para, start = [], [], 0

    def flush() -> None:
        joined = "\n".join(para)
        for m in re.finditer(r"(`+)(.+?)\1", joined, re.S):
            n = start + joined.count("\n", 0, m.start())
            spans.append((n, " ".join(m.group(2).split()), joined))

    for n, line in enumerate(lines, 1):
        if n in fenced or line.strip().startswith(("```", "~~~")) or not line.strip():
            if para:
                flush()
            para = []
            continue
        if not para:
            start = n
        para.append(line)
    if para:
        flush()
    return spans


README_TEXT = README.read_text(encoding="utf-8")
COMMANDS, UNRECOGNISED = extract(README_TEXT)
SPANS = prose_spans(README_TEXT)
INLINE = [(n, s) for n, s, _ in SPANS if s.startswith("vical ")]


def _ids(items) -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for c in items:
        n, words = (c.lineno, c.argv) if isinstance(c, Command) else (c[0], c[1].split()[1:])
        base = f"L{n}-" + "-".join(w for w in words[:2] if not w.startswith("-"))
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return ids


# ---------------------------------------------------------------------------
# resolving, parsing and checking
# ---------------------------------------------------------------------------
def resolve(cmd: Command, home: Path, work: Path, variables: dict[str, str]) -> list[str]:
    """The argv with placeholders, ~ and $VARIABLES replaced. Unknown variables stay as
    opaque text (for an option value that is all a parse needs)."""
    known = {"HOME": str(home), "PWD": str(work), **variables}
    out = []
    for w in cmd.argv:
        missing = [p for p in _PLACEHOLDER_RE.findall(w) if p not in PLACEHOLDERS]
        assert not missing, (
            f"{cmd}\nplaceholder(s) {', '.join(f'<{p}>' for p in missing)} have no stand-in; "
            "add one to PLACEHOLDERS in tests/test_readme.py"
        )
        w = _PLACEHOLDER_RE.sub(lambda m: PLACEHOLDERS[m.group(1)], w)
        if w == "~" or w.startswith("~/"):
            w = str(home) + w[1:]
        w = _VAR_RE.sub(lambda m: known.get(m.group(1) or m.group(2), m.group(0)), w)
        out.append(w)
    return out


def _message(e: BaseException) -> str:
    fmt = getattr(e, "format_message", None)
    return fmt() if callable(fmt) else f"{type(e).__name__}: {e}"


def _unparsed(ctx) -> list[str]:
    """What a group left for its subcommand (click keeps the first word apart)."""
    first = getattr(ctx, "_protected_args", None)
    if first is None:
        first = getattr(ctx, "protected_args", None)
    return [*(first or []), *ctx.args]


def parse(argv: list[str], where: str):
    """(command path, leaf command, leaf context) as click parses `vical ARGV`."""
    root = typer.main.get_command(vical.cli.app)
    try:
        ctx = root.make_context("vical", list(argv))
        cmd, path = root, []
        while hasattr(cmd, "commands"):
            name, cmd, args = cmd.resolve_command(ctx, _unparsed(ctx))
            path.append(name)
            ctx = cmd.make_context(name, list(args), parent=ctx)
    except typer.Exit as e:
        if getattr(e, "exit_code", 0) == 0:  # an eager option such as --version
            return (), None, None
        pytest.fail(f"{where}\ndoes not parse: exit {e.exit_code}")
    except Exception as e:  # click's UsageError and BadParameter, typer's NoArgsIsHelp
        pytest.fail(f"{where}\ndoes not parse: {_message(e)}")
    return tuple(path), cmd, ctx


def _check_globs(value: str, where: str) -> None:
    for glob in (g.strip() for g in value.split(",")):
        if not glob:
            continue
        try:
            vical.cli._select(glob)  # what the command line does with --tasks
        except typer.Exit:
            pytest.fail(f"{where}\ntask glob {glob!r} matches no task")


def _check_task_id(value: str, where: str) -> None:
    try:
        get_task(value)
    except TaskSpecError as e:
        pytest.fail(f"{where}\n{e}")


def _check_env(value, where: str) -> None:
    envs = load_envs()
    for v in [value] if isinstance(value, str) else value:
        assert v in envs, f"{where}\nno environment {v!r}; known: {', '.join(envs)}"


def check_selection(param, value, where: str) -> None:
    """Task globs, task ids and environment keys must name real ones."""
    if value is None or value == () or value == []:
        return
    opts = set(getattr(param, "opts", ())) | set(getattr(param, "secondary_opts", ()))
    if "--tasks" in opts:
        _check_globs(value, where)
    elif "--strip-task" in opts or param.name == "task_id":
        _check_task_id(value, where)
    elif "--env" in opts:
        _check_env(value, where)


def check_context(cmd, ctx, where: str) -> None:
    from_line = {p.name for p in cmd.params if _source_is_commandline(ctx, p.name)}
    for p in cmd.params:
        if p.name in from_line:
            check_selection(p, ctx.params.get(p.name), where)


def _source_is_commandline(ctx, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def treatment(path: tuple[str, ...], cmd: Command, params: dict) -> tuple[str, str]:
    """("run" | "parse", why) for one README command."""
    if cmd.container:
        return "parse", f"runs inside the vical image ({cmd.via})"
    if path == ("submit",) and params.get("endpoint"):
        return "parse", "evaluates in the pinned image (Docker/Podman) with the Hub dataset"
    if path == ("submit",) and params.get("to"):
        return "parse", "uploads to a running hub; tests/test_hub_e2e.py runs it"
    if path == ("eval",) and params.get("agent", "random") != "random":
        host = urlparse(params.get("endpoint") or "").hostname
        if host not in LOCAL_HOSTS:
            return "parse", "needs a remote model API and its key"
    if path == ("audit", "run") and not params.get("report"):
        host = urlparse(params.get("endpoint") or "").hostname
        if host not in LOCAL_HOSTS:
            return "parse", "needs a remote auditor model API and its key"
    if path == ("wm", "eval") and params.get("wm") == "http":
        host = urlparse(params.get("endpoint") or "").hostname
        if host not in LOCAL_HOSTS:
            return "parse", "needs a remote world model"
    if path == ("view",) and not params.get("export"):
        return "parse", "serves the viewer until interrupted"
    if path in RUN:
        return "run", RUN[path]
    if path in PARSE_ONLY:
        return "parse", PARSE_ONLY[path]
    raise AssertionError(
        f"{cmd}\n`vical {' '.join(path)}` has no treatment: add it to RUN or PARSE_ONLY "
        "in tests/test_readme.py with a reason"
    )


def block_variables(block: int) -> dict[str, str]:
    """Shell variables assigned by a plain `NAME=value` line earlier in the same block."""
    lines = fenced_blocks(README_TEXT)[block][1]
    found = {}
    for _, line in logical_lines(lines):
        for seg in _segments(shell_words(line)):
            if seg and seg[0] == "export":
                seg = seg[1:]
            if seg and all(_ASSIGN_RE.match(w) for w in seg):
                found.update(w.split("=", 1) for w in seg)
    return found


# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------
def test_extractor_understands_shell_forms():
    text = "\n".join(
        [
            "Intro `vical tasks show <id>`.",
            "```console",
            "$ vical tasks list --tasks 'taxi/*' \\",
            "    --json   # trailing comment",
            "taxi/state1 ...",
            "$ VICAL_X=1 .venv/bin/vical tasks digest && echo done",
            "$ bash -c 'vical eval --out \"$OUT\"'",
            '$ docker run --rm -v "$PWD/o:/o" -e K=v localhost/vical:1.0 eval --out /o/r',
            "$ podman run -it vical vical report /o/r",
            "$ python3.11 -m vical.cli keygen --out k > log.txt",
            "$ docker build -t vical .",
            "$ python -m pytest -n 2",
            "$ uv run vical tasks list",
            "```",
            "```python",
            "import vical  # not shell",
            "```",
        ]
    )
    cmds, unknown = extract(text)
    got = [(c.lineno, c.via, c.argv, c.env) for c in cmds]
    assert got == [
        (3, "vical", ["tasks", "list", "--tasks", "taxi/*", "--json"], {}),
        (6, "vical", ["tasks", "digest"], {"VICAL_X": "1"}),
        (7, "vical", ["eval", "--out", "$OUT"], {}),
        (8, "docker", ["eval", "--out", "/o/r"], {}),
        (9, "podman", ["report", "/o/r"], {}),
        (10, "python -m vical.cli", ["keygen", "--out", "k"], {}),
    ]
    assert unknown == ["README.md:13: uv run vical tasks list"]
    assert [s for _, s, _ in prose_spans(text)] == ["vical tasks show <id>"]


def test_readme_commands_are_all_understood():
    assert COMMANDS, "no `vical` command found in README.md's fenced blocks"
    assert not UNRECOGNISED, (
        "fenced README lines name vical in a form this test cannot extract (teach "
        "commands_in() about it):\n" + "\n".join(UNRECOGNISED)
    )
    for c in COMMANDS:
        if c.via.startswith("python -m "):
            module = c.via.split()[-1]
            spec = importlib.util.find_spec(module)
            if spec is not None and spec.submodule_search_locations is not None:
                spec = importlib.util.find_spec(module + ".__main__")
            assert spec is not None, f"{c}\n`python -m {module}` has nothing to run"


@pytest.mark.parametrize("cmd", COMMANDS, ids=_ids(COMMANDS))
def test_readme_command_parses_and_selects_real_tasks(cmd, tmp_path):
    argv = resolve(cmd, tmp_path / "home", tmp_path, block_variables(cmd.block))
    path, leaf, ctx = parse(argv, str(cmd))
    if leaf is not None:
        check_context(leaf, ctx, str(cmd))
        kind, why = treatment(path, cmd, ctx.params)
        assert kind in ("run", "parse") and why


def test_every_readme_command_has_a_treatment(tmp_path):
    table = []
    for c in COMMANDS:
        argv = resolve(c, tmp_path / "home", tmp_path, block_variables(c.block))
        path, _, ctx = parse(argv, str(c))
        kind, why = treatment(path, c, ctx.params if ctx else {})
        table.append((kind, c))
        print(f"{kind:5}  {c}  ({why})")  # shown with pytest -rP
    assert {k for k, _ in table} <= {"run", "parse"}
    assert len(table) == len(COMMANDS)
    assert any(k == "run" for k, _ in table), "no README command is executed"


@pytest.mark.parametrize("lineno, text", INLINE, ids=_ids(INLINE))
def test_readme_inline_command_mentions(lineno, text):
    """`vical ...` in the prose may be a fragment (`vical submit --endpoint`), so it is
    not parsed whole: its subcommands and options must exist and task values be real."""
    where = f"README.md:{lineno}: `{text}`"
    words = [
        PLACEHOLDERS.get(w[1:-1], w) if _PLACEHOLDER_RE.fullmatch(w) else w
        for w in text.split()[1:]
    ]
    assert not [w for w in words if _PLACEHOLDER_RE.fullmatch(w)], f"{where}\nunknown placeholder"
    cmd = typer.main.get_command(vical.cli.app)
    while words and hasattr(cmd, "commands") and not words[0].startswith("-"):
        assert words[0] in cmd.commands, f"{where}\nno command {words[0]!r}"
        cmd, words = cmd.commands[words[0]], words[1:]
    by_opt = {o: p for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", ()))}
    arguments = [p for p in cmd.params if p.param_type_name == "argument"]
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("-"):
            name, _, inline_value = w.partition("=")
            assert name in by_opt or name == "--help", f"{where}\nno option {name}"
            p = by_opt.get(name)
            takes_value = p is not None and not getattr(p, "is_flag", False)
            if takes_value and not inline_value and i + 1 < len(words):
                i += 1
                inline_value = words[i]
            if p is not None and inline_value:
                check_selection(p, inline_value, where)
        else:
            assert arguments, f"{where}\n{w!r}: `{cmd.name}` takes no arguments"
            check_selection(arguments.pop(0), w, where)
        i += 1


# Inspect AI's model providers: `openai/gpt-4o` in the prose names a model, not a task
_MODEL_PROVIDERS = {
    "openai",
    "openai-api",
    "google",
    "anthropic",
    "mistral",
    "vllm",
    "ollama",
    "hf",
}


# Inspect AI's model providers: `openai/gpt-4o` in the prose names a model, not a task
_MODEL_PROVIDERS = {"openai", "openai-api", "google", "anthropic", "mistral", "vllm", "ollama"}


def test_readme_inline_task_examples():
    """Globs shown next to `--tasks`, task-like paths and Gymnasium ids name real tasks."""
    import gymnasium

    import vical.gym  # noqa: F401  (registers the ids)

    top = {p.name for p in README.parent.iterdir()}
    checked = []
    for n, span, para in SPANS:
        where = f"README.md:{n}: `{span}`"
        m = re.fullmatch(r'gymnasium\.make\(["\']([^"\']+)["\']\)', span)
        if m:
            assert m.group(1) in gymnasium.registry, f"{where}\nnot a registered environment"
            checked.append(span)
            continue
        if not re.fullmatch(r"[a-z0-9_*?\[][a-z0-9_*?\[\]-]*(/[a-z0-9_*?\[\]-]+)?", span):
            continue
        if span.split("/")[0] in _MODEL_PROVIDERS:
            continue  # an Inspect model name (provider/model), not a task
        if span.split("/")[0] in _MODEL_PROVIDERS:
            continue  # an Inspect model name (provider/model), not a task
        beside_tasks = "`--tasks`" in para and "glob" in para
        if beside_tasks or ("/" in span and span.split("/")[0] not in top):
            _check_globs(span, where)
            checked.append(span)
    assert checked, "expected task examples in README.md's prose"


def _tiny(pattern: str | None) -> str:
    if not pattern:
        return ",".join(TINY)
    chosen = [t.id for t in select_tasks(pattern)]
    return ",".join([t for t in TINY if t in chosen] or chosen[:1])


def test_readme_commands_run(tmp_path, monkeypatch):
    """Execute the runnable README commands in order in one workspace (later commands use
    the runs earlier ones made), restricted to TINY; models come from the baseline server."""
    from vical.serve import BaselineServer

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    runner = CliRunner()
    executed, parse_only = [], []
    with BaselineServer() as server:
        for c in COMMANDS:
            argv = resolve(c, home, work, block_variables(c.block))
            path, leaf, ctx = parse(argv, str(c))
            kind, why = treatment(path, c, ctx.params if ctx else {})
            if kind == "parse":
                parse_only.append(c)
                continue
            params, extra, env = ctx.params, [], dict(c.env)
            if path in (("eval",), ("baseline", "random")):
                extra += ["--tasks", _tiny(params.get("tasks"))]  # the last --tasks wins
            if path == ("eval",) and params.get("agent", "random") != "random":
                url = server.url if params["agent"] == "gemini" else server.openai_base_url
                extra += ["--endpoint", url]
            if path == ("audit", "run") and params.get("endpoint"):
                url = server.url if params.get("backend") == "gemini" else server.openai_base_url
                extra += ["--endpoint", url]  # the baseline server answers audit requests
            if path == ("wm", "build"):  # the last option wins: one scenario, one context
                extra += ["--scenarios", "grid-navigation", "--contexts", "1"]
            if path == ("wm", "eval") and params.get("wm") == "http":
                extra += ["--endpoint", server.url]  # the baseline server's world model
            if path in (("eval",), ("audit", "run")) and params.get("api_key_env"):
                env[params["api_key_env"]] = "readme-test-key"
            if path == ("submit",):
                extra += ["--partial"]
            absolute = [w for w in argv if w.startswith("/") and not w.startswith(str(tmp_path))]
            assert not absolute, f"{c}\nwould write outside the workspace: {absolute}"
            r = runner.invoke(vical.cli.app, argv + extra, env=env)
            detail = f"{c}\nran: vical {shlex.join(argv + extra)}\nexit {r.exit_code}\n{r.output}"
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                import traceback

                detail += "".join(traceback.format_exception(r.exception))
            assert r.exit_code == 0, detail
            for p in leaf.params:  # the files it was told to write exist
                if p.name in ("out", "png") and _source_is_commandline(ctx, p.name):
                    assert Path(params[p.name]).exists(), f"{detail}\nno {params[p.name]}"
            executed.append(c)
    assert len(executed) + len(parse_only) == len(COMMANDS)
    assert executed, "no README command was executed"
