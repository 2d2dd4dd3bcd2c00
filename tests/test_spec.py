"""Task data against the paper's tables, and error messages for bad files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vical.spec import TASKS_DIR, TaskSpec, TaskSpecError, load_env_file, load_envs, select_tasks

LOADED = load_envs()
ENV_KEYS = sorted(LOADED)


def test_every_env_has_rules_and_tags():
    for spec in LOADED.values():
        assert spec.rules.basic and spec.rules.detailed
        assert spec.tags.types


def _write(tmp_path: Path, mutate) -> Path:
    src = Path(__file__).parents[1] / "vical" / "tasks" / "taxi.yaml"
    data = yaml.safe_load(src.read_text())
    mutate(data)
    p = tmp_path / "taxi.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_bad_task_field_names_file_task_and_field(tmp_path):
    def bad(d):
        d["tasks"][2]["seed"] = "not-a-number"

    p = _write(tmp_path, bad)
    with pytest.raises(TaskSpecError) as e:
        load_env_file(p)
    msg = str(e.value)
    assert str(p) in msg and "taxi/state3" in msg and "'seed'" in msg


def test_bad_env_field_names_file_and_field(tmp_path):
    p = _write(tmp_path, lambda d: d.__setitem__("frame_skip", 0))
    with pytest.raises(TaskSpecError) as e:
        load_env_file(p)
    assert str(p) in str(e.value) and "frame_skip" in str(e.value)


def test_bad_provenance_is_rejected(tmp_path):
    def bad(d):
        d["scoring"]["targets"] = {"x": {"value": 1, "provenance": "guess"}}

    with pytest.raises(TaskSpecError, match="provenance"):
        load_env_file(_write(tmp_path, bad))


def test_numeric_parameter_without_provenance_is_rejected(tmp_path):
    def bad(d):
        d["scoring"].pop("provenance", None)  # weights lose their provenance
        d["tasks"][3]["params"] = {"detour": 3, "strict": True}  # a bool is a switch, not a number

    p = _write(tmp_path, bad)
    with pytest.raises(TaskSpecError) as e:
        load_env_file(p)
    msg = str(e.value)
    assert str(p) in msg
    assert "scoring.params.weights has no provenance" in msg
    assert "taxi/state4: params.detour has no provenance" in msg
    assert "strict" not in msg
    assert '"paper: <table or section>"' in msg and '"calibrated: <how' in msg


def test_numeric_parameter_with_provenance_loads(tmp_path):
    def ok(d):
        d["tasks"][3]["params"] = {"detour": 3}
        d["tasks"][3]["provenance"] = {"detour": "calibrated: a test value"}

    spec = load_env_file(_write(tmp_path, ok))
    assert spec.tasks[3].missing_provenance() == []
    assert spec.scoring.missing_provenance() == [] and spec.pass_rule.missing_provenance() == []


def test_unknown_init_action_is_rejected(tmp_path):
    def bad(d):
        d["tasks"][1]["init_actions"] = ["Fly"]
        d["tasks"][1]["init_source"] = "generated: scripted test"

    with pytest.raises(TaskSpecError, match="Fly"):
        load_env_file(_write(tmp_path, bad))


def test_select_tasks_patterns():
    assert [t.id for t in select_tasks("taxi/state1")] == ["taxi/state1"]
    assert len(select_tasks("taxi")) == 5
    with pytest.raises(TaskSpecError, match="matches no task"):
        select_tasks("nope/*")


# -- task files against the installed simulators (vical.spec.checks) ---------------
TASKS = Path(__file__).parents[1] / "vical" / "tasks"


def _copy(tmp_path: Path, env: str, mutate=None) -> Path:
    """A copy of a real task file in tmp_path, changed by ``mutate`` (a dict edit)."""
    data = yaml.safe_load((TASKS / f"{env}.yaml").read_text())
    if mutate is not None:
        mutate(data)
    p = tmp_path / f"{env}.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _load_error(p: Path) -> str:
    with pytest.raises(TaskSpecError) as e:
        load_env_file(p)
    return str(e.value)


def test_non_utf8_file_names_the_file(tmp_path):
    p = tmp_path / "taxi.yaml"
    p.write_bytes((TASKS / "taxi.yaml").read_bytes()[:40] + b"\xff\xfe\x00\x81 binary")
    msg = _load_error(p)
    assert msg.startswith(f"{p}: ") and "not UTF-8" in msg and "0xff" in msg


def test_yaml_list_instead_of_mapping_names_the_file(tmp_path):
    p = tmp_path / "taxi.yaml"
    p.write_text(yaml.safe_dump([yaml.safe_load((TASKS / "taxi.yaml").read_text())]))
    msg = _load_error(p)
    assert msg.startswith(f"{p}: ") and "mapping" in msg and "found a list" in msg


def test_unknown_gymnasium_sim_id_names_file_and_field(tmp_path):
    p = _copy(tmp_path, "taxi", lambda d: d.__setitem__("sim_id", "Taxi-v999"))
    msg = _load_error(p)
    assert msg.startswith(f"{p}: field 'sim_id': 'Taxi-v999' is not a registered gymnasium")
    assert "did you mean" in msg and "Taxi-v4" in msg


def test_unknown_package_names_file_and_field(tmp_path):
    p = _copy(tmp_path, "taxi", lambda d: d.__setitem__("package", "nosuchpkg"))
    msg = _load_error(p)
    assert msg.startswith(f"{p}: field 'package': 'nosuchpkg' is not an installed distribution")
    assert "'gymnasium'" in msg


def test_installed_package_of_another_family_is_rejected(tmp_path):
    p = _copy(tmp_path, "cartpole", lambda d: d.__setitem__("package", "vical"))
    msg = _load_error(p)
    assert str(p) in msg and "'package'" in msg and "runs on 'gymnasium'" in msg


def test_action_index_outside_the_action_space_names_file_and_field(tmp_path):
    p = _copy(tmp_path, "taxi", lambda d: d["actions"].__setitem__("Pickup", 99))
    msg = _load_error(p)
    assert msg.startswith(f"{p}: field 'actions.Pickup': native action 99")
    assert "Discrete(6)" in msg and "Dropoff" not in msg  # only the bad entry is reported


def test_noop_outside_the_action_space_is_rejected(tmp_path):
    p = _copy(tmp_path, "mountaincar", lambda d: d.__setitem__("noop", 3))
    msg = _load_error(p)
    assert str(p) in msg and "field 'noop'" in msg and "Discrete(3)" in msg


@pytest.mark.parametrize(
    ("env", "mutate", "field"),
    [
        ("pong", lambda d: d["actions"].__setitem__("Up", "JUMP"), "'actions.Up'"),
        ("pong", lambda d: d["env_kwargs"].__setitem__("game", "Pongg"), "'env_kwargs.game'"),
        ("pong", lambda d: d.__setitem__("sim_id", "ALE/Tennis-v5"), "'sim_id'"),
        ("pong", lambda d: d.__setitem__("sim_id", "ALE/Pongg-v5"), "'sim_id'"),
        ("bigfish", lambda d: d["actions"].__setitem__("Up", 99), "'actions.Up'"),
        ("breakout", lambda d: d["actions"].__setitem__("Left", 7), "'actions.Left'"),
        ("breakout", lambda d: d.__setitem__("sim_id", "vical.envs.breakout.Nope"), "'sim_id'"),
    ],
)
def test_load_time_checks_of_other_families(tmp_path, env, mutate, field):
    pytest.importorskip("ale_py")
    p = _copy(tmp_path, env, mutate)
    msg = _load_error(p)
    assert msg.startswith(f"{p}: field {field}: ")


def test_load_envs_of_a_tasks_dir_reports_the_bad_file(tmp_path):
    _copy(tmp_path, "cartpole")
    bad = _copy(tmp_path, "taxi", lambda d: d.__setitem__("sim_id", "Taxi-v999"))
    with pytest.raises(TaskSpecError, match=f"^{bad}: field 'sim_id'"):
        load_envs(tmp_path)


def test_cli_reports_a_bad_task_dir_in_one_line(tmp_path):
    _copy(tmp_path, "taxi", lambda d: d.__setitem__("sim_id", "Taxi-v999"))
    env = {**os.environ, "VICAL_TASKS_DIR": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "vical.cli", "tasks", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0].startswith(f"error: {tmp_path / 'taxi.yaml'}: field 'sim_id'")


@pytest.mark.parametrize(
    ("env", "mutate", "field"),
    [
        ("flappybird", lambda d: d.__setitem__("sim_id", "FlappyBird-v9"), "'sim_id'"),
        ("heist", lambda d: d.__setitem__("sim_id", "heist2"), "'sim_id'"),
        ("lavacrossing", lambda d: d["actions"].__setitem__("Done", 99), "'actions.Done'"),
    ],
)
def test_slow_registries_are_checked_when_the_game_is_made(tmp_path, env, mutate, field):
    """Families whose registry is slow to import load, then fail before the first episode."""
    from vical.envs import make_env

    spec = load_env_file(_copy(tmp_path, env, mutate))
    with pytest.raises(TaskSpecError) as e:
        make_env(TaskSpec(env=spec, variant=spec.tasks[0]))
    assert str(e.value).startswith(f"{env}.yaml: field {field}: ")


def test_missing_optional_simulator_loads_but_cannot_be_made(tmp_path, monkeypatch):
    """The sims extra is optional: listing tasks works without it, making a game says why not."""
    from vical.envs import make_env
    from vical.spec import checks

    real = checks.installed
    monkeypatch.setattr(checks, "installed", lambda dist: dist != "ale-py" and real(dist))
    spec = load_env_file(_copy(tmp_path, "pong", lambda d: d["actions"].__setitem__("Up", 99)))
    with pytest.raises(TaskSpecError, match=r"^pong\.yaml: field 'package': 'ale-py' is not"):
        make_env(TaskSpec(env=spec, variant=spec.tasks[0]))


@pytest.mark.parametrize("env_key", ENV_KEYS)
def test_every_real_env_passes_the_simulator_checks(env_key):
    """Every shipped task file fits the installed simulators, slow registries included,
    and its vocabulary fits the action space of the game actually built."""
    from vical.envs import make_adapter
    from vical.spec import checks
    from vical.spec.families import FAMILIES

    spec = LOADED[env_key]
    checks.check_env(spec, TASKS / f"{env_key}.yaml", deep=True)
    if not FAMILIES[spec.family].actions_at_load:
        adapter = make_adapter(TaskSpec(env=spec, variant=spec.tasks[0]))
        adapter.close()
    else:
        assert checks.native_space(spec.family, spec.sim_id) is not None


def test_the_simulator_version_is_part_of_the_task_data_digest(monkeypatch):
    """A simulator change that alters frames bumps SIMULATOR_VERSION, and that alone
    gives runs, bundles and datasets a new task-data digest."""
    from vical import spec

    before = spec.tasks_digest()
    monkeypatch.setattr(spec, "SIMULATOR_VERSION", spec.SIMULATOR_VERSION + 1)
    assert spec.tasks_digest() != before
    assert spec.SIMULATOR_VERSION >= 2  # 2: the portable float math


# -- task folders: $VICAL_TASKS_DIR adds, $VICAL_BUILTIN_TASKS_DIR replaces -----------
def _list(env: dict[str, str]) -> list[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VICAL_TASKS_DIR", "VICAL_BUILTIN_TASKS_DIR")
    }
    r = subprocess.run(
        [sys.executable, "-m", "vical.cli", "tasks", "list"],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return [line.split("\t")[0] for line in r.stdout.splitlines()]


def _renamed_cartpole(tmp_path: Path) -> Path:
    """A copy of cartpole's file as a new environment ``polecart``."""

    def rename(d):
        d["env"] = "polecart"

    p = _copy(tmp_path, "cartpole", rename)
    return p.rename(tmp_path / "polecart.yaml")


