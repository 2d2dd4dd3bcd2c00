"""The random row explained: our Table-1 random reference against the paper's.

Reads a random-agent run folder (``vical baseline random --out DIR``: every task,
3 runs) and prints, as Markdown:

1. our row next to the paper's Random row, S and P% per column, with the deltas;
2. per column, the environments that move our value most away from the paper's:
   each environment's share of the column's delta (the column is an equal-weight
   mean over its environments, so an environment's share is
   ``(env value - paper column value) / n``; the shares add up to the delta);
3. the per-environment table;
4. Table 23's tier check: each environment's random mean against the most its
   difficulty tier allows (``vical.paper.tier_report``; reported, never tuned to).

Usage: ``python benchmarks/random_row.py RUN_DIR [--top 3]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vical.paper import TABLE1_COLUMNS, TABLE1_REFERENCE, tier_report
from vical.report.table import build_report
from vical.run.results import load_results


def members(tags: dict) -> list[str]:
    return [*tags["types"], tags["memory"], tags["dynamics"], "All"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--top", type=int, default=3)
    args = ap.parse_args()
    results = load_results(args.run)
    rep = build_report(results, args.run.name, intervals=False)
    paper = dict(zip(TABLE1_COLUMNS, TABLE1_REFERENCE["Random (paper)"], strict=True))
    print(f"{len(results)} episodes, {rep.n_tasks} tasks, {rep.n_envs} environments\n")
    print("| column | ours S / P% | paper S / P% | delta S / P% |")
    print("|---|---|---|---|")
    for c in TABLE1_COLUMNS:
        cell = rep.columns[c]
        ps, pp = paper[c]
        s, p = cell.score or 0.0, cell.pass_rate or 0.0
        print(f"| {c} | {s:.1f} / {p:.0f} | {ps} / {pp} | {s - ps:+.1f} / {p - pp:+.0f} |")
    print()
    print(f"| column | largest shares of the S delta (top {args.top}) | of the P% delta |")
    print("|---|---|---|")
    for c in TABLE1_COLUMNS:
        envs = [e for e in rep.envs if c in members(e.tags)]
        n = len(envs)
        ps, pp = paper[c]
        s_share = sorted(((e.score - ps) / n, e.env) for e in envs)
        p_share = sorted(((e.pass_rate - pp) / n, e.env) for e in envs)

        def top(shares: list[tuple[float, str]]) -> str:
            picked = sorted(shares, key=lambda t: -abs(t[0]))[: args.top]
            return ", ".join(f"{env} {v:+.1f}" for v, env in picked)

        print(f"| {c} ({n}) | {top(s_share)} | {top(p_share)} |")
    print()
    print("| env | score | pass % | columns |")
    print("|---|---:|---:|---|")
    for e in sorted(rep.envs, key=lambda e: e.env):
        cols = ", ".join(m for m in members(e.tags) if m != "All")
        print(f"| {e.env} | {e.score:.1f} | {e.pass_rate:.0f} | {cols} |")
    print()
    print("| env | Table 23 tier | random mean | bound | within |")
    print("|---|---|---:|---:|---|")
    for row in tier_report({e.env: e.score for e in rep.envs}):
        mark = "yes" if row.within else f"no (+{row.excess:.1f})"
        print(f"| {row.env} | {row.tier} | {row.random_mean:.1f} | {row.bound:.1f} | {mark} |")


if __name__ == "__main__":
    main()
