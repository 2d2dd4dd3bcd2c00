"""Shards: the slices partition the episode set, balance its cost, ignore task-list order,
and a shard folder is recorded as one and resumed only as the same slice."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.conftest import ALL_TASKS
from vical.cli import app
from vical.errors import RunFolderError
from vical.run import RunOptions, run_eval
from vical.run.shard import (
    Shard,
    assign,
    episode_cost,
    episode_set,
    episodes_digest,
    select_shard,
)
from vical.spec import select_tasks

TASKS = "taxi/state1,cliffwalking/base,cartpole/seed41"


def test_parse_reads_i_of_n_and_names_the_bad_value():
    assert Shard.parse("2/5") == Shard(2, 5) and str(Shard.parse(" 0/1 ")) == "0/1"
    for bad, words in [
        ("3/3", "one of 0..2"),
        ("-1/3", "one of 0..2"),
        ("1/0", "at least 1"),
        ("1", "not of the form I/N"),
        ("a/b", "not of the form I/N"),
        ("1/2/3", "not of the form I/N"),
    ]:
        with pytest.raises(ValueError, match=words) as e:
            Shard.parse(bad)
        assert bad.split("/")[0] in str(e.value)


@given(
    st.dictionaries(st.text(min_size=1, max_size=6), st.integers(1, 500), max_size=60),
    st.integers(1, 9),
)
def test_assign_partitions_and_balances(costs, n):
    slices = assign(costs, n)
    assert len(slices) == n
    flat = [x for s in slices for x in s]
    assert sorted(flat) == sorted(costs)  # no gap, no overlap
    loads = [sum(costs[x] for x in s) for s in slices]
    # greedy longest-first: no slice exceeds the lightest by more than one item's cost
    assert max(loads) - min(loads) <= max(costs.values(), default=0)
    # the same set inserted in another order gives the same slices
    shuffled = list(costs.items())
    random.Random(len(costs)).shuffle(shuffled)
    assert assign(dict(shuffled), n) == slices


@pytest.mark.parametrize("n", [1, 2, 5, 7])
def test_every_task_splits_into_n_disjoint_slices_whatever_the_task_order(n):
    every = episode_set(ALL_TASKS, 3)
    backwards = list(reversed(ALL_TASKS))
    got, infos = [], set()
    for i in range(n):
        eps, info = select_shard(ALL_TASKS, 3, Shard(i, n))
        eps2, info2 = select_shard(backwards, 3, Shard(i, n))
        assert sorted(eps) == sorted(eps2) and info == info2
        got += eps
        infos.add((info.count, info.episodes, info.episodes_digest))
        assert info.index == i
    assert sorted(got) == sorted(every.values()) and len(got) == len(set(got))
    assert infos == {(n, len(every), episodes_digest(every))}
    cost = {t.id: episode_cost(t) for t in ALL_TASKS}
    loads = [sum(cost[t] for t, _ in select_shard(ALL_TASKS, 3, Shard(i, n))[0]) for i in range(n)]
    assert max(loads) - min(loads) <= max(cost.values())


def test_a_shard_runs_its_slice_records_it_and_resumes_only_as_itself(tmp_path):
    tasks = select_tasks(TASKS)
    run = tmp_path / "s1"
    s = run_eval(
        tasks, run, options=RunOptions(runs=2, workers=1, progress=False, shard=Shard(1, 3))
    )
    mine, info = select_shard(tasks, 2, Shard(1, 3))
    assert s.total == len(mine) == s.finished and 0 < len(mine) < 6
    folders = sorted(p.name for p in (run / "episodes").iterdir())
    assert folders == sorted(f"{t.replace('/', '__')}__r{k}" for t, k in mine)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["shard"] == info.model_dump() and manifest["merged_from"] is None
    assert manifest["tasks"] == [t.id for t in tasks]  # the whole run's task list

    again = run_eval(
        tasks, run, options=RunOptions(runs=2, workers=1, progress=False, shard=Shard(1, 3))
    )
    assert again.skipped == len(mine) and again.finished == 0
    with pytest.raises(RunFolderError, match=r"holds shard 1/3 .* asks for shard 2/3"):
        run_eval(
            tasks, run, options=RunOptions(runs=2, workers=1, progress=False, shard=Shard(2, 3))
        )
    with pytest.raises(RunFolderError, match=r"asks for a whole run .* pass --shard 1/3"):
        run_eval(tasks, run, options=RunOptions(runs=2, workers=1, progress=False))
    with pytest.raises(RunFolderError, match="asks for shard 1/3 of 3 episode"):
        run_eval(
            tasks, run, options=RunOptions(runs=1, workers=1, progress=False, shard=Shard(1, 3))
        )


def test_cli_refuses_a_bad_shard_before_running(tmp_path):
    r = CliRunner().invoke(
        app,
        ["baseline", "random", "--tasks", "taxi/state1", "--shard", "4/4", "--out", str(tmp_path)],
    )
    assert r.exit_code == 2
    assert "--shard: shard 4/4: the index counts from 0" in r.output
    assert not list(tmp_path.iterdir())
