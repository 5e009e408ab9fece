"""What becomes of the prompts whose first group came back dead (BENCHMARKS.md section 7d).

    python benchmarks/rollout_filter/first_dead.py RUN [RUN ...] -- FOLDER [FOLDER ...]

For each run name and over every seed of the `bench.py train` folders: the prompts whose first generated group
was dead (pass rate 0 or 1), how many of them came back alive in a later group, how many groups the run generated for
them, and the same for those of level 2 with an operand of 70 or more (`carries` task: large two-carry sums, next to
its OOD range). Reads each run's `lze_selection_log.parquet` (every generated group) and `lze_prompts.parquet`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def first_dead(run_dir: Path) -> dict[str, int]:
    log = pd.read_parquet(run_dir / "lze_selection_log.parquet").sort_values(["step", "generation"], kind="stable")
    prompts = pd.read_parquet(run_dir / "lze_prompts.parquet").set_index("prompt_id")
    first = log.groupby("prompt_id")["pass_rate"].first()
    ids = first[(first == 0) | (first == 1)].index
    groups = log[log.prompt_id.isin(ids)]
    revived = groups.groupby("prompt_id")["pass_rate"].apply(
        lambda p: bool(((p.iloc[1:] > 0) & (p.iloc[1:] < 1)).any())
    )
    operands = prompts.loc[ids, "prompt"].str.rstrip("=").str.split("+", expand=True).astype(int)
    large = ids[(operands.max(axis=1) >= 70).to_numpy() & (prompts.loc[ids, "difficulty"] == 2).to_numpy()]
    return {
        "first_dead": len(ids),
        "revived": int(revived.sum()),
        "groups": len(groups),
        "large_l2": len(large),
        "large_l2_groups": int(log.prompt_id.isin(large).sum()),
    }


def main(argv: list[str]) -> None:
    split = argv.index("--")
    runs, folders = argv[:split], [Path(f) for f in argv[split + 1 :]]
    print(
        "| run | prompts dead at their first group | came back alive later | groups generated for them | "
        "of them level 2 with an operand >= 70 | groups generated for those |"
    )
    print("|---|---|---|---|---|---|")
    for run in runs:
        total = {}
        for folder in folders:
            for seed_dir in sorted(folder.glob("seed_*")):
                for key, value in first_dead(seed_dir / "runs" / run).items():
                    total[key] = total.get(key, 0) + value
        print(
            f"| `{run}` | {total['first_dead']} | {total['revived']} | {total['groups']} | {total['large_l2']} | "
            f"{total['large_l2_groups']} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
