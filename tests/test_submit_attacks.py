"""Verification, second pass: each attack of the issue on a bundle re-signed with the
submitter's own key is refused with a one-line reason, or (for labels verification
cannot prove) shown as stated and escaped; the leaderboard ranks one run per task of
complete bundles only, and never falls over."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_submit import repack, unpack
from vical.run import RunOptions, run_eval
from vical.serve import BaselineServer
from vical.spec import select_tasks
from vical.submit import leaderboard
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.verify import VerifyError, verify_bundle

TASKS = "taxi/state1,cliffwalking/base"


def _model_run(out: Path, demos: bool = True, rules: str = "basic", tasks: str = TASKS) -> None:
    with BaselineServer() as srv:
        run_eval(
            select_tasks(tasks),
            out,
            agent="openai-chat",
            agent_kwargs={"endpoint": srv.openai_base_url, "model": "baseline"},
            options=RunOptions(workers=1, progress=False, demos=demos, rules=rules),
        )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("attacks")
    priv, pub = keygen(d / "team")
    _model_run(d / "demos")
    _model_run(d / "nodemos", demos=False)
    for name in ("demos", "nodemos"):
        make_bundle(d / name, priv, d / f"{name}.tar.gz", team="Team A", partial=True)
    return d, priv, pub


def _verify(bundle: Path, pub: Path):
    return verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False)


def _tampered(runs, tmp_path: Path, which: str, edit) -> Path:
    """The bundle ``which``, edited by ``edit(root)`` and re-signed by the team's key."""
    d, priv, _ = runs
    root = unpack(d / f"{which}.tar.gz", tmp_path / "u")
    edit(root)
    return repack(root, tmp_path / "t.tar.gz", rehash=True, resign_key=priv)


def _refused(bundle: Path, pub: Path, reason: str) -> str:
    with pytest.raises(VerifyError) as e:
        _verify(bundle, pub)
    msg = str(e.value)
    assert "\n" not in msg and reason in msg, msg
    return msg


def _logs(root: Path) -> list[Path]:
    return sorted((root / "run" / "episodes").glob("*/log.jsonl"))


def _edit_log(log: Path, edit) -> None:
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    recs = edit(recs)
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _set_condition(root: Path, **cond) -> None:
    run = root / "run" / "manifest.json"
    m = json.loads(run.read_text())
    m.update(cond)
    run.write_text(json.dumps(m, indent=2))
    bm = json.loads((root / "manifest.json").read_text())
    bm["condition"].update(cond)
    (root / "manifest.json").write_text(json.dumps(bm, indent=2, sort_keys=True) + "\n")


def test_honest_model_bundles_pass(runs):
    d, _, pub = runs
    for name in ("demos", "nodemos"):
        assert _verify(d / f"{name}.tar.gz", pub).ok, name


# -- relabelled condition --------------------------------------------------------------
def test_no_demos_run_relabelled_demos_is_refused(runs, tmp_path):
    bundle = _tampered(runs, tmp_path, "nodemos", lambda r: _set_condition(r, demos=True))
    _refused(bundle, runs[2], "demonstration(s), the run's condition (demos on)")


def test_demos_run_relabelled_no_demos_is_refused(runs, tmp_path):
    def edit(root):
        _set_condition(root, demos=False)
        for log in _logs(root):
            _edit_log(
                log,
                lambda recs: [
                    {**r, "demos": []} if r["type"] == "agent_session" else r for r in recs
                ],
            )

    _refused(_tampered(runs, tmp_path, "demos", edit), runs[2], "declared condition")


def test_basic_rules_relabelled_detailed_is_refused(runs, tmp_path):
    def edit(root):
        _set_condition(root, rules="detailed")
        for log in _logs(root):
            _edit_log(
                log,
                lambda recs: [
                    {**r, "rules": "detailed"} if r["type"] == "agent_session" else r for r in recs
                ],
            )

    _refused(
        _tampered(runs, tmp_path, "demos", edit), runs[2], "declared condition (detailed rules"
    )


# -- every record required --------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("agent_session", "missing agent_session record"),
        ("request", "missing request record"),
        ("response", "missing response record"),
        ("decision", "missing decision record"),
        ("step", "missing step record"),
        ("end", "missing end record"),
        ("start", "missing start record"),
    ],
)
def test_a_log_missing_a_record_is_refused(runs, tmp_path, kind, reason):
    def edit(root):
        for log in _logs(root):
            _edit_log(log, lambda recs: [r for r in recs if r["type"] != kind])

    msg = _refused(_tampered(runs, tmp_path, "demos", edit), runs[2], reason)
    assert "run/episodes/" in msg  # the episode is named


def test_sessions_deleted_and_settings_of_another_model_are_refused(runs, tmp_path):
    def edit(root):
        for log in _logs(root):
            _edit_log(
                log,
                lambda recs: [
                    {**r, "settings": {**r["settings"], "model": "other"}}
                    if r["type"] == "agent_session"
                    else r
                    for r in recs
                ],
            )

    _refused(_tampered(runs, tmp_path, "demos", edit), runs[2], "agent settings differ")


