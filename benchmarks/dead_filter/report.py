"""The dead-filter study's report (issue #71's dynamic-sampling control), rebuilt from its raw results.

    python benchmarks/dead_filter/report.py            # writes report.md and its figure
    python benchmarks/dead_filter/report.py --check    # fails if the committed report.md differs from a rebuild

The order is the protocol's (`benchmarks/results/dead_filter/protocol.md`): the manipulation check (the filter's
updates held its live groups alone, about as many a step as the pruned arm's), computed before any outcome, then the
declared test, then the secondary outcomes. The pruned arm's and the smaller batch's runs are the smaller-batch
study's; the tests are the epoch-exploration study's (`benchmarks/epoch_exploration/report.py`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.addition_pruning.report import assemble, budget_rows, load_runs, paired  # noqa: E402
from benchmarks.addition_pruning.run import PROTOCOL  # noqa: E402
from benchmarks.dead_filter.run import ARMS, RESULTS  # noqa: E402
from benchmarks.epoch_exploration.report import every_arm, table, tests  # noqa: E402
from benchmarks.fused.report import interval  # noqa: E402
from benchmarks.smaller_batch import run as smaller  # noqa: E402


TESTS = (
    ("grpo_prune", "grpo_filter", "skipping predicted-dead prompts against filtering dead groups, at equal rollouts"),
)
"""The declared test: (arm, minus arm, what the difference isolates), two-sided at R."""
PLANNED_PAIRED_SD = 0.0309
"""The paired SD the seeds were read against (the smaller-batch study's)."""
LIVE_TOLERANCE = 0.1
"""The check: the filter's live groups a step within this share of the pruned arm's."""


def to_budget(record: dict) -> list[dict]:
    """A run's logged steps up to the one that reaches R."""
    prompts = record["settings"].get("prompts_per_step", PROTOCOL["prompts_per_step"])
    last = PROTOCOL["rollout_budget"] // (prompts * PROTOCOL["num_generations"])
    return [e for e in record["steps"] if e["step"] <= last]


def live_a_step(seeds: dict) -> float:
    steps = [e for r in seeds.values() for e in to_budget(r)]
    return (
        float(np.mean([(1 - e["lze/dead_frac"]) * e["lze/fresh_rollouts"] for e in steps]))
        / PROTOCOL["num_generations"]
    )


def manipulation(runs: dict) -> tuple[list[str], dict[str, bool]]:
    """The check's table and whether it is met (the filter's updates held its live groups alone, as many a step)."""
    rows, live, gaps = [], {}, {}
    for arm, seeds in runs.items():
        steps = [e for r in seeds.values() for e in to_budget(r)]
        gaps[arm] = max(abs(e["lze/selected_frac"] - (1 - e["lze/dead_frac"])) for e in steps)
        live[arm] = live_a_step(seeds)
        dead, kept = (np.mean([e[f"lze/{name}_frac"] for e in steps]) for name in ("dead", "selected"))
        rows.append([f"`{arm}`", len(seeds), len(steps), f"{dead:.3f}", f"{kept:.3f}", f"{gaps[arm]:.1e}",
                     f"{live[arm]:.1f}"])  # fmt: skip
    ok = (
        "grpo_filter" in live
        and "grpo_prune" in live
        and gaps["grpo_filter"] <= 1e-9
        and abs(live["grpo_filter"] / live["grpo_prune"] - 1) <= LIVE_TOLERANCE
    )
    headers = ["arm", "seeds", "steps to R", "dead share", "kept share (the update)",
               "largest gap, kept against live", "live groups a step"]  # fmt: skip
    out = [
        "## The manipulation check (before any outcome)\n",
        "Up to R, from each logged step: the dead share of the generated groups, the share the update kept, the "
        "largest gap between the kept share and the live share on any step, and the live groups a step.\n",
        table(rows, headers),
        f"Required: `grpo_filter` keeps its live groups alone on every step (gap at most 1e-9) and generates within "
        f"{LIVE_TOLERANCE:.0%} of `grpo_prune`'s live groups a step: **{'met' if ok else 'not met'}**. "
        + " ".join(budget_rows(runs))
        + "\n",
    ]
    return out, {"grpo_filter": bool(ok)}


def arms_section(runs: dict) -> list[str]:
    differences = [
        [f"`{arm}` - `{other}`", f"{split} at R", interval(paired(runs, arm, other, "budget", split))]
        for arm, other, split in (("grpo_filter", "grpo_small", "test"), ("grpo_prune", "grpo_filter", "ood"))
    ]
    return every_arm(runs, differences, "Outside the declared test (no correction; descriptive):\n")


def sections(runs: dict) -> list[str]:
    check, valid = manipulation(runs)
    declared = tests(runs, valid, TESTS, PLANNED_PAIRED_SD, ("grpo_prune", "grpo_filter"))
    return [*check, *declared, *arms_section(runs)]


def build(results: Path = RESULTS, figures: bool = False) -> str:
    own = load_runs(results, ARMS)
    runs = {**load_runs(smaller.RESULTS, {"grpo_small": None, "grpo_prune": None}), **own} if own else {}
    script = "benchmarks/dead_filter/report.py"
    return assemble("Dead-filter pruning study", script, runs, results, figures, sections)


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
