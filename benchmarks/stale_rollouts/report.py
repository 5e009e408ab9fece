"""The report of BENCHMARKS.md section 10 (fused rounds with the stale-rollout correction against serial rounds),
rebuilt from the committed raw results (fused rounds, the probe and the adaptive budget left the library with
BENCHMARKS.md section 15's verdict; the runners of these runs are at commit 11e6ad3):

    python benchmarks/stale_rollouts/report.py            # writes benchmarks/results/stale_rollouts/report.md
    python benchmarks/stale_rollouts/report.py --check    # rebuilds the report and fails if it differs

Reads every run of a regime (`power.runs_of`: section 8's runs, this section's pilot and runs). The pre-declared test
(`protocol.md` beside the report): per regime, the corrected fused probe minus the serial probe in in-domain accuracy
(the mean of the last 3 evaluations), paired by seed; a one-sided paired t-test of non-inferiority, H0: mean
difference <= -0.015; Holm over the 4 regimes at family-wise 0.05 (`benchmarks.fused.report.decide`). Secondary rows
(no test): every other pair of arms that ran on the same seeds, in-domain and OOD, and their fresh rollouts.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.frontier.report import load  # noqa: E402
from benchmarks.fused.power import MARGIN  # noqa: E402
from benchmarks.fused.report import decide, interval, number  # noqa: E402
from benchmarks.stale_rollouts.power import (  # noqa: E402
    ADAPTIVE,
    ALPHA,
    CORRECTED,
    PROBE,
    REGIMES,
    RESULTS,
    SERIAL,
    UNCORRECTED,
    paired,
    runs_of,
)


FILL = PROBE + ",fuse_rounds=false,empty_fill"
"""The label of the fill ablation's runs (`fill_runs/`: serial rounds whose first update trains nothing; its runner,
`benchmarks/stale_rollouts/fill.py`, at commit 11e6ad3)."""
A_SERIAL = ADAPTIVE + ",fuse_rounds=false"
A_CORRECTED = ADAPTIVE + ",fuse_rounds=true,vllm_importance_sampling_correction=true"
A_UNCORRECTED = ADAPTIVE + ",fuse_rounds=true,vllm_importance_sampling_correction=false"
SHORT = {  # the arms' names in the tables
    SERIAL: "probe, serial",
    CORRECTED: "probe, fused, corrected",
    UNCORRECTED: "probe, fused, uncorrected",
    A_SERIAL: "adaptive, serial",
    A_CORRECTED: "adaptive, fused, corrected",
    A_UNCORRECTED: "adaptive, fused, uncorrected",
    FILL: "probe, serial, empty fill",
    "grpo": "GRPO",
}
PAIRS = [  # (arm, other): the secondary comparisons, in this order
    (UNCORRECTED, SERIAL),
    (CORRECTED, UNCORRECTED),
    (FILL, SERIAL),
    (CORRECTED, FILL),
    (A_CORRECTED, A_SERIAL),
    (A_UNCORRECTED, A_SERIAL),
    (A_CORRECTED, A_UNCORRECTED),
    (SERIAL, "grpo"),
    (CORRECTED, "grpo"),
    (A_SERIAL, "grpo"),
    (A_CORRECTED, "grpo"),
]


def same_machine(regime: str, arms: dict, results: Path = RESULTS) -> dict:
    """`arms` with the serial and uncorrected runs that were rerun on the machine of this section's runs
    (`same_machine/`), in place of section 8's: `arithmetic`'s warm start is trained at run time, and section 8's
    machine trained another one (its start accuracy differs), so its pairs do not share a start."""
    here = load(sorted(str(p) for p in (results / "same_machine").glob(f"{regime}_s*")))
    return {**arms, **here} if here else {}


def start_accuracy(arms: dict, arm: str) -> str:
    """The in-domain accuracy `arm`'s runs started from (one value when every seed started alike)."""
    starts = sorted({round(run["curve"][0]["test_accuracy"], 4) for run in arms.get(arm, {}).values()})
    return ", ".join(f"{s:.4f}" for s in starts) or "n/a"


