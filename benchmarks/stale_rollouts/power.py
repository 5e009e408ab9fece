"""The seed counts of BENCHMARKS.md section 10 (fused rounds with the stale-rollout correction against serial rounds),
from the paired spread of fused against serial rounds measured before the correction, fixed before its runs:

    python benchmarks/stale_rollouts/power.py            # writes benchmarks/results/stale_rollouts/power.md
    python benchmarks/stale_rollouts/power.py --check    # rebuilds it and fails if it differs from the committed

Per regime, the paired difference of in-domain accuracy (the mean of the last 3 evaluations) of the uncorrected
fused probe minus the serial probe: for `carries`, the dead-mass regime and `arithmetic` section 8's 19 seeds
(`benchmarks/results/fused/runs/`), for the solved regime the pilot's 5 (`benchmarks/results/stale_rollouts/pilot/`).
From each paired SD, the seeds a one-sided paired t-test of non-inferiority (H0: mean difference <= -margin) needs
for 80% power at the first Holm step's level over the 4 regimes (0.05 / 4), true difference 0, by statsmodels'
`TTestPower` (`benchmarks.fused.power.seeds_needed`); each regime runs its own count, rounded up, at least 8.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.frontier.report import load, smoothed_final  # noqa: E402
from benchmarks.fused.power import MARGIN, POWER, power_at, sd_upper, seeds_needed  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results" / "stale_rollouts"
SECTION_8 = ROOT / "benchmarks" / "results" / "fused" / "runs"
PROBE = "lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33"
ADAPTIVE = "lze:generation_rounds=2+4+8,round_policy=adaptive"
SERIAL = PROBE + ",fuse_rounds=false"
CORRECTED = PROBE + ",fuse_rounds=true,vllm_importance_sampling_correction=true"  # the proposed default
UNCORRECTED = PROBE + ",fuse_rounds=true,vllm_importance_sampling_correction=false"
SECTION_8_FUSED = PROBE  # section 8's label of the uncorrected fused probe (fused rounds were the default then)
REGIMES = {
    "carries": "`carries`",
    "dead": "the dead-mass regime",
    "arithmetic": "`arithmetic`",
    "solved": "the solved regime",
}
ALPHA = 0.05
HOLM_FIRST = ALPHA / len(REGIMES)
MIN_SEEDS = 8


def runs_of(regime: str, results: Path = RESULTS) -> dict:
    """`{arm label: {seed: run}}` of a regime from every folder of its runs: section 8's (its uncorrected fused probe
    relabelled), this section's pilot, its runs and the fill ablation's (`fill.py`, at commit 11e6ad3)."""
    folders = [SECTION_8, results / "pilot", results / "runs", results / "fill_runs"]
    arms: dict = {}
    for folder in folders:
        for label, seeds in load(sorted(str(p) for p in folder.glob(f"{regime}_s*"))).items():
            if folder == SECTION_8 and label == SECTION_8_FUSED:
                label = UNCORRECTED
            arms.setdefault(label, {}).update(seeds)
    return arms


def paired(arms: dict, arm: str, other: str, metric: str = "test_accuracy") -> pd.Series:
    """`arm` minus `other` in `metric` (mean of the last 3 evaluations) by seed, over the seeds both ran."""
    seeds = sorted(set(arms.get(arm, {})) & set(arms.get(other, {})))
    return pd.Series(
        {
            s: smoothed_final(arms[arm][s]["curve"], metric) - smoothed_final(arms[other][s]["curve"], metric)
            for s in seeds
        },
        dtype=float,
    )


def build(results: Path = RESULTS) -> str:
    rows, counts = [], []
    for regime, name in REGIMES.items():
        d = paired(runs_of(regime, results), UNCORRECTED, SERIAL)
        sd, n = float(d.std(ddof=1)), len(d)
        needed = seeds_needed(sd, alpha=HOLM_FIRST)
        seeds = max(math.ceil(needed), MIN_SEEDS)
        upper = sd_upper(sd, n)
        rows.append([name, str(n), f"{d.mean():+.4f}", f"{sd:.4f}", f"{needed:.1f}", str(seeds), f"{upper:.4f}"])
        power = [power_at(seeds, sd, 0.0, HOLM_FIRST), power_at(seeds, upper, 0.0, HOLM_FIRST)]
        counts.append([name, str(seeds), *(f"{p:.2f}" for p in power)])
    protocol = [
        ["primary comparison", f"`{CORRECTED}` (the proposed default) - `{SERIAL}`, paired by seed, per regime"],
        ["metric", "in-domain accuracy, mean of the last 3 evaluations (steps 200, 220, 240 of 240)"],
        ["test", "one-sided paired t-test of non-inferiority, H0: mean difference <= -margin"],
        ["margin", f"{MARGIN}"],
        ["family-wise alpha", f"{ALPHA}, Holm over the {len(REGIMES)} regimes"],
        ["power (true difference 0, first Holm step)", f"{POWER:.2f} at level {HOLM_FIRST:.4f}"],
        ["default if", f"non-inferior in all {len(REGIMES)} regimes after Holm"],
    ]
    return (
        "# Seeds for the stale-rollout correction test (BENCHMARKS.md section 10), rebuilt by "
        "benchmarks/stale_rollouts/power.py\n\n"
        "The paired spread of the uncorrected fused probe minus the serial probe (in-domain, mean of the last 3 "
        "evaluations), measured before the correction: section 8's seeds for three regimes, the pilot's for the "
        "solved regime. Each regime runs the seeds its SD asks for (TTestPower, one-sided, true difference 0), at "
        f"least {MIN_SEEDS}.\n\n## The pre-declared test\n\n"
        + tabulate(protocol, ["setting", "value"], tablefmt="github", disable_numparse=True)
        + "\n\n## Paired spread before the correction (uncorrected fused - serial probe)\n\n"
        + tabulate(
            rows,
            ["regime", "seeds", "mean", "paired SD", "n needed", "seeds to run", "SD, upper 80% bound"],
            tablefmt="github",
            disable_numparse=True,
        )
        + f"\n\n## Power at those seeds, level {HOLM_FIRST:.4f}\n\n"
        + tabulate(
            counts,
            ["regime", "seeds", "power", "power at the SD's upper 80% bound"],
            tablefmt="github",
            disable_numparse=True,
        )  # fmt: skip
        + "\n\nThe uncorrected fused probe's own mean difference was negative in two regimes: if the correction does "
        "not remove it, the power at these seeds is lower than the table says.\n"
    )


def main(argv: list[str] | None = None) -> int:
    return report_main(lambda results, figures: build(results), RESULTS, __doc__.splitlines()[0], argv, "power.md")


if __name__ == "__main__":
    sys.exit(main())
