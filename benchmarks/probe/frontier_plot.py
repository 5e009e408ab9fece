"""Accuracy against rollouts, one point per arm: GRPO's frontier as lines, every other arm as a labelled point.

Reads a frontier `report.json` (benchmarks/frontier/report.py) and draws, for in-domain and OOD accuracy
(mean of the last 3 evaluations, mean over seeds with its 95% t interval), each arm at its fresh rollouts per step
relative to GRPO's. GRPO's fewer-prompts points and fewer-rollouts-per-prompt points are joined to the full batch:

    python benchmarks/probe/frontier_plot.py benchmarks/results/probe/dead/report.json --title "dead-mass regime"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks.*` from a checkout
from benchmarks.frontier.report import half_width  # noqa: E402


METRICS = {"test_last3": "in-domain accuracy, last 3 evaluations", "ood_last3": "OOD accuracy, last 3 evaluations"}


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per arm: mean rollouts ratio, and mean and 95% t half-width of each metric over seeds."""
    out = []
    for arm, part in rows.groupby("arm", sort=False):
        entry = {"arm": arm, "rollouts": part.fresh_rollouts_ratio.mean()}
        for metric in METRICS:
            entry[metric], entry[metric + "_half"] = part[metric].mean(), half_width(part[metric])
        out.append(entry)
    return pd.DataFrame(out)


def frontier_lines(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """GRPO's two ways of spending less: fewer prompts (batch size alone), fewer rollouts per prompt (group size)."""
    grpo = table[table.arm.str.startswith("grpo") & ~table.arm.str.contains("learning_rate")]
    full = grpo[grpo.arm == "grpo"]
    prompts = grpo[grpo.arm.str.contains("per_device_train_batch_size") & ~grpo.arm.str.contains("num_generations")]
    group = grpo[grpo.arm.str.contains("num_generations")]
    return {
        "GRPO, fewer prompts": pd.concat([full, prompts]).sort_values("rollouts"),
        "GRPO, fewer rollouts per prompt": pd.concat([full, group]).sort_values("rollouts"),
    }


def plot(report: Path, output: Path, title: str) -> None:
    table = summary(pd.DataFrame(json.loads(report.read_text())["rows"]))
    lines = frontier_lines(table)
    others = table[~table.arm.str.startswith("grpo")]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, (metric, label) in zip(axes, METRICS.items()):
        for (name, line), style in zip(lines.items(), ("-", "--")):
            ax.errorbar(
                line.rollouts,
                line[metric],
                yerr=line[metric + "_half"],
                fmt="o" + style,
                color="black",
                capsize=3,
                label=name,
            )
        for i, row in enumerate(others.itertuples()):
            ax.errorbar(
                row.rollouts,
                getattr(row, metric),
                yerr=getattr(row, metric + "_half"),
                fmt="s",
                color=f"C{i % 10}",
                capsize=3,
                label=row.arm,
            )
        ax.set_xlabel("fresh rollouts per step / GRPO's")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="best")
    fig.suptitle(f"{title}: accuracy against rollouts (mean over seeds, 95% interval)")
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a report.json of benchmarks/frontier/report.py")
    parser.add_argument("--title", default="", help="the figure's title (the regime)")
    parser.add_argument("--output", type=Path, default=None, help="defaults to frontier.png beside the report")
    cli = parser.parse_args()
    plot(cli.report, cli.output or cli.report.with_name("frontier.png"), cli.title or cli.report.parent.name)


if __name__ == "__main__":
    main()