def test_duplicated_or_reordered_records_are_refused(runs, tmp_path):
    def dup(root):
        log = _logs(root)[0]
        _edit_log(log, lambda recs: [*recs[:3], recs[2], *recs[3:]])

    _refused(_tampered(runs, tmp_path / "a", "demos", dup), runs[2], "log.jsonl: ")

    def swap(root):
        log = _logs(root)[0]
        _edit_log(log, lambda recs: [recs[0], recs[2], recs[1], *recs[3:]])

    _refused(_tampered(runs, tmp_path / "b", "demos", swap), runs[2], "log.jsonl: ")


def test_a_forged_reply_must_carry_its_parse_and_request_digest(runs, tmp_path):
    def edit(root):
        log = _logs(root)[0]

        def change(recs):
            for r in recs:
                if r["type"] == "response":
                    r["text"] = r["text"] + " (edited)"
                    break
            return recs

        _edit_log(log, change)

    _refused(_tampered(runs, tmp_path, "demos", edit), runs[2], "log.jsonl: line")


# -- tracebacks that were --------------------------------------------------------------
def test_deeply_nested_log_line_is_a_verdict(runs, tmp_path):
    def edit(root):
        with open(_logs(root)[0], "a") as f:
            f.write("[" * 400_000 + "]" * 400_000 + "\n")

    _refused(_tampered(runs, tmp_path, "demos", edit), runs[2], "nests deeper than")


def test_append_as_an_object_is_a_verdict(runs, tmp_path):
    def edit(root):
        def change(recs):
            r = next(r for r in recs if r["type"] == "request")
            r["append"] = {"a": 1}
            return recs

        _edit_log(_logs(root)[0], change)

    _refused(_tampered(runs, tmp_path, "demos", edit), runs[2], "request")


# -- labels verify cannot prove: strict schema, shown as stated ---------------------------
def _submitter(root: Path, **fields) -> None:
    bm = json.loads((root / "manifest.json").read_text())
    bm["submitter"].update(fields)
    (root / "manifest.json").write_text(json.dumps(bm, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"date": 12345}, "'submitter.date' is not a string"),
        ({"date": "yesterday"}, "'submitter.date' is not an ISO 8601 date"),
        ({"team": "T" * 300}, "'submitter.team' is longer than 80 characters"),
        ({"model": "a\u202eb"}, "'submitter.model' contains character U+202E"),
        ({"team": "a\nb"}, "'submitter.team' contains character U+000A"),
        ({"homepage": "x"}, "unknown field 'submitter.homepage'"),
    ],
)
def test_submitter_labels_pass_a_strict_schema(runs, tmp_path, fields, reason):
    bundle = _tampered(runs, tmp_path, "demos", lambda r: _submitter(r, **fields))
    _refused(bundle, runs[2], reason)


def test_labels_are_shown_as_stated_and_escaped(runs, tmp_path):
    name = "<img src=x onerror=alert(1)> | *bold* [l](u)"
    bundle = _tampered(
        runs, tmp_path, "demos", lambda r: _submitter(r, team=name, description="<b>hi</b>")
    )
    subs = tmp_path / "subs"
    leaderboard.add(bundle, pubkeys=[runs[2]], submissions=subs, workers=1, progress=False)
    index = leaderboard.build(tmp_path / "site", subs)
    page = index.read_text()
    assert "<img" not in page and "&lt;img src=x" in page
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    assert "<img" not in md and "\\|" in md and "\\*bold\\*" in md
    for report in (tmp_path / "site" / "reports").glob("*.html"):
        assert "<b>hi" not in report.read_text()


def test_build_leaves_out_a_broken_entry_with_a_reason(runs, tmp_path):
    subs = tmp_path / "subs"
    good = leaderboard.add(
        runs[0] / "demos.tar.gz", pubkeys=[runs[2]], submissions=subs, workers=1, progress=False
    )
    entry = json.loads(good.read_text())
    entry["date"] = 12345
    (subs / "broken.json").write_text(json.dumps(entry))
    (subs / "junk.json").write_text("[1, 2")
    skipped: list[str] = []
    index = leaderboard.build(tmp_path / "site", subs, skipped)
    assert index.is_file() and len(skipped) == 2
    assert all("\n" not in s for s in skipped)