def test_tasks_dir_adds_to_the_builtin_tasks_and_replaces_a_file_of_the_same_name(tmp_path):
    _renamed_cartpole(tmp_path)

    def one_variant(d):
        d["tasks"] = d["tasks"][:1]
        d.pop("demo_quota")

    _copy(tmp_path, "taxi", one_variant)
    ids = _list({"VICAL_TASKS_DIR": str(tmp_path)})
    builtin = [t.id for t in select_tasks(None, TASKS_DIR)]
    cartpole = [i for i in builtin if i.startswith("cartpole/")]
    assert [i for i in ids if i.startswith("polecart/")] == [
        i.replace("cartpole/", "polecart/") for i in cartpole
    ]
    assert [i for i in ids if i.startswith("taxi/")] == ["taxi/state1"]
    assert len(ids) == len(builtin) + len(cartpole) - 4


def test_builtin_tasks_dir_replaces_the_builtin_tasks(tmp_path):
    _copy(tmp_path, "cartpole")
    ids = _list({"VICAL_BUILTIN_TASKS_DIR": str(tmp_path)})
    assert ids and all(i.startswith("cartpole/") for i in ids)


def test_the_digest_covers_the_files_read_not_the_folders(tmp_path):
    """With nothing added the digest is the built-in set's; an identical copy of a
    built-in file read from another folder leaves it as it is; an added environment
    changes it."""
    from vical.spec import BUILTIN_TASKS_DIR, EXTRA_TASKS_DIRS, tasks_digest

    builtin = tasks_digest(BUILTIN_TASKS_DIR)
    # the digest of this process's task data: an environment added from a folder
    # ($VICAL_TASKS_DIR, as tests/test_external_env.py runs the suite) changes it
    assert (tasks_digest() == builtin) == (not EXTRA_TASKS_DIRS)
    same = tmp_path / "same"
    same.mkdir()
    (same / "taxi.yaml").write_bytes((TASKS / "taxi.yaml").read_bytes())
    assert tasks_digest((BUILTIN_TASKS_DIR, same)) == builtin
    added = tmp_path / "added"
    added.mkdir()
    _renamed_cartpole(added)
    assert tasks_digest((BUILTIN_TASKS_DIR, added)) != builtin
    assert len(load_envs((BUILTIN_TASKS_DIR, added))) == len(load_envs(BUILTIN_TASKS_DIR)) + 1


