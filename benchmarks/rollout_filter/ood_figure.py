"""Figure of BENCHMARKS.md section 7d: OOD accuracy, dead groups and cumulative wrong skips over training, per run.

    python benchmarks/rollout_filter/ood_figure.py OUT.png NAME@LABEL [NAME@LABEL ...] -- FOLDER [FOLDER ...]

For each run `NAME` found in the `bench.py train` folders (every seed that has it, once), the mean over
seeds of (left) OOD greedy accuracy at each evaluation, (middle) the share of each generation batch's groups that were
dead (`lze/dead_frac`, smoothed over 8 steps), (right) audited skips that came back alive, cumulative.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def runs_of(name: str, folders: list[Path]) -> list[dict]:
    found: dict[str, dict] = {}  # by seed: a run in several folders (e.g. each one's baseline) counts once
    for folder in folders:
        for seed_dir in sorted(folder.glob("seed_*")):
            methods = json.loads((seed_dir / "demo_results.json").read_text())["methods"]
            if name in methods and seed_dir.name not in found:
                found[seed_dir.name] = methods[name]
    return list(found.values())


def main(argv: list[str]) -> None:
    split = argv.index("--")
    out, labels, folders = (
        Path(argv[0]),
        dict(a.split("@", 1) for a in argv[1:split]),
        [Path(f) for f in argv[split + 1 :]],
    )
    fig, (ax_ood, ax_dead, ax_wrong) = plt.subplots(1, 3, figsize=(13.0, 3.8))
    for name, label in labels.items():
        runs = runs_of(name, folders)
        steps = [row["step"] for row in runs[0]["curve"]]
        ood = np.mean([[row["ood_accuracy"] for row in run["curve"]] for run in runs], axis=0)
        spread = np.std([[row["ood_accuracy"] for row in run["curve"]] for run in runs], axis=0)
        (line,) = ax_ood.plot(steps, ood, marker="o", ms=3, label=f"{label} ({len(runs)} seeds)")
        ax_ood.fill_between(steps, ood - spread, ood + spread, color=line.get_color(), alpha=0.15)
        dead = np.mean([[s.get("lze/dead_frac", np.nan) for s in run["steps"]] for run in runs], axis=0)
        kernel = np.ones(8) / 8
        ax_dead.plot(np.arange(1, len(dead) + 1)[7:], np.convolve(dead, kernel, mode="valid"), color=line.get_color())
        wrong = [[s.get("lze/rollout_filter/audited_alive_total", np.nan) for s in run["steps"]] for run in runs]
        if not np.all(np.isnan(wrong)):
            ax_wrong.plot(np.arange(1, len(wrong[0]) + 1), np.nanmean(wrong, axis=0), color=line.get_color())
    ax_ood.set(xlabel="step", ylabel="OOD greedy accuracy", title="OOD accuracy (mean ± std over seeds)")
    ax_dead.set(xlabel="step", ylabel="share of the batch's groups", title="dead groups generated (8-step mean)")
    ax_wrong.set(xlabel="step", ylabel="groups (cumulative)", title="audited skips that came back alive")
    ax_ood.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
