"""The rollout-side columns of `bench.py train` folders, as one Markdown table (BENCHMARKS.md section 7c).

    python benchmarks/rollout_filter/side_table.py [--ood] FOLDER [FOLDER ...] > table.md

Each folder holds one `bench_train.json` (one or more seeds); methods are merged by name over all seeds. Columns: final
in-domain accuracy, share of generated groups that were dead over the run and in its last quarter, utilisation
(generated completion tokens that reached a backward pass), audited skips that came back alive (wrong skips, summed
over seeds), rollouts and total FLOPs over the baseline's (`grpo` of the same seed), CPU time over the baseline's, and
rollouts and total FLOPs spent until the run first reached the baseline's final in-domain accuracy, then its final OOD
accuracy, over the baseline's totals (`--ood` adds the OOD columns: final OOD accuracy and the OOD reach figures).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np


def stat(values: list[float | None], fmt: str, scale: float = 1.0, unit: str = "") -> str:
    kept = [v * scale for v in values if v is not None]
    if not kept:
        return "n/a"
    text = f"{np.mean(kept):{fmt}} ± {np.std(kept, ddof=1) if len(kept) > 1 else 0.0:{fmt}}{unit}"
    return text if len(kept) == len(values) else f"{text} ({len(kept)}/{len(values)} seeds)"


def reach(runs: list[dict], split: str, what: str) -> str:
    """Rollouts (`what="rollouts"`) or FLOPs (`"flops"`) spent until the run first reached the baseline's final
    `split` accuracy, over the baseline's total."""
    key, total = f"reach_{split}_{what}", "rollouts" if what == "rollouts" else "total_flops"
    values = [r["s"][key] / r["base"][total] if r["s"].get(key) is not None else None for r in runs]
    return stat(values, ".2f", unit="x") if any(v is not None for v in values) else "not reached"


def main(folders: list[str]) -> None:
    ood = "--ood" in folders
    folders = [f for f in folders if f != "--ood"]
    rows: dict[str, list[dict]] = defaultdict(list)
    seeds = []
    for folder in folders:
        results = json.loads((Path(folder) / "bench_train.json").read_text())
        for run in results["runs"]:
            seeds.append(run["seed"])
            base = run["methods"][results["baseline"]]["summary"]
            for name, method in run["methods"].items():
                rows[name].append({"s": method["summary"], "base": base})
    print(f"Seeds {sorted(seeds)}; mean ± sample std over seeds; ratios to `grpo` of the same seed.\n")
    header = [
        "run",
        "in-domain acc, final",
        "dead groups, run",
        "dead groups, last quarter",
        "utilisation",
        "wrong skips (alive / audited)",
        "rollouts / grpo",
        "total FLOPs / grpo",
        "CPU time / grpo",
        "rollouts to grpo's final acc / grpo's total",
    ]
    if ood:
        header[2:2] = ["OOD acc, final"]
        header += ["FLOPs to grpo's final acc", "rollouts to grpo's final OOD acc", "FLOPs to grpo's final OOD acc"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, runs in rows.items():
        s = [r["s"] for r in runs]
        audited = [x.get("audited_skips") for x in s]
        alive = [x.get("audited_skips_alive") for x in s]
        wrong = "n/a" if any(a is None for a in audited) else f"{int(sum(alive))} / {int(sum(audited))}"
        cells = [
            f"`{name}`",
            stat([x["final_test_accuracy"] for x in s], ".3f"),
            stat([x["dead_share"] for x in s], ".1f", 100, "%"),
            stat([x["dead_share_last_quarter"] for x in s], ".1f", 100, "%"),
            stat([x["utilisation"] for x in s], ".1f", 100, "%"),
            wrong,
            stat([x["rollouts"] / r["base"]["rollouts"] for x, r in zip(s, runs)], ".2f", unit="x"),
            stat([x["total_flops"] / r["base"]["total_flops"] for x, r in zip(s, runs)], ".2f", unit="x"),
            stat([x["train_cpu_seconds"] / r["base"]["train_cpu_seconds"] for x, r in zip(s, runs)], ".2f", unit="x"),
            reach(runs, "test", "rollouts"),
        ]
        if ood:
            cells[2:2] = [stat([x["final_ood_accuracy"] for x in s], ".3f")]
            cells += [
                reach(runs, "test", "flops"),
                reach(runs, "ood", "rollouts"),
                reach(runs, "ood", "flops"),
            ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
