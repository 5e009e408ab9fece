"""The async part of the SmolLM2 study's report: TRL's async trainer against `vllm serve` (`asynchronous.py`'s runs in
`async/<arm>/seed_<k>.json`), beside the synchronous GRPO of the same seeds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tabulate import tabulate


LABELS = {"grpo": "async GRPO", "grpo_half": "async GRPO, half the group", "probe": "async LZE, probe"}


def load_async_runs(results: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Every finished async run: arm -> seed -> its record."""
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for arm in LABELS:
        for path in sorted((results / "async" / arm).glob("seed_*.json")):
            record = json.loads(path.read_text())
            runs.setdefault(arm, {})[record["seed"]] = record
    return runs


def async_section(results: Path, sync_grpo: dict[int, dict[str, Any]]) -> list[str]:
    """The report's section on the async runs (none without runs): per arm, the seeds, test and OOD accuracy after the
    protocol's steps, the steady seconds a step, the rollouts the server completed a step and the rows trained a step;
    the synchronous GRPO of the same seeds as the reference line."""
    runs = load_async_runs(results)
    if not runs:
        return []

    def final(record: dict[str, Any], split: str) -> float:
        return float(np.mean(record["evaluations"][-1][split]["rate"]))

    from benchmarks.fused.report import interval  # the sync report's 95% t interval of paired differences

    def minus_grpo(arm: str) -> str:  # paired by seed with async GRPO (descriptive: no test is declared)
        seeds = sorted(set(runs[arm]) & set(runs.get("grpo", {})))
        if arm == "grpo" or not seeds:
            return ""
        return interval(pd.Series([final(runs[arm][k], "test") - final(runs["grpo"][k], "test") for k in seeds]))

    rows = []
    for arm, by_seed in runs.items():
        records = list(by_seed.values())
        test, ood = np.mean([final(r, "test") for r in records]), np.mean([final(r, "ood") for r in records])
        steps = [r["step_s"] for r in records]
        spread = f" ({min(steps):.1f}-{max(steps):.1f})" if len(steps) > 1 else ""
        rows.append([
            LABELS[arm], len(records), f"{test:.3f}", minus_grpo(arm), f"{ood:.3f}", f"{np.mean(steps):.1f}{spread}",
            f"{np.mean([r['rollouts_per_step'] for r in records]):.1f}", records[0]["rows_per_step"],
        ])  # fmt: skip
    seeds = sorted({s for by_seed in runs.values() for s in by_seed} & set(sync_grpo))
    if seeds:
        sync = [sync_grpo[s] for s in seeds]
        rows.append([
            f"GRPO (synchronous, seeds {', '.join(map(str, seeds))})", len(sync),
            f"{np.mean([final(r, 'test') for r in sync]):.3f}", "", f"{np.mean([final(r, 'ood') for r in sync]):.3f}",
            "", "", 64,
        ])  # fmt: skip
    dates = sorted(r["environment"]["date"] for by_seed in runs.values() for r in by_seed.values())
    return [
        "## The async trainer against `vllm serve` (TRL's `AsyncGRPOTrainer`, vLLM's CPU build)\n",
        "`asynchronous.py`: one run at a time on the machine (the server, TRL's worker child and the trainer share "
        f"its 2 cores), {dates[0]} to {dates[-1]}. Test and OOD accuracy after the protocol's steps; seconds a step "
        "are TRL's steady step clock (the first 2 steps left out), generation overlapping the update; rollouts are "
        "the server's completed requests a step. Differences are paired by seed and descriptive (the addendum "
        "declares no test). Seed 1's runs (2026-11-28 06:59-07:33 UTC) shared the machine at times with test "
        "processes at the lowest priority (`nice -n 19`), which their seconds may show; seeds 0 and 2 ran alone.\n",
        tabulate(
            rows,
            headers=[
                "arm",
                "seeds",
                "test accuracy",
                "minus async GRPO [95% CI]",
                "OOD accuracy",
                "s/step (range)",
                "rollouts/step",
                "rows/step",
            ],  # fmt: skip
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n",
    ]
