"""The confirmatory test of fused rounds on vLLM (BENCHMARKS.md section 10): the serial and the corrected fused probe
with vLLM colocate, on its CPU build, in the four regimes; protocol in `benchmarks/results/fused_confirm/vllm/`.

    python benchmarks/fused_confirm/on_vllm.py power [--check]     # the seeds: vllm/power.md
    python benchmarks/fused_confirm/on_vllm.py report [--check]    # vllm/report.md from vllm/runs

The seeds of each regime are those the upper 80% bound of the transformers confirmatory test's paired SD asks for
(`benchmarks/results/fused_confirm/runs`), with its margin, power and Holm level (`power.py`); fresh: from
`FIRST_SEED`. Fused rounds and the probe left the library (BENCHMARKS.md section 15): the runs are committed and the
reports rebuild from them; the commands that ran them (`jobs`, `arms`, `train`) are at commit 11e6ad3.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.frontier.report import load  # noqa: E402
from benchmarks.fused.power import MARGIN, POWER, power_at, sd_upper, seeds_needed  # noqa: E402
from benchmarks.fused_confirm import power, report  # noqa: E402
from benchmarks.stale_rollouts.power import ALPHA, HOLM_FIRST, MIN_SEEDS, PROBE, REGIMES, paired  # noqa: E402


RESULTS = power.RESULTS / "vllm"
FIRST_SEED = 200
"""The first seed of the vLLM runs (the transformers confirmatory test ran 100-139)."""
VLLM = ",use_vllm=true,vllm_mode=colocate,vllm_importance_sampling_correction=true"
SERIAL = PROBE + VLLM + ",fuse_rounds=false"
CORRECTED = PROBE + VLLM + ",fuse_rounds=true"


def transformers_pairs(regime: str) -> object:
    """The corrected fused probe minus the serial probe by seed in the transformers confirmatory test's runs."""
    runs = load(sorted(str(p) for p in (power.RESULTS / "runs").glob(f"{regime}_s*")))
    return paired(runs, power.CORRECTED, power.SERIAL)


def seeds() -> dict[str, list[int]]:
    """The seeds each regime runs on vLLM (the table of `vllm/power.md`)."""
    out = {}
    for regime in REGIMES:
        d = transformers_pairs(regime)
        count = max(math.ceil(seeds_needed(sd_upper(float(d.std(ddof=1)), len(d)), alpha=HOLM_FIRST)), MIN_SEEDS)
        out[regime] = list(range(FIRST_SEED, FIRST_SEED + count))
    return out


def build_power(results: Path = RESULTS, figures: bool = False) -> str:
    """`vllm/power.md`: per regime the transformers test's paired spread and the seeds its upper 80% bound asks for."""
    planned, rows = seeds(), []
    for regime, name in REGIMES.items():
        d = transformers_pairs(regime)
        sd, n = float(d.std(ddof=1)), len(d)
        upper, count = sd_upper(sd, n), len(planned[regime])
        rows.append([
            name, str(n), f"{d.mean():+.4f}", f"{sd:.4f}", f"{upper:.4f}", str(count),
            f"{planned[regime][0]}-{planned[regime][-1]}", f"{power_at(count, sd, 0.0, HOLM_FIRST):.2f}",
            f"{power_at(count, upper, 0.0, HOLM_FIRST):.2f}",
        ])  # fmt: skip
    headers = ["regime", "pairs", "mean", "paired SD", "SD, upper 80% bound", "seeds to run", "seeds",
               "power at the SD", "power at the bound"]  # fmt: skip
    return (
        "# Seeds of the confirmatory test of fused rounds on vLLM, rebuilt by benchmarks/fused_confirm/on_vllm.py\n\n"
        "The transformers confirmatory test's paired spread of the corrected fused probe minus the serial probe "
        "(in-domain, mean of the last 3 evaluations), and the seeds its upper 80% bound asks for: one-sided "
        f"non-inferiority at margin {MARGIN}, true difference 0, power {POWER} at level {HOLM_FIRST:.4f} (the first "
        f"Holm level, family-wise {ALPHA}), at least {MIN_SEEDS}. Fresh seeds, from {FIRST_SEED}.\n\n"
        + tabulate(rows, headers, tablefmt="github", disable_numparse=True)
        + "\n"
    )


def build_report(results: Path = RESULTS, figures: bool = False) -> str:
    """`vllm/report.md`: the declared test and the secondary table of `vllm/runs`."""
    return (
        "# The confirmatory test of fused rounds on vLLM (BENCHMARKS.md section 10), rebuilt by "
        "benchmarks/fused_confirm/on_vllm.py\n\n"
        "vLLM colocate on its CPU build (`make test-vllm`'s environment), which returns the sampling "
        "log-probabilities TRL's correction uses for every row, fresh or stale, in both arms.\n\n"
        + report.declared_test(results, seeds(), CORRECTED, SERIAL)
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    what, rest = (argv[0], argv[1:]) if argv else ("", [])
    if what in ("power", "report"):
        build = build_power if what == "power" else build_report
        return report_main(build, RESULTS, __doc__.splitlines()[0], rest, f"{what}.md")
    print("usage: on_vllm.py power|report [--check]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
