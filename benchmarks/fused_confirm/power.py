"""The seeds of the confirmatory test of fused rounds (BENCHMARKS.md section 10), from the paired spreads the section
measured: `benchmarks/results/fused_confirm/power.md`.

    python benchmarks/fused_confirm/power.py            # writes power.md
    python benchmarks/fused_confirm/power.py --check    # fails if the committed power.md differs from a rebuild

The spread of each regime is that of the corrected fused probe minus the serial probe in section 10's runs (pairs run
on one machine where section 10 reran them: `carries` and `arithmetic`), and each regime runs the seeds that the
upper 80% confidence bound of its SD asks for (a margin for the SD's own uncertainty): statsmodels' `TTestPower`,
one-sided non-inferiority at margin 0.015, true difference 0, power 0.8 at the first Holm level (0.05 / 4), at
least 8. The seeds are fresh: from `FIRST_SEED` on, none of which section 8 or 10 ran.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.fused.power import MARGIN, POWER, power_at, sd_upper, seeds_needed  # noqa: E402
from benchmarks.stale_rollouts.power import (  # noqa: E402
    ALPHA,
    CORRECTED,
    HOLM_FIRST,
    MIN_SEEDS,
    REGIMES,
    SERIAL,
    paired,
    runs_of,
)
from benchmarks.stale_rollouts.report import same_machine  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results" / "fused_confirm"
FIRST_SEED = 100
"""The first seed of the confirmatory runs (section 8 and 10 ran seeds 0-22)."""


def seeds() -> dict[str, list[int]]:
    """The seeds each regime runs (the table of `power.md`)."""
    out = {}
    for regime in REGIMES:
        arms = runs_of(regime)
        d = paired(same_machine(regime, arms) or arms, CORRECTED, SERIAL)
        count = max(math.ceil(seeds_needed(sd_upper(float(d.std(ddof=1)), len(d)), alpha=HOLM_FIRST)), MIN_SEEDS)
        out[regime] = list(range(FIRST_SEED, FIRST_SEED + count))
    return out


def build(results: Path = RESULTS) -> str:
    planned = seeds()
    rows = []
    for regime, name in REGIMES.items():
        arms = runs_of(regime)
        here = same_machine(regime, arms)
        d = paired(here or arms, CORRECTED, SERIAL)
        sd, n = float(d.std(ddof=1)), len(d)
        upper, count = sd_upper(sd, n), len(planned[regime])
        rows.append([
            name, "on one machine" if here else "as declared", str(n), f"{d.mean():+.4f}", f"{sd:.4f}", f"{upper:.4f}",
            str(count), f"{planned[regime][0]}-{planned[regime][-1]}", f"{power_at(count, sd, 0.0, HOLM_FIRST):.2f}",
            f"{power_at(count, upper, 0.0, HOLM_FIRST):.2f}",
        ])  # fmt: skip
    headers = ["regime", "section 10's pairs", "seeds", "mean", "paired SD", "SD, upper 80% bound", "seeds to run",
               "seeds", "power at the SD", "power at the bound"]  # fmt: skip
    return (
        "# Seeds of the confirmatory test of fused rounds, rebuilt by benchmarks/fused_confirm/power.py\n\n"
        "Section 10's paired spread of the corrected fused probe minus the serial probe (in-domain, mean of the last "
        f"3 evaluations), and the seeds its upper 80% bound asks for: one-sided non-inferiority at margin {MARGIN}, "
        f"true difference 0, power {POWER} at level {HOLM_FIRST:.4f} (the first Holm level, family-wise {ALPHA}), at "
        f"least {MIN_SEEDS}. Fresh seeds, from {FIRST_SEED}.\n\n"
        + tabulate(rows, headers, tablefmt="github", disable_numparse=True)
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    return report_main(lambda results, figures: build(results), RESULTS, __doc__.splitlines()[0], argv, "power.md")


if __name__ == "__main__":
    sys.exit(main())
