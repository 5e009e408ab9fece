"""The report of BENCHMARKS.md section 8 (fused rounds as the default), rebuilt from the committed raw results:

    python benchmarks/fused/report.py            # writes benchmarks/results/fused/report.md
    python benchmarks/fused/report.py --check    # rebuilds the report and fails if it differs from the committed

Reads `benchmarks/results/fused/runs/<regime>_s<seed>/seed_<seed>/demo_results.json.gz` (written by `run.sh`, at commit
11e6ad3: fused rounds left the library with BENCHMARKS.md section 15's verdict), with however many seeds are there. Its
statistics (`decide`, `interval`, `number`) serve every later study's report. The pre-declared test (BENCHMARKS.md
section 8, seed count in `power.md` beside the report, written by `power.py`): per regime, the fused probe minus GRPO
in in-domain accuracy (the mean of the last 3 evaluations, `benchmarks.frontier.report.smoothed_final`), paired by
seed; a one-sided paired t-test of non-inferiority, H0: mean difference <= -0.015
(`scipy.stats.ttest_1samp(differences, -0.015, alternative="greater")`); Holm over the 3 regimes at family-wise 0.05
(`statsmodels`' `multipletests`). The lower bound reported per regime is the one-sided (1 - alpha_i) t lower confidence
bound of the mean difference, alpha_i = 0.05 / (4 - i) the level of the regime's Holm step i (its rank by p-value): it
is above -0.015 exactly when the regime's p-value is below its step's level; a regime after a step where Holm stopped
fails whatever its bound. The fused mode becomes the default if all three regimes pass. Secondary rows (OOD accuracy,
fresh rollouts, the serial probe where it ran) have no test.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import BASELINE, REGIMES, report_main  # noqa: E402
from benchmarks.frontier.report import half_width, load, smoothed_final  # noqa: E402
from benchmarks.fused.power import ALPHA, FUSED, MARGIN  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results" / "fused"
SERIAL = FUSED + ",fuse_rounds=false"  # the secondary arm: the same rounds, one generation call after another


def final(method: dict, metric: str) -> float:
    """A run's mean of `metric` (`test_accuracy`, `ood_accuracy`) over its last 3 evaluations."""
    return smoothed_final(method["curve"], metric)


def paired(arms: dict, arm: str, other: str, metric: str) -> pd.Series:
    """`arm` minus `other` in `metric` (last 3 evaluations) by seed, over the seeds both ran."""
    seeds = sorted(set(arms.get(arm, {})) & set(arms.get(other, {})))
    return pd.Series({s: final(arms[arm][s], metric) - final(arms[other][s], metric) for s in seeds}, dtype=float)


def non_inferiority(differences: pd.Series, margin: float = MARGIN) -> float:
    """The one-sided paired t-test's p-value of H0: mean difference <= -`margin` (NaN with fewer than 2 seeds)."""
    values = differences.to_numpy(dtype=float)
    if len(values) < 2:
        return math.nan
    if values.std(ddof=1) == 0:  # the same difference on every seed
        return 0.0 if values.mean() > -margin else 1.0
    return float(stats.ttest_1samp(values, -margin, alternative="greater").pvalue)


def lower_bound(differences: pd.Series, alpha: float) -> float:
    """The one-sided (1 - `alpha`) t lower confidence bound of the mean difference."""
    values = differences.to_numpy(dtype=float)
    if len(values) < 2:
        return math.nan
    return float(stats.ttest_1samp(values, 0.0, alternative="greater").confidence_interval(1 - alpha).low)


def interval(values: pd.Series) -> str:
    """`mean [95% t interval]` of paired differences (`n/a` without any, the mean alone for one)."""
    values = values.dropna().astype(float)
    if len(values) == 0:
        return "n/a"
    mean = values.mean()
    if len(values) < 2:
        return f"{mean:+.4f}"
    half = half_width(values)
    return f"{mean:+.4f} [{mean - half:+.4f}, {mean + half:+.4f}]"


def decide(differences: dict[str, pd.Series], alpha: float = ALPHA, margin: float = MARGIN) -> dict[str, dict]:
    """Per regime: the test's p-value, the Holm step and its level, the lower bound at that level, the Holm-adjusted
    p-value and whether Holm rejects non-inferiority's H0. A regime with fewer than 2 seeds enters Holm with p = 1
    (it cannot pass), so the family stays the 3 regimes."""
    regimes = list(differences)
    p = np.array([non_inferiority(differences[r], margin) for r in regimes])
    tested = np.where(np.isnan(p), 1.0, p)
    reject, adjusted = multipletests(tested, alpha=alpha, method="holm")[:2]
    order = np.argsort(tested, kind="stable")
    out = {}
    for step, i in enumerate(order, start=1):
        level = alpha / (len(regimes) - step + 1)
        d = differences[regimes[i]]
        out[regimes[i]] = {
            "seeds": len(d),
            "mean": float(d.mean()) if len(d) else math.nan,
            "sd": float(d.std(ddof=1)) if len(d) > 1 else math.nan,
            "p": float(p[i]),
            "step": step,
            "level": level,
            "lower": lower_bound(d, level),
            "holm_p": float(adjusted[i]) if not np.isnan(p[i]) else math.nan,
            "passes": bool(reject[i]) and not np.isnan(p[i]),
        }
    return {r: out[r] for r in regimes}


