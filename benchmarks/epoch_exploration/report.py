"""The epoch-exploration pruning study's report (issue #71), rebuilt from its raw results.

    python benchmarks/epoch_exploration/report.py            # writes report.md and its figure
    python benchmarks/epoch_exploration/report.py --check    # fails if the committed report.md differs from a rebuild

The order is the protocol's (`benchmarks/results/epoch_exploration/protocol.md`): the reproduction of GRPO's runs and
the manipulation check, computed before any outcome, then the three declared tests (Holm, a void test counted with
p = 1), then the secondary outcomes. The records and the evaluation points are the addition pruning study's
(`benchmarks/addition_pruning/report.py`), the later-visit shares and the reproduction the unsolved-side study's.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.addition_pruning.report import accuracy, assemble, budget_rows, load_runs, mean_sd, paired  # noqa: E402
from benchmarks.addition_pruning.run import PROTOCOL  # noqa: E402
from benchmarks.epoch_exploration.run import ARMS, RESULTS  # noqa: E402
from benchmarks.fused.report import interval  # noqa: E402
from benchmarks.smollm2_pruning.report import (  # noqa: E402
    ALPHA,
    TEST_HEADERS,
    log_to_budget,
    pooled_error_sd,
    transitions_section,
)
from benchmarks.unsolved_pruning.report import equal_seeds, explored_shares, later_shares, reproduced  # noqa: E402


UNSOLVED = ROOT / "benchmarks" / "results" / "unsolved_pruning"
"""The unsolved-side study's results: their `grpo` runs are this study's control, their pruned arm the old rule's."""
ADDITION = ROOT / "benchmarks" / "results" / "addition_pruning"
"""The addition study's results: its both-sides arm at B is the old rule's."""
TESTS = (
    ("grpo_prune_unsolved", "grpo", "the choice at equal rollouts, the unsolved side"),
    ("grpo_prune", "grpo", "the choice at equal rollouts, both sides"),
    ("grpo_prune", "grpo_prune_unsolved", "what pruning the solved side too adds"),
)
"""The declared tests: (arm, minus arm, what the difference isolates), two-sided at R, Holm over the three."""
RATIO_NEEDED = 0.5
"""The manipulation check: a pruned arm's share at most this share of GRPO's."""
POWER, PLANNED_PAIRED_SD = 0.8, 0.0209
"""The power the seeds were sized for, and the paired SD they were sized with (the unsolved-side study's)."""


def table(rows: list[list[Any]], headers: list[str]) -> str:
    """A section's table, as the other pruning reports print theirs (numbers kept as formatted)."""
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n"


def grpo_runs(own: dict[int, dict[str, Any]], unsolved: Path = UNSOLVED) -> tuple[dict[int, dict[str, Any]], bool]:
    """GRPO's runs for the tests: the unsolved-side study's if every rerun of this study equals them (but the clock),
    else this study's own; and whether they were reproduced."""
    earlier = load_runs(unsolved, {"grpo": None}).get("grpo", {})
    same = bool(own) and equal_seeds(own, earlier) == sorted(own)
    return (earlier if same else own), same


def after_all_right(seeds: dict[int, dict[str, Any]]) -> float:
    """Over an arm's seeds, the share of the later visits up to R whose prompt's previous group was all right (what
    the solved side's rule leaves out)."""
    logs = []
    for record in seeds.values():
        log = log_to_budget(record).sort_values(["prompt_key", "step", "batch"], kind="stable")
        log["previous"] = log.groupby("prompt_key")["pass_rate"].shift()
        logs.append(log[log["previous"].notna()])
    later = pd.concat(logs) if logs else pd.DataFrame({"previous": []})
    return float((later["previous"] >= 1).mean()) if len(later) else math.nan


CHECK_HEADERS = ["arm", "seeds", "all wrong", "previous group all right", "dead", "all right",
                 "precision (explored, dead again)", "explored", "skipped solved (an epoch)",
                 "skipped unsolved (an epoch)", "live groups a step"]  # fmt: skip
"""The manipulation check's columns, a row per arm ([`check_row`])."""


def check_row(arm: str, seeds: dict[int, dict[str, Any]]) -> tuple[list[Any], tuple[float, float]]:
    """An arm's row of the manipulation check (`CHECK_HEADERS`) and the two shares the check reads: the later visits'
    all-wrong share and the share of them that followed an all-right group."""
    dead, unsolved, solved = later_shares(seeds)
    follows = after_all_right(seeds)
    last = [r["steps"][-1] for r in seeds.values() if r["steps"]]
    scored = sum(e.get(f"lze/revisits_scored_{s}", 0.0) for e in last for s in ("solved", "unsolved"))
    live = sum(e.get(f"lze/revisits_live_{s}", 0.0) for e in last for s in ("solved", "unsolved"))
    skipped = [np.mean([e.get(f"lze/skipped_prompts_{s}", 0.0) for r in seeds.values() for e in r["steps"]])
               for s in ("solved", "unsolved")]  # fmt: skip
    groups = [(1 - e["lze/dead_frac"]) * e["lze/fresh_rollouts"] for r in seeds.values() for e in r["steps"]]
    live_a_step = np.mean(groups) / PROTOCOL["num_generations"]
    row = [f"`{arm}`", len(seeds), f"{unsolved:.3f}", f"{follows:.3f}", f"{dead:.3f}", f"{solved:.3f}",
           f"{1 - live / scored:.3f}" if scored else "n/a", int(scored), f"{skipped[0]:.0f}", f"{skipped[1]:.0f}",
           f"{live_a_step:.1f}"]  # fmt: skip
    return row, (unsolved, follows)


