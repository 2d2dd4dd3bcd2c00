"""Figures for the report (matplotlib, Agg backend). Each function returns PNG bytes.

Every figure has a title, labelled axes and a legend or colour bar where
colours carry meaning. Inputs are the data returned by
:mod:`vical.report.analyses`, so a figure never recomputes a number.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from vical.outcomes import FailureMode

# bar colours by outcome, in stacking order: passed, then each failure mode, then unknown
MODE_COLORS = {
    "passed": "#4caf50",
    FailureMode.EARLY_TERMINATION.value: "#e57373",
    FailureMode.TIMEOUT.value: "#ffb74d",
    FailureMode.INVALID_ACTION.value: "#9575cd",
    FailureMode.TOKEN_OVERFLOW.value: "#4fc3f7",
    FailureMode.API_ERROR.value: "#90a4ae",
    "unknown": "#bdbdbd",
}
TIER_COLORS = {"Easy": "#4caf50", "Medium": "#ffb300", "Hard": "#e53935"}
CATEGORY_COLORS = {
    "early_success": "#4caf50",
    "early_death": "#e57373",
    "budget_reached": "#ffb74d",
    "early_other": "#90a4ae",
}


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def failure_modes_figure(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Stacked bars: each run's episodes split into passed and each failure mode."""
    names = [r["run"] for r in rows]
    keys = ["passed", *[k for k in MODE_COLORS if k != "passed"]]
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.8))
    left = np.zeros(len(rows))
    for k in keys:
        vals = np.array(
            [
                (r["passed"] if k == "passed" else r["counts"].get(k, 0)) / max(r["episodes"], 1)
                for r in rows
            ]
        )
        if not vals.any():
            continue
        ax.barh(names, 100 * vals, left=100 * left, color=MODE_COLORS[k], label=k)
        left += vals
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of episodes")
    ax.set_ylabel("run")
    ax.set_title("Episode outcomes and failure modes per run")
    ax.invert_yaxis()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=4, fontsize=8)
    return _png(fig)


def failure_by_type_figure(rows: Sequence[Mapping[str, Any]], title_suffix: str = "") -> bytes:
    """Grouped bars: early-termination and timeout shares of failures per game type, with φ."""
    types = [r["type"] for r in rows]
    x = np.arange(len(types))
    et = [100 * (r["early_termination"] or 0) for r in rows]
    to = [100 * (r["timeout"] or 0) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    et_color, to_color = (
        MODE_COLORS[FailureMode.EARLY_TERMINATION],
        MODE_COLORS[FailureMode.TIMEOUT],
    )
    ax.bar(x - 0.2, et, 0.4, color=et_color, label="early termination")
    ax.bar(x + 0.2, to, 0.4, color=to_color, label="timeout")
    for i, r in enumerate(rows):
        p = r["phi_timeout"]
        ax.text(i, 103, "φ=–" if p is None else f"φ={p:+.2f}", ha="center", fontsize=8)
    ax.set_xticks(
        x, [f"{t}\n({r['failed']}/{r['episodes']})" for t, r in zip(types, rows, strict=True)]
    )
    ax.set_ylim(0, 112)
    ax.set_ylabel("% of the type's failed episodes")
    ax.set_xlabel("game type (failed/all episodes)")
    ax.set_title("How failures end, by game type" + title_suffix)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8)
    return _png(fig)


def episode_length_figure(
    by_run: Mapping[str, Sequence[int]], stats: Sequence[Mapping[str, Any]]
) -> bytes:
    """Left: episode-length box plots per run. Right: outcome categories per run."""
    names = list(by_run)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 0.55 * len(names) + 2.4), layout="constrained")
    a1.boxplot([list(by_run[n]) for n in names], orientation="horizontal", tick_labels=names)
    a1.invert_yaxis()
    a1.set_xlabel("episode length L (agent steps)")
    a1.set_ylabel("run")
    a1.set_title("Episode length per run")
    left = np.zeros(len(stats))
    for k, color in CATEGORY_COLORS.items():
        vals = np.array([100 * s[k] for s in stats])
        a2.barh([s["run"] for s in stats], vals, left=left, color=color, label=k.replace("_", " "))
        left += vals
    a2.invert_yaxis()
    a2.tick_params(labelleft=False)  # same rows, same order as the left panel
    a2.set_xlim(0, 100)
    a2.set_xlabel("% of episodes")
    a2.set_title("Early success / early death / budget reached")
    a2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8)
    return _png(fig)


