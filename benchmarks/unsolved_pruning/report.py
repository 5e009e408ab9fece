"""The unsolved-side pruning study's report (issue #71), rebuilt from its raw results.

    python benchmarks/unsolved_pruning/report.py            # writes report.md and its figure
    python benchmarks/unsolved_pruning/report.py --check    # fails if the committed report.md differs from a rebuild

The order is the protocol's (`benchmarks/results/unsolved_pruning/protocol.md`): the manipulation check, computed
before any outcome, then the declared test and the difference its seeds can detect, then the secondary outcomes. The
records, the evaluation points and the later-visit counts are the addition pruning study's
(`benchmarks/addition_pruning/report.py`).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.power import TTestPower
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.addition_pruning.report import (  # noqa: E402
    accuracy,
    assemble,
    budget_rows,
    load_runs,
    mean_sd,
    paired,
    to_budget,
)
from benchmarks.addition_pruning.run import PROTOCOL  # noqa: E402
from benchmarks.fused.report import interval  # noqa: E402
from benchmarks.smollm2_pruning.report import (  # noqa: E402
    ALPHA,
    TEST_HEADERS,
    declared_rows,
    later_visits,
    pooled_error_sd,
    transitions_section,
)
from benchmarks.unsolved_pruning.run import ARMS, RESULTS  # noqa: E402


ADDITION = ROOT / "benchmarks" / "results" / "addition_pruning"
"""The addition pruning study's results, whose `grpo` seeds this study's reproduce."""
TEST = ("grpo_prune_unsolved", "grpo", "budget", "the choice at equal rollouts and prompts a step", None)
"""The declared test: (arm, minus arm, the evaluation point, what the difference isolates, `None`: two-sided)."""
DEAD_RATIO_NEEDED = 0.5
"""The manipulation check: the pruned arm's all-wrong share of later visits at most this share of GRPO's."""
POWER, PLANNED_PAIRED_SD = 0.8, 0.0270
"""The power the seeds were sized for, and the paired SD they were sized with (the addition study's)."""


def later_shares(seeds: dict[int, dict[str, Any]]) -> tuple[float, float, float]:
    """Over an arm's seeds, the shares of the groups generated on visits after a prompt's first up to R that were
    dead, all wrong (the unsolved side) and all right (the solved side)."""
    later = pd.concat([later_visits(r) for r in seeds.values()])
    if not len(later):
        return math.nan, math.nan, math.nan
    dead = ~later["live"].astype(bool)
    return (
        float(dead.mean()),
        float((dead & (later["pass_rate"] <= 0)).mean()),
        float((dead & (later["pass_rate"] >= 1)).mean()),
    )


CLOCK = ("seconds", "step_time")
"""The recorded fields that are clock readings (names ending so): they differ between any two runs."""


def unclocked(value: Any) -> Any:
    """`value` without the clock readings of its dicts, at any depth."""
    if isinstance(value, dict):
        return {k: unclocked(v) for k, v in value.items() if not k.endswith(CLOCK)}
    if isinstance(value, list):
        return [unclocked(v) for v in value]
    return value


def equal_seeds(runs: dict[int, dict[str, Any]], earlier: dict[int, dict[str, Any]]) -> list[int]:
    """The seeds of `runs` whose run equals `earlier`'s of the same seed (evaluations, selection log and every logged
    step, but the clock readings)."""
    fields = ("evaluations", "selection_log", "steps")
    return [s for s in sorted(set(runs) & set(earlier))
            if all(unclocked(runs[s][f]) == unclocked(earlier[s][f]) for f in fields)]  # fmt: skip


def reproduced(runs: dict, addition: Path = ADDITION, study: str = "the addition study's") -> str:
    """Whether this study's `grpo` runs equal `study`'s (in `addition`) of the same seeds (evaluations, selection log
    and every logged step, but the clock readings), the check that the harness and the package did not change GRPO."""
    earlier = load_runs(addition, {"grpo": None}).get("grpo", {})
    seeds = sorted(set(earlier) & set(runs.get("grpo", {})))
    same = equal_seeds(runs.get("grpo", {}), earlier)
    return (f"`grpo` seeds {seeds[0]}-{seeds[-1]}: {len(same)} of {len(seeds)} equal {study} runs of "
            "the same seeds (evaluations, selection log and every logged step, but the clock readings: "
            "`*seconds`, `step_time`).") if seeds else ""  # fmt: skip


def manipulation(runs: dict) -> tuple[list[str], bool]:
    rows, unsolved = [], {}
    for arm, seeds in runs.items():
        dead, unsolved[arm], solved = later_shares(seeds)
        steps = [to_budget(r) for r in seeds.values()]
        last = [s[-1] for s in steps if s]
        scored = sum(e.get("lze/revisits_scored_unsolved", 0.0) for e in last)
        live = sum(e.get("lze/revisits_live_unsolved", 0.0) for e in last)
        skipped = np.mean([e.get("lze/skipped_prompts_unsolved", 0.0) for s in steps for e in s])
        live_a_step = np.mean([(1 - e["lze/dead_frac"]) * e["lze/fresh_rollouts"] / PROTOCOL["num_generations"]
                               for s in steps for e in s])  # fmt: skip
        rows.append([f"`{arm}`", len(seeds), f"{unsolved[arm]:.3f}", f"{dead:.3f}", f"{solved:.3f}",
                     f"{1 - live / scored:.3f}" if scored else "n/a", int(scored), f"{skipped:.0f}",
                     f"{live_a_step:.1f}"])  # fmt: skip
    headers = ["arm", "seeds", "all wrong after first visits", "dead", "all right", "precision (explored, dead again)",
               "explored", "skipped (an epoch)", "live groups a step"]  # fmt: skip
    control, pruned = unsolved.get("grpo", math.nan), unsolved.get("grpo_prune_unsolved", math.nan)
    valid = bool(pruned <= DEAD_RATIO_NEEDED * control) if not math.isnan(pruned + control) else False
    out = [
        "## Manipulation check (before any outcome)\n",
        "Up to R, from the selection logs (every generated group, with its prompt key): the shares of the groups "
        "generated on visits after a prompt's first that were all wrong, dead and all right; from the pruner's "
        "metrics, the explored pruned prompts and their precision, and the skipped ones (a step's epoch's, averaged "
        "over the steps).\n",
        tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n",
        f"Required: `grpo_prune_unsolved`'s all-wrong share after first visits at most {DEAD_RATIO_NEEDED} of "
        f"`grpo`'s (the random choice of as many prompts): {pruned:.3f} against {control:.3f}. "
        + ("**Met: the test stands.**" if valid else "**Not met (or not yet measured): the test is void.**")
        + " "
        + " ".join(budget_rows(runs))
        + reproduced(runs)
        + "\n",
    ]
    return out, valid


def tests(runs: dict, valid: bool) -> list[str]:
    arm, other, point, _, _ = TEST
    difference = paired(runs, arm, other, point)
    rows = declared_rows([TEST], [difference], valid)
    out = ["## The declared test\n", tabulate(rows, headers=TEST_HEADERS, tablefmt="github", disable_numparse=True)
           + "\n"]  # fmt: skip
    sd = pooled_error_sd([{"arm": a, "seed": s, "y": accuracy(r, point)} for a in (arm, other)
                          for s, r in runs.get(a, {}).items()])  # fmt: skip
    if len(difference) >= 2 and not math.isnan(sd):
        effect = TTestPower().solve_power(nobs=len(difference), alpha=ALPHA, power=POWER, alternative="two-sided")
        row = [f"{sd:.4f}", f"{sd * math.sqrt(2):.4f}", f"{PLANNED_PAIRED_SD}", len(difference),
               f"{effect * sd * math.sqrt(2):.4f}"]  # fmt: skip
        headers = ["error SD (arm x seed)", "a paired difference's SD", "planned paired SD", "seeds",
                   "the test detects (80% power)"]  # fmt: skip
        out += ["Power: the error SD with the seed as a block, against the paired SD the protocol planned for.\n",
                tabulate([row], headers=headers, tablefmt="github", disable_numparse=True) + "\n"]  # fmt: skip
    return out


def arms_section(runs: dict, addition: Path = ADDITION) -> list[str]:
    rows = [[f"`{arm}`", len(seeds), *(mean_sd([accuracy(r, "budget", split) for r in seeds.values()])
                                       for split in ("test", "ood"))] for arm, seeds in runs.items()]  # fmt: skip
    arm, other, point, _, _ = TEST
    # the addition study's both-sides pruning at B on the seeds both ran (its GRPO runs are this study's, reproduced)
    both = {"grpo_prune": load_runs(addition, {"grpo_prune": None}).get("grpo_prune", {}), arm: runs.get(arm, {})}
    seeds = sorted(set(both["grpo_prune"]) & set(both[arm]))
    differences = [[f"`{arm}` - `{other}`", "ood at R", interval(paired(runs, arm, other, point, "ood"))]]
    if len(seeds) >= 2:
        differences.append([f"`grpo_prune` (the addition study's, both sides) - `{arm}`, seeds {seeds[0]}-{seeds[-1]}",
                            "test at R", interval(paired(both, "grpo_prune", arm, point))])  # fmt: skip
    return [
        "## Every arm (secondary, descriptive)\n",
        tabulate(
            rows,
            headers=["arm", "seeds", "test accuracy at R (mean +- SD)", "OOD at R"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n",  # fmt: skip
        "Outside the declared test (no correction; descriptive; the second across two studies, read after both "
        "ran):\n",
        tabulate(
            differences,
            headers=["difference", "at", "mean [95% t interval]"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n",  # fmt: skip
    ]


def explored_shares(record: dict[str, Any], side: str = "unsolved") -> list[float]:
    """The share of `side`'s prune pool each epoch's plan rolled out again (explored), in order: a new plan is a change
    of the pair (skipped, explored) the steps log."""
    out, previous = [], None
    for step in record["steps"]:
        pair = (step.get(f"lze/skipped_prompts_{side}", 0.0), step.get(f"lze/revisited_prompts_{side}", 0.0))
        if pair != previous and sum(pair) > 0:
            out.append(pair[1] / sum(pair))
        previous = pair
    return out


def exploration_section(runs: dict, addition: Path = ADDITION) -> list[str]:
    """Descriptive: how much of the unsolved side's pool each epoch explored, in this study's pruned arm and in the
    addition study's (both sides pruned there, the unsolved side's target two thirds of this one's)."""
    arms = {"grpo_prune_unsolved": runs.get("grpo_prune_unsolved", {}),
            **{f"{arm} (addition study)": seeds for arm, seeds in load_runs(
                addition, {"grpo_prune": None, "grpo_prune_small": None}).items()}}  # fmt: skip
    rows = []
    for arm, seeds in arms.items():
        shares = np.array([x for r in seeds.values() for x in explored_shares(r)])
        if not len(shares):
            continue
        first = explored_shares(seeds[min(seeds)])
        rows.append([f"`{arm}`", len(seeds), len(shares), f"{np.median(shares):.3f}", f"{(shares >= 0.5).mean():.2f}",
                     f"{(shares <= 0.1).mean():.2f}", ", ".join(f"{x:.2f}" for x in first)])  # fmt: skip
    headers = ["arm", "seeds", "epoch plans", "explored share of the pool (median)", "plans exploring at least half",
               "plans exploring at most a tenth", "the first seed's plans, in order"]  # fmt: skip
    return [
        "## The exploration, epoch by epoch (secondary, descriptive)\n",
        "The adaptive exploration probability moves after every generation batch, but the pool is explored when an "
        "epoch is planned: the share of the unsolved side's pool each plan rolled out again.\n",
        tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n",
    ]


def sections(runs: dict) -> list[str]:
    check, valid = manipulation(runs)
    return [*check, *tests(runs, valid), *arms_section(runs), *exploration_section(runs), *transitions_section(runs)]


def build(results: Path = RESULTS, figures: bool = False) -> str:
    script = "benchmarks/unsolved_pruning/report.py"
    return assemble("Unsolved-side pruning study", script, load_runs(results, ARMS), results, figures, sections)


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