def build(results: Path = RESULTS, figures: bool = False) -> str:
    """The whole report (Markdown) from the committed runs (`figures` is unused: the report has none)."""
    runs = {regime: runs_of(regime, results) for regime in REGIMES}
    test = {regime: paired(arms, CORRECTED, SERIAL) for regime, arms in runs.items()}
    decision = decide(test, ALPHA, MARGIN)
    rows = [
        [
            REGIMES[r],
            str(d["seeds"]),
            number(d["mean"], "+.4f"),
            number(d["sd"], ".4f"),
            number(d["p"], ".4f"),
            f"{d['step']} ({d['level']:.4f})",
            number(d["lower"], "+.4f"),
            "non-inferior" if d["passes"] else ("not tested (< 2 seeds)" if math.isnan(d["p"]) else "not shown"),
        ]
        for r, d in decision.items()
    ]
    passed = sum(d["passes"] for d in decision.values())
    verdict = "fused rounds become the default" if passed == len(decision) else "serial rounds stay the default"
    starts = [
        [REGIMES[r], SHORT[arm], start_accuracy(arms, arm)] for r, arms in runs.items() for arm in SHORT if arm in arms
    ]
    here = {regime: same_machine(regime, arms, results) for regime, arms in runs.items()}
    rerun_test = {r: paired(here[r], CORRECTED, SERIAL) if here[r] else test[r] for r in REGIMES}
    rerun = [
        [
            REGIMES[r],
            "rerun on one machine" if here[r] else "as declared",
            start_accuracy(here[r] or runs[r], SERIAL),
            str(d["seeds"]),
            number(d["mean"], "+.4f"),
            number(d["p"], ".4f"),
            f"{d['step']} ({d['level']:.4f})",
            number(d["lower"], "+.4f"),
            "non-inferior" if d["passes"] else "not shown",
        ]
        for r, d in decide(rerun_test, ALPHA, MARGIN).items()
    ]
    for regime in REGIMES:
        if here[regime]:  # the rerun's own secondary rows: its serial and uncorrected runs with the corrected ones
            rerun_arms = load(sorted(str(p) for p in (results / "same_machine").glob(f"{regime}_s*")))
            runs[f"{regime}, rerun"] = {**rerun_arms, CORRECTED: runs[regime][CORRECTED]}
            if FILL in runs[regime]:
                runs[f"{regime}, rerun"][FILL] = runs[regime][FILL]
    secondary = []
    for regime, arms in runs.items():
        for arm, other in PAIRS:
            seeds = sorted(set(arms.get(arm, {})) & set(arms.get(other, {})))
            if len(seeds) < 2:
                continue
            ratio = np.mean(
                [arms[arm][s]["summary"]["rollouts"] / arms[other][s]["summary"]["rollouts"] for s in seeds]
            )
            secondary.append(
                [
                    REGIMES[regime] if regime in REGIMES else f"{REGIMES[regime.split(',')[0]]}, rerun on one machine",
                    f"{SHORT[arm]} - {SHORT[other]}",
                    str(len(seeds)),
                    interval(paired(arms, arm, other, "test_accuracy")),
                    interval(paired(arms, arm, other, "ood_accuracy")),
                    f"{ratio:.3f}x",
                ]
            )
    labels = "\n".join(f"- {name}: `{label}`" for label, name in SHORT.items())
    return (
        "# Fused rounds with the stale-rollout correction (BENCHMARKS.md section 10), rebuilt by "
        "benchmarks/stale_rollouts/report.py\n\n"
        f"The arms:\n\n{labels}\n\n"
        "## The test per regime\n\n"
        f"Probe, fused, corrected minus probe, serial: in-domain accuracy (mean of the last 3 evaluations), paired by "
        f"seed; one-sided paired t-test of H0: mean difference <= -{MARGIN}; Holm over the {len(REGIMES)} regimes at "
        f"{ALPHA}; the lower bound is the one-sided t bound at the level of the regime's Holm step.\n\n"
        + tabulate(
            rows,
            ["regime", "seeds", "mean difference", "paired SD", "p", "Holm step (level)", "lower bound", "verdict"],
            tablefmt="github",
            disable_numparse=True,
        )
        + f"\n\nNon-inferior in {passed} of {len(decision)} regimes: {verdict}.\n\n"
        + "## Where each arm started\n\nThe in-domain accuracy at step 0 of each arm's runs (a pair shares its start "
        "only where these agree: `arithmetic`'s warm start is trained at run time, and section 8's machine trained "
        "another one, so every `arithmetic` pair of a section 8 run with a run of this section is confounded).\n\n"
        + tabulate(starts, ["regime", "arm", "start accuracy"], tablefmt="github", disable_numparse=True)
        + "\n\n## Rerun on one machine\n\nThe same test with the serial and uncorrected probes rerun on the "
        "machine of the corrected runs (`same_machine/`) where they were: `arithmetic`'s section 8 runs started "
        "from another warm start, so its pairs did not share a start. A sensitivity result after the runs, not the "
        "pre-declared test.\n\n"
        + tabulate(
            rerun,
            [
                "regime",
                "pairs",
                "start accuracy",
                "seeds",
                "mean difference",
                "p",
                "Holm step (level)",
                "lower bound",
                "verdict",
            ],
            tablefmt="github",
            disable_numparse=True,
        )  # fmt: skip
        + "\n\n"
        + "## Secondary (no test; 95% t intervals of the paired differences)\n\n"
        + tabulate(
            secondary,
            ["regime", "comparison", "seeds", "in-domain", "OOD", "fresh rollouts, ratio"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