# -- the NOOP a start needs, and the demo quota --------------------------------------
def test_initial_skip_without_noop_is_refused_at_load(tmp_path):
    p = _copy(tmp_path, "taxi", lambda d: d["tasks"][1].__setitem__("initial_skip", 3))
    msg = _load_error(p)
    assert msg == (
        f"{p}: task taxi/state2: field 'initial_skip': 3 frames are skipped with the NOOP "
        "action, but 'noop' is not set; add 'noop: <native action>' to the file, or start "
        "without an initial skip"
    )


def test_demo_clip_skip_without_noop_is_refused_at_load(tmp_path):
    p = _copy(tmp_path, "taxi", lambda d: d["tasks"][0]["demos"][0].__setitem__("initial_skip", 2))
    msg = _load_error(p)
    assert msg.startswith(f"{p}: task taxi/state1: demo ") and "field 'initial_skip': 2" in msg


def test_demo_quota_is_task_data():
    spec = LOADED["taxi"]
    assert spec.demo_quota is not None
    assert (spec.demo_quota.pool, spec.demo_quota.clips, spec.demo_quota.loss_scope) == (
        3,
        "23332",
        "env",
    )


@pytest.mark.parametrize(
    ("quota", "needle"),
    [
        ({"pool": 3, "clips": "2333"}, "has 4 digits for 5 tasks"),
        ({"pool": 3, "clips": "23352"}, "demo_quota.clips"),
        ({"pool": 3, "clips": "23332", "loss_scope": "lane"}, "'lane' is neither one of env"),
        ({"pool": 0, "clips": "23332"}, "demo_quota.pool"),
    ],
)
def test_a_bad_demo_quota_names_file_and_field(tmp_path, quota, needle):
    p = _copy(tmp_path, "taxi", lambda d: d.__setitem__("demo_quota", quota))
    msg = _load_error(p)
    assert msg.startswith(f"{p}: ") and needle in msg


