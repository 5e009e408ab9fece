"""The report of BENCHMARKS.md section 9 (LZE on TRL's async trainer), rebuilt from the committed raw results:

    python benchmarks/asynchronous/report.py            # writes benchmarks/results/asynchronous/report.md
    python benchmarks/asynchronous/report.py --check    # fails if the committed report differs from the rebuilt one

Reads `benchmarks/results/asynchronous/runs/<arm>_s<seed>.json` (written by `run.py`). Per arm, over its seeds, the
mean and the standard deviation of: the steady-state step time, informative groups handed to the trainer per second
(groups with a non-zero advantage: the primary metric, declared in BENCHMARKS.md section 9 before the runs), groups
TRL trained per second, rollouts the server completed per step and per informative group, tokens trained per step,
and greedy accuracy on the test and OOD splits after training; the ratio of each arm's mean to async GRPO's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "asynchronous"
ARMS = {
    "grpo": "async GRPO (TRL's trainer)",
    "lze": "async LZE, unselected dropped",
    "lze_mask": "async LZE, unselected masked",
    "probe": "async LZE + probe",
}
COLUMNS = {
    "informative_groups_per_s": "informative groups / s",
    "groups_trained_per_s": "groups trained / s",
    "step_s": "s / step",
    "rollouts_per_step": "rollouts / step",
    "rollouts_per_informative_group": "rollouts / informative group",
    "tokens_per_step": "tokens trained / step",
    "test": "test accuracy",
    "ood": "OOD accuracy",
}


def load(folder: Path = RESULTS / "runs") -> pd.DataFrame:
    """One row per run: its arm, seed and the report's figures."""
    rows = []
    for path in sorted(folder.glob("*.json")):
        run = json.loads(path.read_text())
        tokens = run["trained_tokens"][2:]  # the steady steps' (the first ones warm up)
        rows.append({
            "arm": run["arm"], "seed": run["seed"], "steps": run["steps"], "started": run["started"],
            **{k: run[k] for k in COLUMNS if k in run}, "tokens_per_step": sum(tokens) / max(len(tokens), 1),
            "test": run["accuracy_after"]["test"], "ood": run["accuracy_after"]["ood"],
            "test_before": run["accuracy_before"]["test"], "ood_before": run["accuracy_before"]["ood"],
        })  # fmt: skip
    return pd.DataFrame(rows)


def report(frame: pd.DataFrame) -> str:
    """The report's markdown: the per-arm table (mean +- sd over seeds, ratio to GRPO), and the runs."""
    stats = frame.groupby("arm")[list(COLUMNS)].agg(["mean", "std"])
    base = stats.loc["grpo"] if "grpo" in stats.index else None
    table = []
    for arm, name in ARMS.items():
        if arm not in stats.index:
            continue
        row = [name, int((frame["arm"] == arm).sum())]
        for column in COLUMNS:
            mean, sd = stats.loc[arm, (column, "mean")], stats.loc[arm, (column, "std")]
            ratio = "" if base is None or arm == "grpo" else f" ({mean / base[(column, 'mean')]:.2f}x)"
            row.append(f"{mean:.3g} ± {sd:.2g}{ratio}")
        table.append(row)
    lines = [
        "# LZE on TRL's async trainer: the runs",
        "",
        "Rebuilt by `python benchmarks/asynchronous/report.py` from `runs/`. Mean ± standard deviation over the",
        "seeds; in brackets, the ratio of the mean to async GRPO's. Steady state: from the end of step 3 to the last",
        "step.",
        "",
        tabulate(table, headers=["arm", "seeds", *COLUMNS.values()], tablefmt="github"),
        "",
        f"Accuracy before training (the warm start): test {frame['test_before'].mean():.3f}, "
        f"OOD {frame['ood_before'].mean():.3f}.",
        "",
        "## Runs",
        "",
        tabulate(
            frame.sort_values(["seed", "arm"])[["arm", "seed", "steps", "started", *COLUMNS]].round(4),
            headers="keys",
            tablefmt="github",
            showindex=False,
        ),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    text = report(load())
    path = RESULTS / "report.md"
    if "--check" in sys.argv:
        if path.read_text() != text:
            sys.exit(f"{path} is not what the raw results give: rerun python benchmarks/asynchronous/report.py")
        return
    path.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