# -- what is ranked -------------------------------------------------------------------
def test_episodes_copied_as_a_second_run_do_not_change_the_ranked_cells(runs, tmp_path):
    d, _, pub = runs

    def edit(root):
        eps = root / "run" / "episodes"
        for src in sorted(eps.iterdir()):
            dst = eps / src.name.replace("__r0", "__r1")
            shutil.copytree(src, dst)
            p = dst / "eval_result.json"
            r = json.loads(p.read_text())
            r["run_index"] = 1
            p.write_text(json.dumps(r))
        m = json.loads((root / "run" / "manifest.json").read_text())
        m["runs_per_task"] = 2
        (root / "run" / "manifest.json").write_text(json.dumps(m))

    bundle = _tampered(runs, tmp_path, "demos", edit)
    subs = tmp_path / "subs"
    one = json.loads(
        leaderboard.add(
            d / "demos.tar.gz", pubkeys=[pub], submissions=subs, workers=1, progress=False
        ).read_text()
    )
    two = json.loads(
        leaderboard.add(
            bundle, pubkeys=[pub], submissions=tmp_path / "s2", workers=1, progress=False
        ).read_text()
    )
    assert two["report"]["columns"] == one["report"]["columns"]  # run 0 only is ranked
    assert two["runs_per_task"] == 2 and two["further_runs"] is not None
    leaderboard.build(tmp_path / "site", tmp_path / "s2")
    assert "Further runs (not ranked)" in (tmp_path / "site" / "leaderboard.md").read_text()


def test_partial_bundles_are_listed_apart_never_ranked(runs, tmp_path):
    subs = tmp_path / "subs"
    leaderboard.add(runs[0] / "demos.tar.gz", pubkeys=[runs[2]], submissions=subs, workers=1,
                    progress=False)  # fmt: skip
    entries = leaderboard.load_entries(subs)
    assert entries and not any(leaderboard.is_ranked(e) for e in entries)
    leaderboard.build(tmp_path / "site", subs)
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    ranked, _, apart = md.partition("## Partial submissions (not ranked)")
    assert "Team A" in apart and "Team A" not in ranked


# -- bounded disk ---------------------------------------------------------------------
def test_a_member_declared_beyond_what_an_episode_can_produce_is_refused(runs, tmp_path):
    from fuzz_bundles import load_source
    from fuzz_bundles.generate import write_gz

    from vical.submit.keys import load_private

    d, priv, pub = runs
    src = load_source(d / "demos.tar.gz", load_private(priv))
    m = src.edited(lambda m: m["files"].update(
        {"run/episodes/taxi__state1__r0/log.jsonl": {"sha256": "0" * 64, "size": 2 * 1024**3}}
    ))  # fmt: skip
    mb = src.manifest_bytes(m)
    out = tmp_path / "big.tar.gz"
    write_gz(out, src.head(mb, src.sig_bytes(mb)) + src.body())
    msg = _refused(out, pub, "[manifest]")
    assert "refusing" in msg or "more than such a file can hold" in msg
    assert not any(tmp_path.glob("vical-verify-*"))


# -- demonstration content --------------------------------------------------------------
def test_demonstrations_altered_before_the_run_are_refused(tmp_path, monkeypatch):
    """A team that edits its rendered demonstrations (here: a hint painted over the
    first frame of taxi/state1's first clip in its demo cache) and then runs honestly
    gets logs, requests and media that agree with each other; verification renders the
    clip itself and refuses the media, in both transports' sense: frames edited."""
    import io

    from PIL import Image, ImageDraw

    from vical.demos import cache_dir, clip_key
    from vical.spec import get_task

    task = get_task("taxi/state1")
    clip = task.variant.demos[0]
    team_cache = tmp_path / "team-cache"
    monkeypatch.setenv("VICAL_CACHE", str(team_cache))
    priv, pub = keygen(tmp_path / "team")
    # the team renders its demos once, then paints over the first frame of the cache
    from vical.demos import load_demo_clip

    load_demo_clip(task, clip)
    key = clip_key(task, clip)
    first = cache_dir() / key[:2] / key / "frame_000.jpg"
    img = Image.open(io.BytesIO(first.read_bytes())).convert("RGB")
    ImageDraw.Draw(img).rectangle((0, 0, 40, 12), fill=(255, 0, 0))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    first.write_bytes(buf.getvalue())
    run = tmp_path / "run"
    _model_run(run, tasks="taxi/state1")
    make_bundle(run, priv, tmp_path / "b.tar.gz", team="Team A", partial=True)
    # the maintainer's machine renders the clip from the task data
    monkeypatch.setenv("VICAL_CACHE", str(tmp_path / "maintainer-cache"))
    _refused(tmp_path / "b.tar.gz", pub, "are not the rendering of clip")
    # the same steps without the edit pass (the check is not refusing every bundle)
    monkeypatch.setenv("VICAL_CACHE", str(tmp_path / "honest-cache"))
    honest = tmp_path / "honest"
    _model_run(honest, tasks="taxi/state1")
    make_bundle(honest, priv, tmp_path / "h.tar.gz", team="Team A", partial=True)
    monkeypatch.setenv("VICAL_CACHE", str(tmp_path / "maintainer-cache"))
    assert _verify(tmp_path / "h.tar.gz", pub).ok
