"""PNG figures of a demo comparison (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


SPLITS = (("test", "in-domain test"), ("ood", "OOD (levels 6-7)"), ("train", "train prompts"))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_accuracy(results: dict[str, Any], x_key: str, x_label: str, path: Path) -> str:
    """Accuracy on each evaluated split against `x_key` of the evaluation records (one line per method)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(SPLITS), figsize=(5 * len(SPLITS), 3.8), squeeze=False)
    baseline = results["baseline"]
    largest = max((row[x_key] for m in results["methods"].values() for row in m["curve"]), default=0.0)
    exponent = int(np.floor(np.log10(largest))) if largest >= 1e4 else 0
    scale = 10.0**exponent
    if exponent:
        x_label = f"{x_label}, x 1e{exponent}"
    for ax, (split, title) in zip(axes[0], SPLITS):
        for name, method in results["methods"].items():
            curve = method["curve"]
            xs = [row[x_key] / scale for row in curve]
            ys = [row[f"{split}_accuracy"] for row in curve]
            ax.plot(xs, ys, marker="o", markersize=3, label=name, linewidth=2 if name == baseline else 1.5)
        target = results["methods"][baseline]["summary"].get(f"target_{split}_accuracy")
        if target is not None:
            ax.axhline(target, color="grey", linestyle=":", linewidth=1, label=f"target ({baseline} final)")
        ax.set_title(title)
        ax.set_xlabel(x_label)
        ax.set_ylabel("greedy accuracy")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_distributions(results: dict[str, Any], runs: dict[str, dict[str, Any]], path: Path) -> str:
    """
    Per-prompt pass rates and energies at the start and the end of each run.

    Pass rates: the sampled pass rate of every training prompt before training (shared start) against each run's
    last observed pass rate per prompt (`prompt_table()["last_pass_rate"]`). Energies: the energies of the active
    (non-dead) groups of the first and of the last quarter of each run's generation batches (selection log), with
    the dead share of each in the legend.
    """
    plt = _pyplot()
    names = list(results["methods"])
    G = results["config"]["num_generations"]
    bins = np.linspace(-0.5 / G, 1 + 0.5 / G, G + 2)
    fig, axes = plt.subplots(2, len(names), figsize=(4.2 * len(names), 6.4), squeeze=False)
    start_rates = np.asarray(results["start"]["train_pass_rates"], dtype=np.float64)
    for col, name in enumerate(names):
        table = runs[name]["prompt_table"]
        ax = axes[0][col]
        ax.hist(start_rates, bins=bins, alpha=0.5, label="start (sampled, all prompts)", density=True)
        if len(table):
            ax.hist(
                table["last_pass_rate"].to_numpy(), bins=bins, alpha=0.5, label="end (last observation)", density=True
            )
        ax.set_title(f"{name}: pass rate per prompt")
        ax.set_xlabel("pass rate")
        ax.legend(fontsize=7)

        ax = axes[1][col]
        log = runs[name]["selection_log"]
        if len(log):
            generations = np.sort(log["batch"].unique())
            quarter = max(len(generations) // 4, 1)
            early = log[log["batch"].isin(generations[:quarter])]["energy"].to_numpy()
            late = log[log["batch"].isin(generations[-quarter:])]["energy"].to_numpy()
            top = max(float(log["energy"].max()), 1e-6)
            ebins = np.linspace(0, top, 21)
            # Dead groups (energy 0) are most groups: show the active ones and give the dead share in the legend.
            ax.hist(
                early[early > 0],
                bins=ebins,
                alpha=0.5,
                label=f"first {quarter} batches, {np.mean(early <= 0):.0%} dead",
            )
            ax.hist(
                late[late > 0], bins=ebins, alpha=0.5, label=f"last {quarter} batches, {np.mean(late <= 0):.0%} dead"
            )
            ax.set_title(f"{name}: energy of the active groups")
        ax.set_ylabel("groups")
        ax.set_xlabel("energy of a prompt group")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_update_tokens(results: dict[str, Any], path: Path) -> str:
    """Update tokens (completion tokens of the updated rows, TRL's `lze/update_tokens`) per generation batch."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for name, method in results["methods"].items():
        steps = [row["step"] for row in method["steps"] if "lze/update_tokens" in row]
        tokens = [row["lze/update_tokens"] for row in method["steps"] if "lze/update_tokens" in row]
        ax.plot(steps, tokens, label=name, linewidth=1)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss tokens in the update")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_all(results: dict[str, Any], runs: dict[str, dict[str, Any]], output_dir: Path) -> dict[str, str]:
    """Writes every figure into `output_dir` and returns their paths by name."""
    output_dir = Path(output_dir)
    return {
        "accuracy_vs_time": plot_accuracy(
            results,
            "train_seconds",
            "training wall-clock (s, evaluation excluded)",
            output_dir / "accuracy_vs_time.png",
        ),
        "accuracy_vs_flops": plot_accuracy(
            results,
            "total_flops",
            "training FLOPs (2N/rollout token + 6N/update token)",
            output_dir / "accuracy_vs_flops.png",
        ),
        "distributions": plot_distributions(results, runs, output_dir / "pass_rate_energy.png"),
        "update_tokens": plot_update_tokens(results, output_dir / "update_tokens.png"),
    }