def action_heatmaps_figure(dists: Mapping[str, Mapping[str, Any]], max_envs: int = 12) -> bytes:
    """Figure 8: per environment, a run × action heatmap of action frequencies (rows sum to 1)."""
    envs = list(dists)[:max_envs]
    ncol = min(2, len(envs))
    nrow = -(-len(envs) // ncol)
    n_runs = max(len(dists[e]["rows"]) for e in envs)
    fig, axes = plt.subplots(
        nrow,
        ncol,
        figsize=(7 * ncol, (0.4 * n_runs + 2.6) * nrow),
        squeeze=False,
        layout="constrained",
    )
    im = None
    for ax, env in zip(axes.flat, envs, strict=False):
        d = dists[env]
        runs = list(d["rows"])
        mat = np.array([d["rows"][r]["freq"] for r in runs])
        # numpy 1.26's stubs leave numpy.ma.masked_where unannotated (unused-ignore: the
        # package's non-strict mypy config does not report the call)
        masked = np.ma.masked_where(mat == 0, mat)  # type: ignore[no-untyped-call, unused-ignore]
        im = ax.imshow(masked, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks(range(len(d["actions"])), d["actions"], rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(runs)), [f"{r} (n={d['rows'][r]['n']})" for r in runs], fontsize=8)
        ax.set_xlabel("action")
        ax.set_ylabel("run")
        ax.set_title(env)
    for ax in list(axes.flat)[len(envs) :]:
        ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.6, label="action frequency (blank: never executed)")
    fig.suptitle("Action distributions per run and environment")
    return _png(fig)


def strata_figure(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Table 23: learnability gap Δ per environment, coloured by tier, thresholds dashed."""
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(rows) + 2), 4))
    x = np.arange(len(rows))
    ax.bar(x, [r["delta"] for r in rows], color=[TIER_COLORS[r["tier"]] for r in rows])
    deltas = [r["delta"] for r in rows]
    ax.set_ylim(min(0.0, min(deltas) - 5), max(75.0, max(deltas) + 5))
    ax.axhline(0, c="k", lw=0.6)
    ax.axhline(70, ls="--", c="k", lw=0.8)
    ax.axhline(30, ls="--", c="k", lw=0.8)
    ax.set_xticks(x, [r["env"] for r in rows], rotation=70, ha="right", fontsize=8)
    ax.set_ylabel("Δ = best run mean − random mean (score points)")
    ax.set_xlabel("environment")
    ax.set_title("Difficulty strata (Eq. 2): Easy Δ>70, Medium 30≤Δ≤70, Hard Δ<30")
    ax.legend(handles=[Patch(color=c, label=t) for t, c in TIER_COLORS.items()], fontsize=8)
    return _png(fig)


def associations_figure(cells: Mapping[str, Any]) -> bytes:
    """Table 24: cell values by binary attribute, with r_pb in the panel titles."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for ax, key, groups, ylabel in (
        (a1, "memory_score", ("Single", "Multiple"), "model–environment mean score"),
        (a2, "dynamics_tokens", ("Static", "Dynamic"), "log tokens, standardized within run"),
    ):
        data = cells[key]
        rng = np.random.default_rng(0)
        for i, g in enumerate(groups):
            ys = data["values"].get(g, [])
            ax.scatter(i + rng.uniform(-0.12, 0.12, len(ys)), ys, s=18, alpha=0.7, label=g)
            if ys:
                ax.hlines(np.mean(ys), i - 0.25, i + 0.25, colors="k")
        if not any(data["values"].get(g) for g in groups):
            ax.text(
                0.5,
                0.5,
                "no cells (no token usage logged)",
                ha="center",
                transform=ax.transAxes,
                color="#666",
            )
        r, p = data["r_pb"], data["p"]
        stat = "r_pb undefined" if r is None else f"r_pb={r:+.3f}, p={p:.3g}"
        ax.set_xticks([0, 1], groups)
        ax.set_xlabel(key.split("_")[0])
        ax.set_ylabel(ylabel)
        ax.set_title(f"{key.replace('_', ' vs ')} ({stat})", fontsize=10)
        if any(data["values"].get(g) for g in groups):
            ax.legend(fontsize=8)
    fig.suptitle("Task-attribute associations (black bars: group means)")
    return _png(fig)