def manipulation(runs: dict, reruns: dict, same: bool) -> tuple[list[str], dict[str, bool]]:
    """The check's table and, per pruned arm, whether its check is met."""
    rows, shares = [], {}
    for arm, seeds in runs.items():
        row, shares[arm] = check_row(arm, seeds)
        rows.append(row)
    control = shares.get("grpo", (math.nan, math.nan))
    valid = {}
    for arm in ("grpo_prune_unsolved", "grpo_prune"):
        unsolved, follows = shares.get(arm, (math.nan, math.nan))
        checks = [unsolved <= RATIO_NEEDED * control[0]]
        if arm == "grpo_prune":
            checks.append(follows <= RATIO_NEEDED * control[1])
        valid[arm] = arm in runs and bool(all(checks))
    required = (
        f"Required (the random choice of as many prompts is `grpo`): both pruned arms' all-wrong share at most "
        f"{RATIO_NEEDED} of `grpo`'s ({control[0]:.3f}), and `grpo_prune`'s share of visits after an all-right group "
        f"at most {RATIO_NEEDED} of `grpo`'s ({control[1]:.3f}). "
    )
    out = [
        "## GRPO's runs and the manipulation check (before any outcome)\n",
        reproduced(reruns, UNSOLVED, "the unsolved-side study's")
        + (" GRPO's runs are the unsolved-side study's." if same else " GRPO's runs are this study's own.")
        + "\n",
        *check_lines(runs, rows, required, valid),
    ]
    return out, valid


def check_lines(runs: dict, rows: list[list[Any]], required: str, valid: dict[str, bool]) -> list[str]:
    """The manipulation check's paragraphs: what is read, the table of `rows`, what is `required` and whether each
    pruned arm met it (`valid`), and that every evaluation at R came at R."""
    verdicts = [f"`{arm}`: **{'met' if ok else 'not met (or not yet measured)'}**" for arm, ok in valid.items()]
    return [
        "Up to R, from the selection logs, on the visits after a prompt's first: the shares of the groups that were "
        "all wrong, whose prompt's previous group was all right, dead and all right; from the pruner's metrics, the "
        "explored pruned prompts and the share of them dead again, and the skipped ones (a step's epoch's, averaged "
        "over the steps).\n",
        table(rows, CHECK_HEADERS),
        required + "; ".join(verdicts) + ". " + " ".join(budget_rows(runs)) + "\n",
    ]


def tests(
    runs: dict,
    valid: dict[str, bool],
    declared: tuple = TESTS,
    planned_sd: float = PLANNED_PAIRED_SD,
    power_from: tuple[str, str] = ("grpo_prune", "grpo"),
) -> list[str]:
    """The `declared` tests (arm, minus arm, what it isolates), Holm over them, a void one counted with p = 1, and the
    difference the seeds of the `power_from` pair detect against the `planned_sd` of the protocol."""
    rows, p_values = [], []
    for arm, other, name in declared:
        d = paired(runs, arm, other, "budget")
        void = not (valid.get(arm, True) and valid.get(other, True))
        p = float(stats.ttest_1samp(d, 0.0).pvalue) if len(d) >= 2 and d.std(ddof=1) > 0 else math.nan
        p_values.append(1.0 if void or math.isnan(p) else p)
        rows.append([f"`{arm}` - `{other}` ({name})", "budget", len(d), interval(d) if len(d) >= 2 else "n/a",
                     "two-sided", f"{p:.4f}", "void (manipulation check)" if void else None])  # fmt: skip
    reject = multipletests(p_values, alpha=ALPHA, method="holm")[0]
    for row, rejected in zip(rows, reject):
        row[-1] = row[-1] or ("differs" if rejected else "not shown")
    out = ["## The declared tests\n", table(rows, TEST_HEADERS)]  # fmt: skip
    first, control = power_from
    sd = pooled_error_sd([{"arm": a, "seed": s, "y": accuracy(r, "budget")} for a, seeds in runs.items()
                          for s, r in seeds.items() if s in set(runs.get(first, {}))])  # fmt: skip
    seeds = len(paired(runs, first, control, "budget"))
    if seeds >= 2 and not math.isnan(sd):
        power = TTestPower()
        detects = [power.solve_power(nobs=seeds, alpha=a, power=POWER, alternative="two-sided") * sd * math.sqrt(2)
                   for a in (ALPHA / len(declared), ALPHA)]  # fmt: skip
        row = [f"{sd:.4f}", f"{sd * math.sqrt(2):.4f}", f"{planned_sd}", seeds, f"{detects[0]:.4f}",
               f"{detects[1]:.4f}"]  # fmt: skip
        headers = ["error SD (arm x seed)", "a paired difference's SD", "planned paired SD", "seeds",
                   "detects (80%) at Holm's first level", "at 0.05"]  # fmt: skip
        out += ["Power: the error SD with the seed as a block (the three arms, the pruned arms' seeds), against the "
                "paired SD the protocol planned for.\n",
                table([row], headers)]  # fmt: skip
    return out


