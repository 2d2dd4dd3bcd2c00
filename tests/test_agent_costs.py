"""Cost accounting from the price table, the shared rate limit, and both end to end."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import time

import pytest
from conftest import HANG

from vical.agent.costs import episode_cost, load_prices, price_for
from vical.agent.ratelimit import RateLimiter
from vical.run import RunOptions, load_results, run_eval
from vical.serve import BaselineServer
from vical.spec import select_tasks


def test_packaged_price_table_loads():
    prices = load_prices()
    assert prices["random"] == {"input": 0.0, "output": 0.0}


def test_bad_price_table_names_file_and_model(tmp_path):
    p = tmp_path / "prices.yaml"
    p.write_text("models:\n  m1: {input: 1.0}\n")
    with pytest.raises(ValueError, match=r"m1.*'output'"):
        load_prices(p)


def test_episode_cost_by_hand():
    price = {"input": 2.0, "output": 10.0, "cached_input": 0.5}
    usage = {"input_tokens": 1_000_000, "cached_input_tokens": 200_000, "output_tokens": 50_000}
    # 800k fresh x 2 + 200k cached x 0.5 + 50k x 10, per million
    assert episode_cost(usage, price) == pytest.approx(1.6 + 0.1 + 0.5)
    assert episode_cost(usage, None) is None
    assert price_for({"model": "x"}, {"x": price}) is price


def _take(path, n, out):
    lim = RateLimiter("http://example.invalid/v1", per_minute=600, folder=path)
    for _ in range(n):
        lim.acquire()
        out.put(lim.last_slot)  # the reserved start: a fact of the shared state, not a clock


def test_rate_limit_is_shared_across_processes(tmp_path):
    q = mp.get_context("fork").Queue()
    procs = [mp.get_context("fork").Process(target=_take, args=(tmp_path, 3, q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=HANG)
    slots = sorted(q.get() for _ in range(6))
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    assert min(gaps) >= 0.1 - 1e-6, gaps  # 600 per minute: one every 0.1 s, across both


def test_eval_records_cost_and_honours_rate_limit(tmp_path):
    p = tmp_path / "prices.yaml"
    p.write_text("models:\n  random: {input: 3.0, output: 15.0}\n")
    price = load_prices(p)["random"]
    with BaselineServer(("127.0.0.1", 0), seed=1) as server:
        kwargs = {
            "endpoint": server.openai_base_url,
            "model": "random",
            "seed": 0,
            "rate_limit": 1200,
        }
        start = time.time()
        s = run_eval(
            select_tasks("cliffwalking/base"),
            tmp_path / "run",
            agent="openai-chat",
            agent_kwargs=kwargs,
            options=RunOptions(workers=1, frames="none", progress=False, price=price),
        )
        requests = sum(server.counts.values())
        limiter = RateLimiter(server.openai_base_url, 1200)
    assert not s.failed
    (r,) = load_results(tmp_path / "run")
    expected = (r.usage["input_tokens"] * 3.0 + r.usage["output_tokens"] * 15.0) / 1e6
    assert r.usage["input_tokens"] > 0 and r.cost_usd == pytest.approx(expected, abs=1e-6)
    # 1200 per minute: the shared state reserved one start every 0.05 s, from the run's start
    next_slot = limiter.next_slot()
    assert next_slot is not None and next_slot >= start + requests * 0.05 - 1e-6