def declared_seeds(results: Path) -> int | None:
    """The seed count fixed in `power.md` beside the report (None without one)."""
    path = results / "power.md"
    found = re.search(r"^\| seeds per regime\s*\|\s*(\d+)", path.read_text(), re.M) if path.exists() else None
    return int(found[1]) if found else None


def number(value: float, form: str) -> str:
    return "n/a" if math.isnan(value) else format(value, form)


def build(results: Path = RESULTS, figures: bool = False) -> str:
    """The whole report (Markdown) from `results/runs` (`figures` is unused: the report has none)."""
    runs = {regime: load(sorted(str(p) for p in (results / "runs").glob(f"{regime}_s*"))) for regime in REGIMES}
    test = {regime: paired(arms, FUSED, BASELINE, "test_accuracy") for regime, arms in runs.items()}
    decision = decide(test)
    declared = declared_seeds(results)
    rows = [
        [
            REGIMES[r],
            str(d["seeds"]),
            ", ".join(map(str, test[r].index)) or "none",
            number(d["mean"], "+.4f"),
            number(d["sd"], ".4f"),
            number(d["p"], ".4f"),
            f"{d['step']} ({d['level']:.4f})",
            number(d["lower"], "+.4f"),
            number(d["holm_p"], ".4f"),
            "non-inferior" if d["passes"] else ("not tested (< 2 seeds)" if math.isnan(d["p"]) else "not shown"),
        ]
        for r, d in decision.items()
    ]
    passed = sum(d["passes"] for d in decision.values())
    verdict = "default" if passed == len(decision) else "opt-in"
    smallest = min(d["seeds"] for d in decision.values())
    if all(d["seeds"] < 2 for d in decision.values()):  # nothing tested yet
        verdict, seeds = "pending (no runs)", f"no: 0 of {declared or '?'} seeds"
    elif declared is None:
        seeds = "not declared (no power.md beside the report)"
    elif smallest >= declared:
        seeds = f"yes ({declared} per regime)"
    else:
        verdict, seeds = f"pending ({verdict} on these seeds)", f"no: {smallest} of {declared} in the smallest regime"
    overall = [[f"{passed} of {len(decision)}", verdict, seeds]]
    secondary = []
    for regime, arms in runs.items():
        for arm, other in ((FUSED, BASELINE), (SERIAL, BASELINE), (FUSED, SERIAL)):
            both = sorted(set(arms.get(arm, {})) & set(arms.get(other, {})))
            if not both:
                continue
            ratio = np.mean(
                [arms[arm][s]["summary"]["rollouts"] / arms[other][s]["summary"]["rollouts"] for s in both]
            )
            secondary.append(
                [
                    REGIMES[regime],
                    f"`{arm}` - `{other}`",
                    str(len(both)),
                    interval(paired(arms, arm, other, "test_accuracy")),
                    interval(paired(arms, arm, other, "ood_accuracy")),
                    f"{ratio:.3f}x",
                ]
            )
    per_seed = [
        [
            REGIMES[regime],
            str(s),
            f"{final(arms[BASELINE][s], 'test_accuracy'):.4f}",
            f"{final(arms[FUSED][s], 'test_accuracy'):.4f}",
            f"{test[regime][s]:+.4f}",
        ]
        for regime, arms in runs.items()
        for s in test[regime].index
    ]
    head = "# Fused rounds against GRPO (BENCHMARKS.md section 8), rebuilt by benchmarks/fused/report.py\n\n"
    intro = (
        f"The pre-declared test: `{FUSED}` (fused rounds) minus `{BASELINE}`, in-domain accuracy (mean of the last 3 "
        f"evaluations), paired by seed; one-sided paired t-test of H0: mean difference <= -{MARGIN}; Holm over the "
        f"{len(REGIMES)} regimes at {ALPHA}. The lower bound is the one-sided (1 - alpha_i) t lower confidence bound "
        "at the level alpha_i of the regime's Holm step (in brackets after the step): above the margin exactly when "
        "the p-value is below that level; a regime after a step where Holm stopped is not shown non-inferior "
        "whatever its bound. The pre-declared seed count is in power.md.\n"
    )
    return (
        head
        + intro
        + "\n## The test per regime\n\n"
        + tabulate(
            rows,
            [
                "regime",
                "seeds",
                "which",
                "in-domain - GRPO",
                "paired SD",
                "p (H0: <= -margin)",
                "Holm step (level)",
                "lower bound at that level",
                "Holm p",
                "verdict",
            ],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n\n## The decision\n\n"
        + tabulate(
            overall,
            ["regimes non-inferior", "fused rounds", "pre-declared seeds all run"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n\n## Secondary: no test (paired by seed, mean [95% t interval])\n\n"
        + (
            tabulate(
                secondary,
                ["regime", "comparison", "seeds", "in-domain", "OOD", "fresh rollouts / the other's"],
                tablefmt="github",
                disable_numparse=True,
            )
            if secondary
            else "No runs yet."
        )
        + "\n\n## In-domain accuracy per seed (mean of the last 3 evaluations)\n\n"
        + (
            tabulate(
                per_seed, ["regime", "seed", "GRPO", "fused", "difference"], tablefmt="github", disable_numparse=True
            )
            if per_seed
            else "No runs yet."
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