def every_arm(runs: dict, differences: list[list[str]], outside: str) -> list[str]:
    """The secondary section: each arm's test and OOD accuracy at R, then the `differences` outside the declared
    tests, introduced by `outside`."""
    rows = [[f"`{arm}`", len(seeds), *(mean_sd([accuracy(r, "budget", split) for r in seeds.values()])
                                       for split in ("test", "ood"))] for arm, seeds in runs.items()]  # fmt: skip
    return [
        "## Every arm (secondary, descriptive)\n",
        table(rows, ["arm", "seeds", "test accuracy at R (mean +- SD)", "OOD at R"]),
        outside,
        table(differences, ["difference", "at", "mean [95% t interval]"]),
    ]


def arms_section(runs: dict) -> list[str]:
    pruned = set(runs.get("grpo_prune", {}))
    own = {arm: {s: r for s, r in seeds.items() if s in pruned} for arm, seeds in runs.items()}
    differences = [[f"`{arm}` - `{other}`", "ood at R", interval(paired(own, arm, other, "budget", "ood"))]
                   for arm, other, _ in TESTS]  # fmt: skip
    old = {"grpo_prune_unsolved": load_runs(UNSOLVED, {"grpo_prune_unsolved": None}).get("grpo_prune_unsolved", {}),
           "grpo_prune": load_runs(ADDITION, {"grpo_prune": None}).get("grpo_prune", {})}  # fmt: skip
    for arm, earlier in old.items():
        both = {"new": runs.get(arm, {}), "old": earlier}
        d = paired(both, "new", "old", "budget")
        if len(d) >= 2:
            differences.append([f"`{arm}`, this rule - the per-batch rule (its earlier study's), seeds "
                                f"{d.index.min()}-{d.index.max()}", "test at R", interval(d)])  # fmt: skip
    outside = ("Outside the declared tests (no correction; descriptive; the last rows across studies, the rule "
               "changed between them):\n")  # fmt: skip
    return every_arm(runs, differences, outside)


def exploration_section(runs: dict) -> list[str]:
    """Descriptive: the explored share of each side's pool, epoch plan by epoch plan, in this study's pruned arms and,
    beside them, the old rule's (the unsolved-side study's pruned arm)."""
    arms = {arm: runs.get(arm, {}) for arm in ("grpo_prune_unsolved", "grpo_prune")}
    arms["grpo_prune_unsolved (per-batch rule)"] = load_runs(UNSOLVED, {"grpo_prune_unsolved": None}).get(
        "grpo_prune_unsolved", {}
    )
    rows = []
    for arm, seeds in arms.items():
        for side in ("unsolved", "solved"):
            shares = np.array([x for r in seeds.values() for x in explored_shares(r, side)])
            if not len(shares):
                continue
            first = explored_shares(seeds[min(seeds)], side)
            rows.append([f"`{arm}`", side, len(seeds), len(shares), f"{np.median(shares):.3f}",
                         f"{(shares >= 0.5).mean():.2f}", f"{(shares <= 0.1).mean():.2f}",
                         ", ".join(f"{x:.2f}" for x in first)])  # fmt: skip
    headers = [
        "arm",
        "side",
        "seeds",
        "epoch plans",
        "explored share of the pool (median)",
        "plans exploring at least half",
        "plans exploring at most a tenth",
        "the first seed's plans, in order",
    ]
    return [
        "## The exploration, epoch by epoch (secondary, descriptive)\n",
        "The share of each side's pool each epoch's plan rolled out again. The first pooled plan explores at p = 0.5 "
        "in every arm.\n",
        table(rows, headers),
    ]


def sections(runs: dict, reruns: dict[int, dict[str, Any]], same: bool) -> list[str]:
    check, valid = manipulation(runs, {"grpo": reruns}, same)
    return [*check, *tests(runs, valid), *arms_section(runs), *exploration_section(runs), *transitions_section(runs)]


def build(results: Path = RESULTS, figures: bool = False) -> str:
    """The report: GRPO's reruns of this study in `results` checked against the unsolved-side study's, and the runs
    GRPO's control (that study's if reproduced) beside this study's pruned arms."""
    own = load_runs(results, ARMS)
    reruns = own.pop("grpo", {})
    grpo, same = grpo_runs(reruns)
    runs = {"grpo": grpo, **own} if grpo else own
    script = "benchmarks/epoch_exploration/report.py"
    return assemble("Epoch-exploration pruning study", script, runs, results, figures,
                    lambda r: sections(r, reruns, same))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
