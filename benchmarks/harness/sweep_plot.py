"""The selector sweep's figure ([`plot_sweep`], the paper's Fig. 3): LZE with each energy term removed, LZE against
its selection ratio, and every selector's accuracy with its FLOPs relative to the baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lze_examples.demo.plots import _pyplot


ENERGY_TERMS = ("anchor", "uncertainty", "momentum")


LZE_RATIO = 0.4
"""`selection_ratio` of the plain `lze` run (the config's default)."""


def classify(row: dict[str, Any]) -> tuple[str, Any]:
    """
    Where a run belongs in the figure: `("ratio", r)` for `lze` runs that only change `selection_ratio` (the plain
    `lze` run is `r = 0.4`), `("ablation", (r, missing_terms))` for `lze` runs restricted by `energy_terms` (at ratio
    `r`), else `("selector", name)`.
    """
    overrides = dict(row["overrides"])
    if overrides.get("selector") == "lze" and not overrides.get("prune_solved"):
        extra = set(overrides) - {"selector", "selection_ratio"}
        ratio = float(overrides.get("selection_ratio", LZE_RATIO))
        if not extra:
            return "ratio", ratio
        if extra == {"energy_terms"}:
            terms = overrides["energy_terms"]
            terms = terms.split(",") if isinstance(terms, str) else list(terms)
            return "ablation", (ratio, tuple(t for t in ENERGY_TERMS if t not in terms))
    return "selector", row["name"]


def plot_sweep(rows: list[dict[str, Any]], baseline: str, path: str | Path, metric: str = "late_test_accuracy") -> str:
    """
    Fig.-3-style figure: (a) LZE with each energy term removed, (b) LZE's held-out accuracy against
    `selection_ratio`, (c) every selector's accuracy, annotated with its total FLOPs relative to the baseline. Error
    bars are sample standard deviations over seeds; the dotted line is the baseline.
    """
    plt = _pyplot()
    by_kind: dict[str, list[tuple[Any, dict[str, Any]]]] = {"ratio": [], "ablation": [], "selector": []}
    for row in rows:
        kind, key = classify(row)
        by_kind[kind].append((key, row))
    base = next(row for row in rows if row["name"] == baseline)[metric]["mean"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2), gridspec_kw={"width_ratios": [1.3, 1, 1.5]})
    label = "held-out test accuracy" + (" (mean of last evals)" if metric.startswith("late") else "")

    full = [row for key, row in by_kind["ratio"] if key == LZE_RATIO]
    lze_at = dict(by_kind["ratio"])
    ablations: list[tuple[float, str, dict[str, Any], bool, float]] = []  # (x, label, row, is_full, ratio)
    x = 0.0
    for ratio in sorted({key[0] for key, _ in by_kind["ablation"]}):
        if ratio in lze_at:
            ablations.append((x, "full", lze_at[ratio], True, ratio))
            x += 1
        for key, row in sorted(by_kind["ablation"], key=lambda kr: kr[0]):
            if key[0] == ratio:
                ablations.append((x, "\n".join("no " + term for term in key[1]), row, False, ratio))
                x += 1
        x += 0.6  # a gap between the groups of one selection ratio
    ax = axes[0]
    if ablations:
        ax.bar(
            [x for x, *_ in ablations],
            [row[metric]["mean"] for _, _, row, _, _ in ablations],
            yerr=[row[metric]["std"] for _, _, row, _, _ in ablations],
            color=["tab:green" if is_full else "tab:orange" for _, _, _, is_full, _ in ablations],
            capsize=4,
        )
        ax.set_xticks(
            [x for x, *_ in ablations], [label for _, label, *_ in ablations], fontsize=7, rotation=45, ha="right"
        )
        for ratio in sorted({r for *_, r in ablations}):
            xs = [x for x, *_, r in ablations if r == ratio]
            ax.text(
                float(np.mean(xs)),
                1.01,
                f"selection_ratio {ratio:g}",
                ha="center",
                fontsize=8,
                transform=ax.get_xaxis_transform(),
            )
    ax.set_title("(a) energy terms removed", pad=14)

    ax = axes[1]
    ratios = sorted(by_kind["ratio"], key=lambda kr: kr[0])
    if ratios:
        ax.errorbar(
            [key for key, _ in ratios],
            [row[metric]["mean"] for _, row in ratios],
            yerr=[row[metric]["std"] for _, row in ratios],
            marker="o",
            capsize=4,
            color="tab:green",
            label="lze accuracy",
        )
        twin = ax.twinx()
        twin.plot(
            [key for key, _ in ratios],
            [row["total_flops_ratio"]["mean"] for _, row in ratios],
            marker="s",
            linestyle="--",
            color="tab:purple",
            label=f"total FLOPs / {baseline}",
        )
        twin.set_ylim(0, 1.05)
        twin.set_ylabel(f"total FLOPs / {baseline}", color="tab:purple")
    ax.set_xlabel("selection_ratio")
    ax.set_title("(b) selection ratio")

    ax = axes[2]
    selectors = [row for _, row in by_kind["selector"]] + ([full[0]] if full else [])
    selectors.sort(key=lambda row: row[metric]["mean"] if row[metric]["mean"] is not None else -1.0)
    ax.barh(
        range(len(selectors)),
        [row[metric]["mean"] for row in selectors],
        xerr=[row[metric]["std"] for row in selectors],
        color=["tab:green" if row["name"].startswith("lze") else "tab:blue" for row in selectors],
        capsize=4,
    )
    ax.set_yticks(range(len(selectors)), [row["name"] for row in selectors], fontsize=8)
    for i, row in enumerate(selectors):
        ax.annotate(
            f"{row['total_flops_ratio']['mean']:.2f}x FLOPs",
            (0.01, i),
            fontsize=7,
            va="center",
            xycoords=("axes fraction", "data"),
            color="white",
        )
    ax.axvline(base, color="grey", linestyle=":", label=f"{baseline}")
    ax.set_xlabel(label)
    ax.set_title("(c) selectors (FLOPs relative to the baseline)")
    values = [row[metric]["mean"] for row in rows if row[metric]["mean"] is not None]
    low, high = min(values), max(values)
    pad = max(0.02, 0.25 * (high - low))
    ax.set_xlim(max(0.0, low - 3 * pad), min(1.0, high + pad))
    for ax, corner in zip(axes[:2], ("upper right", "lower left")):
        ax.axhline(base, color="grey", linestyle=":", label=f"{baseline}")
        ax.set_ylim(max(0.0, low - 3 * pad), min(1.0, high + pad))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        # One legend per panel, with the twin axis's lines too (panel b), in a corner the data leave empty.
        handles, labels = ax.get_legend_handles_labels()
        for twin in ax.get_shared_x_axes().get_siblings(ax):
            if twin is not ax:
                more = twin.get_legend_handles_labels()
                handles, labels = handles + more[0], labels + more[1]
        ax.legend(handles, labels, fontsize=8, loc=corner)
    axes[2].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