# -- provenance: where start sequences and demo clips come from --------------------
CONSENT = "I agree that this recording is published with the benchmark under CC-BY-4.0."
HUMAN = f"human: Ada Lovelace, 2026-12-03, recorded with vical play; consent: {CONSENT}"


def test_every_task_file_has_a_known_origin_for_its_starts_and_clips():
    from vical.spec import CLIP_ORIGINS, INIT_ORIGINS

    for spec in LOADED.values():
        for t in spec.tasks:
            assert (t.init_origin is None) == (not t.init_actions), t.variant
            if t.init_actions:
                assert t.init_origin in INIT_ORIGINS
            for clip in t.demos:
                assert clip.origin in CLIP_ORIGINS, (spec.env, clip.id)


def test_source_origin_reads_the_prefix():
    from vical.spec import source_origin

    assert source_origin("paper: Figure 5 (a)") == "paper"
    assert source_origin("generated: vical.authoring.recipes.alien seeded drive") == "generated"
    assert source_origin(HUMAN) == "human"
    assert source_origin("search expert: beam search, width 8") == "search"
    assert source_origin("scripted failure: NOOP held") == "scripted"
    assert source_origin("scripted controller vical.demos.experts.cartpole_policy") == "scripted"
    assert source_origin("failure clip: seeded random play") == "scripted"
    with pytest.raises(ValueError, match="names no known origin"):
        source_origin("recorded by a friend")


