"""The smaller-batch pruning study's report (issue #71's bar), rebuilt from its raw results.

    python benchmarks/smaller_batch/report.py            # writes report.md and its figure
    python benchmarks/smaller_batch/report.py --check    # fails if the committed report.md differs from a rebuild

The order is the protocol's (`benchmarks/results/smaller_batch/protocol.md`): the manipulation check against the
smaller batch's shares, computed before any outcome, then the two declared tests (Holm, a void test counted with
p = 1), then the secondary outcomes. The check's columns and the tests are the epoch-exploration study's
(`benchmarks/epoch_exploration/report.py`).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.addition_pruning.report import assemble, load_runs, paired  # noqa: E402
from benchmarks.epoch_exploration.report import RATIO_NEEDED, check_lines, check_row, every_arm, tests  # noqa: E402
from benchmarks.fused.report import interval  # noqa: E402
from benchmarks.smaller_batch.run import ARMS, RESULTS  # noqa: E402
from benchmarks.smollm2_pruning.report import transitions_section  # noqa: E402


CONTROL = "grpo_small"
"""The random choice of as many prompts a step and the bar: GRPO at B'."""
PRUNED = ("grpo_prune", "grpo_prune_small")
TESTS = (
    ("grpo_prune", CONTROL, "pruning at the user's batch against the smaller batch alone, at equal rollouts"),
    ("grpo_prune_small", CONTROL, "the choice at equal rollouts and prompts a step"),
)
"""The declared tests: (arm, minus arm, what the difference isolates), two-sided at R, Holm over the two."""
PLANNED_PAIRED_SD = 0.0213
"""The paired SD the seeds were sized with (the epoch-exploration study's)."""


def manipulation(runs: dict) -> tuple[list[str], dict[str, bool]]:
    """The check's table and, per pruned arm, whether both its shares are at most half of the smaller batch's."""
    rows, shares = [], {}
    for arm, seeds in runs.items():
        row, shares[arm] = check_row(arm, seeds)
        rows.append(row)
    control = shares.get(CONTROL, (math.nan, math.nan))
    valid = {arm: arm in runs and all(x <= RATIO_NEEDED * c for x, c in zip(shares[arm], control)) for arm in PRUNED}
    required = (
        f"Required (the random choice of as many prompts is `{CONTROL}`): each pruned arm's all-wrong share at most "
        f"{RATIO_NEEDED} of `{CONTROL}`'s ({control[0]:.3f}), and its share of visits after an all-right group at "
        f"most {RATIO_NEEDED} of `{CONTROL}`'s ({control[1]:.3f}). "
    )
    out = ["## The manipulation check (before any outcome)\n", *check_lines(runs, rows, required, valid)]
    return out, valid


def arms_section(runs: dict) -> list[str]:
    differences = [[f"`{arm}` - `{other}`", "ood at R", interval(paired(runs, arm, other, "budget", "ood"))]
                   for arm, other, _ in TESTS]  # fmt: skip
    d = paired(runs, "grpo_prune", "grpo_prune_small", "budget")
    if len(d) >= 2:
        differences.append(["`grpo_prune` - `grpo_prune_small`", "test at R", interval(d)])
    return every_arm(runs, differences, "Outside the declared tests (no correction; descriptive):\n")


def sections(runs: dict) -> list[str]:
    check, valid = manipulation(runs)
    declared = tests(runs, valid, TESTS, PLANNED_PAIRED_SD, ("grpo_prune", CONTROL))
    return [*check, *declared, *arms_section(runs), *transitions_section(runs)]


def build(results: Path = RESULTS, figures: bool = False) -> str:
    script = "benchmarks/smaller_batch/report.py"
    return assemble("Smaller-batch pruning study", script, load_runs(results, ARMS), results, figures, sections)


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
