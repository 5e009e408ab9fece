"""The seed count of BENCHMARKS.md section 8 (fused rounds as the default), from the paired spread of the committed
runs, fixed before any run of the fused mode:

    python benchmarks/fused/power.py            # writes benchmarks/results/fused/power.md
    python benchmarks/fused/power.py --check    # rebuilds it and fails if it differs from the committed

Reads the 240-step runs of BENCHMARKS.md sections 1-3 (`benchmarks/results/adaptive/runs/` and `fitted_runs/`, seeds
0-4). Per regime, the paired difference to GRPO of in-domain accuracy (the mean of the last 3 evaluations,
`benchmarks.frontier.report.smoothed_final`) for the serial probe (`lze:probe_generations=2,selection_ratio=0.33`,
the existing arm closest to the fused probe) and, as a sensitivity row, for the adaptive budget with the fitted prior.
From each paired SD, the seeds a one-sided paired t-test of non-inferiority (H0: mean difference <= -margin) needs for
80% power at the first Holm step's level (alpha / 3, the worst case of the 3 regimes): statsmodels' `TTestPower`, the
paired test being a one-sample t-test on the differences, with effect size (true difference + margin) / SD. The
primary assumption is a true difference of 0; the sensitivity columns take the SD at the upper bound of its 80%
confidence interval (chi-square with seeds - 1 degrees of freedom) and the true difference equal to the observed mean
where that is negative. The seed count is the largest primary n over the regimes (serial probe), rounded up.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestPower
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import ADAPTIVE, BASELINE, REGIMES  # noqa: E402
from benchmarks.frontier.report import load, smoothed_final  # noqa: E402


ADAPTIVE_RESULTS = ROOT / "benchmarks" / "results" / "adaptive"
OUTPUT = ROOT / "benchmarks" / "results" / "fused" / "power.md"
FUSED = "lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33"  # fused: the default of its runs' code
SERIAL_PROBE = "lze:probe_generations=2,selection_ratio=0.33"  # the committed runs' label of the serial probe
MARGIN = 0.015  # non-inferiority margin on in-domain accuracy
ALPHA = 0.05  # family-wise, Holm over the regimes
HOLM_FIRST = ALPHA / len(REGIMES)  # the first Holm step's level: the worst case for any one regime
POWER = 0.8
SD_CONFIDENCE = 0.8  # the one-sided confidence of the SD's upper bound
ARMS = {  # name in the tables: (folder under the adaptive results, arm label there, role)
    "serial probe": ("runs", SERIAL_PROBE, "primary"),
    "adaptive budget, fitted prior": ("fitted_runs", ADAPTIVE, "sensitivity"),
}


def seeds_needed(
    sd: float, true_difference: float = 0.0, margin: float = MARGIN, alpha: float = HOLM_FIRST, power: float = POWER
) -> float:
    """Paired seeds for `power` of the one-sided paired t-test of H0: difference <= -`margin` at level `alpha`, when
    the differences have SD `sd` and mean `true_difference` (`TTestPower` on the differences); infinite when the true
    difference is at or below -margin."""
    shift = true_difference + margin
    if shift <= 0:
        return math.inf
    if sd == 0:
        return 2.0  # no spread: the smallest sample a t-test takes
    return float(
        TTestPower().solve_power(effect_size=shift / sd, nobs=None, alpha=alpha, power=power, alternative="larger")
    )


def power_at(seeds: int, sd: float, true_difference: float = 0.0, alpha: float = HOLM_FIRST) -> float:
    """The power of that test with `seeds` paired seeds."""
    return float(
        TTestPower().power(effect_size=(true_difference + MARGIN) / sd, nobs=seeds, alpha=alpha, alternative="larger")
    )


def sd_upper(sd: float, seeds: int, confidence: float = SD_CONFIDENCE) -> float:
    """The upper bound of the one-sided `confidence` interval of a normal SD estimated from `seeds` values."""
    return float(sd * np.sqrt((seeds - 1) / stats.chi2.ppf(1 - confidence, seeds - 1)))


def differences(results: Path = ADAPTIVE_RESULTS) -> dict[tuple[str, str], pd.Series]:
    """`{(regime, arm name): in-domain differences to GRPO by seed}` from the committed runs."""
    out = {}
    for regime in REGIMES:
        runs = {
            folder: load(sorted(str(p) for p in (results / folder).glob(f"{regime}_s*")))
            for folder in ("runs", "fitted_runs")
        }
        base = runs["runs"].get(BASELINE, {})
        for name, (folder, label, _) in ARMS.items():
            arm = runs[folder].get(label, {})
            seeds = sorted(set(arm) & set(base))
            if len(seeds) >= 2:
                out[regime, name] = pd.Series(
                    {
                        s: smoothed_final(arm[s]["curve"], "test_accuracy")
                        - smoothed_final(base[s]["curve"], "test_accuracy")
                        for s in seeds
                    }
                )
    return out


def seeds_text(n: float) -> str:
    return "never (true difference <= -margin)" if math.isinf(n) else str(math.ceil(n))


def build(results: Path = ADAPTIVE_RESULTS) -> str:
    diffs = differences(results)
    spread, primary = [], {}
    for (regime, name), d in diffs.items():
        sd, mean, count = float(d.std(ddof=1)), float(d.mean()), len(d)
        upper = sd_upper(sd, count)
        n = seeds_needed(sd)
        if ARMS[name][2] == "primary":
            primary[regime] = (n, sd, upper, min(mean, 0.0))
        spread.append(
            [
                REGIMES[regime],
                f"{name} ({ARMS[name][2]})",
                str(count),
                f"{mean:+.4f}",
                f"{sd:.4f}",
                seeds_text(n),
                f"{upper:.4f}",
                seeds_text(seeds_needed(upper)),
                seeds_text(seeds_needed(sd, mean)) if mean < 0 else "as at 0 (mean >= 0)",
            ]
        )
    if not primary:
        raise SystemExit(f"no paired runs of {BASELINE} and {SERIAL_PROBE} under {results}")
    worst = max(primary, key=lambda r: primary[r][0])
    chosen = math.ceil(primary[worst][0])
    seeds = ", ".join(map(str, sorted({s for d in diffs.values() for s in d.index})))
    head = (
        "# Seeds for the fused-rounds default test (BENCHMARKS.md section 8), rebuilt by benchmarks/fused/power.py\n\n"
    )
    intro = (
        f"From the committed 240-step runs, seeds {seeds} ({ADAPTIVE_RESULTS.relative_to(ROOT)}/runs and "
        "fitted_runs): per regime, the paired difference to GRPO of in-domain accuracy (mean of the last 3 "
        "evaluations), its SD over the seeds, and the seeds a one-sided paired t-test of non-inferiority at margin "
        f"{MARGIN} needs for {POWER:.0%} power at level {ALPHA} / {len(REGIMES)} (the first Holm step), by "
        "statsmodels' TTestPower (one-sample t-test on the differences, effect size (true difference + margin) / "
        f"SD). An SD of {max(map(len, diffs.values()))} seeds is itself uncertain: the upper bound of its one-sided "
        f"{SD_CONFIDENCE:.0%} confidence interval (chi-square) and the n it implies are beside it. The serial probe "
        "is the existing arm closest to the fused probe and sets the seed count; the adaptive budget is a "
        "sensitivity row.\n"
    )
    protocol = [
        ["comparison", f"`{FUSED}` (fused rounds, the proposed default) - `{BASELINE}`, paired by seed, per regime"],
        ["metric", "in-domain accuracy, mean of the last 3 evaluations (steps 200, 220, 240 of 240)"],
        ["test", "one-sided paired t-test of non-inferiority, H0: mean difference <= -margin"],
        ["margin", f"{MARGIN}"],
        ["family-wise alpha", f"{ALPHA}, Holm over the {len(REGIMES)} regimes"],
        ["alpha of the first Holm step", f"{HOLM_FIRST:.4f}"],
        ["power (true difference 0)", f"{POWER:.2f}"],
        ["seeds per regime", str(chosen)],
        ["default if", f"non-inferior in all {len(REGIMES)} regimes after Holm"],
    ]
    choice = [
        [
            "the largest n over the regimes: serial probe, true difference 0, rounded up",
            REGIMES[worst],
            f"{primary[worst][1]:.4f}",
            str(chosen),
        ]
    ]
    assumptions = {  # (SD, true difference) of each power column
        "power": lambda r: (primary[r][1], 0.0),
        "upper": lambda r: (primary[r][2], 0.0),
        "mean": lambda r: (primary[r][1], primary[r][3]),
    }
    powers = [
        [REGIMES[r], f"{primary[r][1]:.4f}", *(f"{power_at(chosen, *a(r)):.2f}" for a in assumptions.values())]
        for r in primary
    ]
    if len(primary) == len(REGIMES):
        product = [np.prod([power_at(chosen, *a(r)) for r in primary]) for a in assumptions.values()]
        powers.append(
            [
                "all three pass (product: a lower bound if the regimes are independent)",
                "",
                *(f"{p:.2f}" for p in product),
            ]
        )
    return (
        head
        + intro
        + "\n## The pre-declared test\n\n"
        + tabulate(protocol, ["setting", "value"], tablefmt="github", disable_numparse=True)
        + "\n\n## Paired spread of the existing runs (in-domain, arm - GRPO)\n\n"
        + tabulate(
            spread,
            [
                "regime",
                "arm",
                "seeds",
                "mean",
                "paired SD",
                "n, true difference 0",
                f"SD, upper {SD_CONFIDENCE:.0%} bound",
                "n at the SD's upper bound",
                "n, true difference = the mean",
            ],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n\n## The seed count\n\n"
        + tabulate(choice, ["rule", "regime", "paired SD", "seeds"], tablefmt="github", disable_numparse=True)
        + f"\n\n## Power at {chosen} seeds, level {HOLM_FIRST:.4f} (serial probe's SD, true difference 0 unless said)"
        + "\n\n"
        + tabulate(
            powers,
            [
                "regime",
                "paired SD",
                "power",
                f"power at the SD's upper {SD_CONFIDENCE:.0%} bound",
                "power if the true difference is the mean (when negative)",
            ],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n\nA regime passing at the first Holm step's level passes under Holm, so the product of the three "
        "powers is a lower bound on the chance that all three pass when they are independent; each regime's own "
        f"power is at least {POWER:.0%} only under the primary assumption, and falls where the true difference is "
        "negative (the last column).\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ADAPTIVE_RESULTS, help="folder with runs/ and fitted_runs/")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the report to write (or to check)")
    parser.add_argument("--check", action="store_true", help="fail if the rebuilt report differs from the committed")
    cli = parser.parse_args(argv)
    text = build(cli.results)
    if cli.check:
        same = cli.output.exists() and cli.output.read_text() == text
        print("the committed power analysis rebuilds" if same else f"{cli.output} differs from its rebuild")
        return 0 if same else 1
    cli.output.parent.mkdir(parents=True, exist_ok=True)
    cli.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