def test_origin_counts_of_the_task_data():
    """Figure 5's three start sequences are the paper's, every other one is generated;
    every distinct clip (counted once per environment) is a search or scripted player's."""
    from vical.spec import all_tasks, origin_counts

    tasks = all_tasks()
    counts = origin_counts(tasks)
    with_init = [t for t in tasks if t.variant.init_actions]
    paper = sorted(t.id for t in with_init if t.variant.init_source.startswith("paper:"))
    assert paper == ["asterix/lanes", "frostbite/floes-c", "seaquest/dive-230"]
    assert counts["starts"] == {"paper": 3, "generated": len(with_init) - 3, "human": 0}
    distinct = {(t.env.env, c.id) for t in tasks for c in t.variant.demos}
    assert sum(counts["clips"].values()) == len(distinct)
    assert counts["clips"]["human"] == 0 and min(counts["clips"].values()) == 0
    assert counts["clips"]["search"] > 0 and counts["clips"]["scripted"] > 0
    # a subset counts only its own tasks and clips
    taxi = [t for t in tasks if t.env.env == "taxi"]
    assert origin_counts(taxi) == {
        "starts": {"paper": 0, "generated": 0, "human": 0},
        "clips": {"search": 0, "scripted": 3, "human": 0},
    }


def test_human_start_sequence_with_consent_loads(tmp_path):
    def human(d):
        d["tasks"][1]["init_actions"] = ["Down", "Down"]
        d["tasks"][1]["init_source"] = HUMAN
        d["tasks"][1]["demos"][0]["source"] = HUMAN

    spec = load_env_file(_write(tmp_path, human))
    assert spec.tasks[1].init_origin == "human"
    assert spec.tasks[1].demos[0].origin == "human"
    assert spec.tasks[0].init_origin is None


@pytest.mark.parametrize(
    "where, text, needle",
    [
        ("init", "human: Ada, 2026-12-03, recorded with vical play", "does not read the form"),
        ("init", "human: Ada, 2026-12-03, recorded with vical play; consent:  ", "empty consent"),
        ("clip", "human: Ada, 2026-12-03, recorded with vical play; consent:", "empty consent"),
        ("clip", "human: Ada, 2026-02-30, recorded with vical play; consent: yes", "calendar"),
        ("clip", "recorded by a friend on a phone", "names no known origin"),
        ("clip", "paper: Figure 5", "has origin 'paper'"),
        ("init", "search expert: beam search", "must start with 'paper:"),
    ],
)
def test_a_source_without_a_known_form_or_consent_is_refused(tmp_path, where, text, needle):
    def bad(d):
        if where == "init":
            d["tasks"][1]["init_actions"] = ["Down"]
            d["tasks"][1]["init_source"] = text
        else:
            d["tasks"][1]["demos"][0]["source"] = text

    p = _write(tmp_path, bad)
    msg = _load_error(p)
    assert str(p) in msg and "taxi/state2" in msg and needle in msg, msg


def test_human_source_builds_the_agreed_form():
    import datetime

    from vical.spec import human_source, parse_human_source

    text = human_source("Ada Lovelace", datetime.date(2026, 12, 3), CONSENT)
    assert text == HUMAN
    assert parse_human_source(text) == ("Ada Lovelace", datetime.date(2026, 12, 3), CONSENT)
    with pytest.raises(ValueError, match="may not hold"):
        human_source("Lovelace, Ada", "2026-12-03", CONSENT)
    with pytest.raises(ValueError, match="empty consent"):
        human_source("Ada", "2026-12-03", "   ")


def test_the_readme_states_the_provenance_the_task_data_has():
    """README's provenance sentences hold for the task data: change both together when
    human recordings are adopted."""
    from vical.spec import all_tasks, origin_counts

    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    counts = origin_counts(all_tasks())
    assert "only the three of Figure 5 are the paper's; every other one is generated" in readme
    assert counts["starts"]["paper"] == 3 and counts["starts"]["human"] == 0
    assert "Every demonstration clip comes from a search or scripted player" in readme
    assert counts["clips"]["human"] == 0
    assert "human-init action sequences (Table 8, 9) are replayed" not in readme