def demo_context_figure(
    frames: Sequence[int], n_tasks: int | None = None, paper_mean: float | None = 45.73
) -> bytes:
    """Figure 6: histogram of sampled demonstration frames per task (= seconds at 1 fps)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    if frames:
        bins = list(range(0, max(frames) + 6, 5))
        mean = float(np.mean(frames))
        ax.hist(frames, bins=bins, color="#5c6bc0", edgecolor="white", label="tasks")
        ax.axvline(mean, c="k", ls="--", label=f"mean {mean:.1f}")
    if paper_mean is not None:
        ax.axvline(paper_mean, c="#e53935", ls=":", label=f"paper mean {paper_mean}")
    ax.set_xlabel("demonstration context per task (sampled frames = seconds at 1 fps)")
    ax.set_ylabel("tasks")
    of = (
        f" (of {n_tasks} tasks; the others have no clips yet)"
        if n_tasks and n_tasks > len(frames)
        else ""
    )
    ax.set_title(f"Demonstration context of {len(frames)} tasks with demo clips{of}", fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def _listed_colors(name: str) -> list[tuple[float, float, float]]:
    """The RGB colours of a listed (qualitative) matplotlib colormap, in order."""
    cmap = plt.get_cmap(name)
    assert isinstance(cmap, ListedColormap), f"{name} is not a listed colormap"
    return [(r, g, b) for r, g, b, _ in (cmap(i) for i in range(cmap.N))]


def _action_palette(n: int) -> list[tuple[float, float, float, float]]:
    """n distinct colours without greys (grey marks steps after the episode ended)."""
    base = [c for i, c in enumerate(_listed_colors("tab20")) if i not in (14, 15)]
    base += _listed_colors("tab20b")
    return [(*base[i % len(base)], 1.0) for i in range(n)]


def trajectory_strip_figure(rows: Sequence[Mapping[str, Any]], task_id: str) -> bytes:
    """Figure 9: one row per episode; each cell is the action at that step, grey after the end."""
    actions = sorted({a for r in rows for a in r["actions"]})
    width = max([r["max_steps"] for r in rows] + [len(r["actions"]) for r in rows])
    colors = [*_action_palette(len(actions)), (0.88, 0.88, 0.88, 1.0)]
    grid = np.full((len(rows), width), len(actions))
    for i, r in enumerate(rows):
        for j, a in enumerate(r["actions"]):
            grid[i, j] = actions.index(a)
    fig, ax = plt.subplots(figsize=(min(18, 2 + 0.22 * width), 0.42 * len(rows) + 1.6))
    ax.imshow(
        grid,
        aspect="auto",
        cmap=ListedColormap(colors),
        vmin=0,
        vmax=len(actions),
        interpolation="nearest",
    )
    labels = [
        f"{r['run']} r{r['run_index']} · {'Pass' if r['passed'] else 'Fail'} · {r['score']:.0f}"
        + ("" if r["same_start"] else " (other start)")
        for r in rows
    ]
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_xlabel("decision step")
    ax.set_ylabel("run · outcome · score")
    ax.set_title(f"Decision trajectories from the same start state: {task_id}")
    handles = [Patch(color=colors[i], label=a) for i, a in enumerate(actions)]
    handles.append(Patch(color=colors[-1], label="episode ended"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=6, fontsize=7)
    return _png(fig)


def frame_strip_figure(
    rows: Sequence[Mapping[str, Any]], run_dirs: Mapping[str, Path], task_id: str, columns: int = 8
) -> bytes | None:
    """One row of frame thumbnails per episode (evenly spaced steps), from saved frames.

    Returns None when no episode has saved frames (``--no-frames`` runs).
    """
    from PIL import Image

    strips = []
    for r in rows:
        folder = Path(run_dirs[r["run"]]) / "episodes" / r["episode"] / "frames"
        files = sorted(folder.glob("*.png")) if folder.is_dir() else []
        if not files:
            continue
        idx = np.unique(
            np.linspace(0, len(files) - 1, min(columns, len(files))).round().astype(int)
        )
        strips.append((r, [(int(files[i].stem), Image.open(files[i]).convert("RGB")) for i in idx]))
    if not strips:
        return None
    ncol = max(len(s) for _, s in strips)
    fig, axes = plt.subplots(
        len(strips), ncol, figsize=(1.6 * ncol + 1.5, 1.7 * len(strips) + 0.6), squeeze=False
    )
    for i, (r, frames) in enumerate(strips):
        for j in range(ncol):
            ax = axes[i, j]
            ax.set_xticks([])
            ax.set_yticks([])
            if j >= len(frames):
                ax.axis("off")
                continue
            step, img = frames[j]
            ax.imshow(img)
            label = "start" if step == 0 else f"step {step}: {r['actions'][step - 1]}"
            ax.set_xlabel(label, fontsize=7)
        axes[i, 0].set_ylabel(
            f"{r['run']} r{r['run_index']}\n{'Pass' if r['passed'] else 'Fail'} {r['score']:.0f}",
            fontsize=8,
        )
    fig.suptitle(f"Frames of each episode from the same start state: {task_id}")
    return _png(fig)
