"""The SmolLM2 pruning study's report (issue #71), rebuilt from its raw results.

    python benchmarks/smollm2_pruning/report.py            # writes report.md
    python benchmarks/smollm2_pruning/report.py --check    # fails if the committed report.md differs from a rebuild

The order is the protocol's (`benchmarks/results/smollm2_pruning/protocol.md`): the manipulation check, computed
before any outcome, then the declared tests, the power analysis that sizes the seeds, and the secondary outcomes.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.formula.api import ols
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.fused.report import interval  # noqa: E402
from benchmarks.smollm2_pruning.run import ARMS, PILOT, PROTOCOL, RESULTS  # noqa: E402


TESTS = [
    ("grpo_prune_small", "grpo_small", "budget", "the choice at equal rollouts", None),
    ("grpo_prune_small", "grpo", "equal_steps", "the same learning for 5/8 of the rollouts", 0.03),
]
"""The declared tests: (arm, minus arm, the evaluation point, what the difference isolates, the non-inferiority margin
or `None` for a two-sided test)."""
ALPHA, POWER, SMALLEST, MAX_SEEDS = 0.05, 0.8, 0.03, 10
DEAD_RATIO_NEEDED = 0.5
"""The manipulation check: the pruned small arm's dead share after first visits at most this share of the control's."""
GENERATION_SHARE = 0.8


def load_runs(results: Path) -> dict[str, dict[int, dict[str, Any]]]:
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for arm in ARMS:
        for path in sorted((results / "runs" / arm).glob("seed_*.json")):
            runs.setdefault(arm, {})[int(path.stem.split("_")[1])] = json.loads(path.read_text())
    return runs


def accuracy(record: dict[str, Any], point: str) -> float | None:
    for evaluation in record["evaluations"]:
        if point in evaluation["points"]:
            return float(np.mean(evaluation["test"]["rate"]))
    return None


def log_to_budget(record: dict[str, Any]) -> pd.DataFrame:
    """The selection log's groups up to R, in the order they were generated."""
    log = pd.DataFrame(record["selection_log"])
    budget_step = next((e["step"] for e in record["evaluations"] if "budget" in e["points"]), None)
    if budget_step is not None:
        log = log[log["step"] < budget_step]
    return log.sort_values(["batch"], kind="stable")


def later_visits(record: dict[str, Any]) -> pd.DataFrame:
    """The selection log's groups up to R on visits after each prompt's first, with whether each was dead."""
    log = log_to_budget(record)
    log["visit"] = log.groupby("prompt_key").cumcount()
    return log[log["visit"] > 0]


def manipulation(runs: dict) -> tuple[list[str], bool]:
    rows, share = [], {}
    for arm, seeds in runs.items():
        later = pd.concat([later_visits(r) for r in seeds.values()])
        share[arm] = float((~later["live"]).mean()) if len(later) else math.nan
        scored = sum(np.sum(r["pruner"]["revisits_scored"]) for r in seeds.values() if r.get("pruner"))
        live = sum(np.sum(r["pruner"]["revisits_live"]) for r in seeds.values() if r.get("pruner"))
        last = [r["log_history"][-1] for r in seeds.values() if r["log_history"]]
        skipped = [sum(e.get(f"lze/skipped_prompts_{side}", 0) for e in last) / len(last) for side in ("solved",
                   "unsolved")] if last else [math.nan, math.nan]  # fmt: skip
        live_a_step = np.mean([(1 - e["lze/dead_frac"]) * e["lze/fresh_rollouts"] / PROTOCOL["num_generations"]
                               for r in seeds.values() for e in r["log_history"]])  # fmt: skip
        rows.append([f"`{arm}`", len(seeds), f"{share[arm]:.3f}", f"{1 - live / scored:.3f}" if scored else "n/a",
                     int(scored), f"{skipped[0]:.1f}", f"{skipped[1]:.1f}", f"{live_a_step:.2f}"])  # fmt: skip
    headers = ["arm", "seeds", "dead share after first visits", "precision (revisits dead again)", "revisits scored",
               "skipped solved (last epoch)", "skipped unsolved (last epoch)", "live groups a step"]  # fmt: skip
    control, pruned = share.get("grpo_small", math.nan), share.get("grpo_prune_small", math.nan)
    valid = bool(pruned <= DEAD_RATIO_NEEDED * control) if not math.isnan(pruned + control) else False
    out = [
        "## Manipulation check (before any outcome)\n",
        tabulate(rows, headers=headers, tablefmt="github") + "\n",
        f"Required: `grpo_prune_small`'s dead share after first visits at most {DEAD_RATIO_NEEDED} of `grpo_small`'s "
        f"(the random choice of as many prompts): {pruned:.3f} against {control:.3f}. "
        + ("**Met: test 1 stands.**" if valid else "**Not met (or not yet measured): test 1 is void.**")
        + " A random choice's precision is the dead share of `grpo_small`'s later visits.\n",
    ]
    return out, valid


KINDS = ("unsolved", "live", "solved")
"""A group's kind by its pass rate: 0, strictly between 0 and 1, 1."""


def kind(pass_rate: pd.Series) -> pd.Series:
    return pd.Series(np.select([pass_rate <= 0.0, pass_rate >= 1.0], ["unsolved", "solved"], "live"), pass_rate.index)


def transitions(record: dict[str, Any]) -> pd.Series:
    """The later visits up to R counted by (the prompt's kind at its previous visit, its kind now)."""
    log = log_to_budget(record)
    log["now"] = kind(log["pass_rate"])
    log["before"] = log.groupby("prompt_key")["now"].shift()
    return log.dropna(subset=["before"]).groupby(["before", "now"]).size()


def transitions_section(runs: dict) -> list[str]:
    """Descriptive: where the later visits' dead groups come from, per arm (all its seeds): a rule on the last visit
    can skip a prompt that was dead (unsolved or solved) before, never one that was live and turns dead."""
    rows = []
    for arm, seeds in runs.items():
        counts = pd.concat([transitions(r) for r in seeds.values()]).groupby(level=[0, 1]).sum()
        visits = [pd.DataFrame(r["selection_log"]).groupby("prompt_key").size() for r in seeds.values()]
        dead = [int(counts.get((a, b), 0)) for a in KINDS for b in ("unsolved", "solved")]
        rows.append([f"`{arm}`", len(seeds), *dead,
                     int(counts.sum()), f"{min(v.min() for v in visits)}-{max(v.max() for v in visits)}"])  # fmt: skip
    headers = ["arm", "seeds", *(f"{a} -> {b}" for a in KINDS for b in ("unsolved", "solved")), "later visits",
               "visits a prompt"]  # fmt: skip
    return [
        "## Where the later visits' dead groups come from (secondary, descriptive)\n",
        "Each later visit up to R counted by the prompt's group at its previous visit and now (unsolved: pass rate 0, "
        "solved: 1, live: between); the columns are the dead ones. Skipping a prompt the last visit saw dead removes "
        "the first two kinds' rows, not a live prompt that turns dead.\n",
        tabulate(rows, headers=headers, tablefmt="github") + "\n",
    ]


def paired(runs: dict, arm: str, other: str, point: str) -> pd.Series:
    seeds = sorted(set(runs.get(arm, {})) & set(runs.get(other, {})))
    values = {s: (accuracy(runs[arm][s], point), accuracy(runs[other][s], point)) for s in seeds}
    return pd.Series({s: a - b for s, (a, b) in values.items() if a is not None and b is not None}, dtype=float)


def pooled_error_sd(rows: list[dict[str, Any]]) -> float:
    """The error SD of `y` over `rows` (`arm`, `seed`, `y`; `y` `None` where missing), the seed as a block (arm x seed
    ANOVA's residual); NaN with too few rows to fit it."""
    frame = pd.DataFrame([r for r in rows if r["y"] is not None])
    if len(frame) < 4 or frame["seed"].nunique() < 2 or frame["arm"].nunique() < 2:
        return math.nan
    fit = ols("y ~ C(arm) + C(seed)", data=frame).fit()
    return float(np.sqrt(fit.scale)) if fit.df_resid > 0 else math.nan


def pooled_sd(runs: dict) -> float:
    """The error SD of test accuracy at R over the pilot's arms, the seed as a block."""
    return pooled_error_sd([{"arm": arm, "seed": s, "y": accuracy(r, "budget")}
                            for arm in PILOT for s, r in runs.get(arm, {}).items()])  # fmt: skip


TEST_HEADERS = ["comparison", "at", "seeds", "mean [95% t interval]", "test", "p", "verdict (Holm)"]


def declared_rows(declared: list[tuple], differences: list[pd.Series], valid: bool) -> list[list[Any]]:
    """The declared tests' table rows (`TEST_HEADERS`) from their paired differences: a two-sided t-test where the
    margin is `None`, else a one-sided non-inferiority test at the margin, Holm over those that stand at `ALPHA`; a
    two-sided test is void when the manipulation check failed (`valid` false)."""
    rows, p_values, names = [], [], []
    for (arm, other, point, name, margin), d in zip(declared, differences):
        if len(d) >= 2 and d.std(ddof=1) > 0:
            if margin is None:
                p = float(stats.ttest_1samp(d, 0.0).pvalue)
            else:
                p = float(stats.ttest_1samp(d, -margin, alternative="greater").pvalue)
        else:
            p = math.nan
        rows.append([f"`{arm}` - `{other}` ({name})", point, len(d), interval(d) if len(d) >= 2 else "n/a",
                     "two-sided" if margin is None else f"non-inferiority at -{margin}", f"{p:.4f}"])  # fmt: skip
        if (valid or margin is not None) and not math.isnan(p):
            p_values.append(p)
            names.append(name)
    verdict = dict(zip(names, multipletests(p_values, alpha=ALPHA, method="holm")[0])) if p_values else {}
    for row, (_, _, _, name, margin) in zip(rows, declared):
        if name not in verdict:
            row.append("void (manipulation check)" if margin is None and not valid else "too few seeds")
        else:
            row.append(("non-inferior" if margin else "differs") if verdict[name] else "not shown")
    return rows


def tests(runs: dict, valid: bool) -> list[str]:
    rows = declared_rows(TESTS, [paired(runs, arm, other, point) for arm, other, point, _, _ in TESTS], valid)
    out = ["## The declared tests\n", tabulate(rows, headers=TEST_HEADERS, tablefmt="github") + "\n"]
    sd = pooled_sd(runs)
    if not math.isnan(sd):
        effect = SMALLEST / (sd * math.sqrt(2))
        power = TTestPower()
        n1 = power.solve_power(effect_size=effect, alpha=ALPHA / 2, power=POWER, alternative="two-sided")
        n2 = power.solve_power(effect_size=effect, alpha=ALPHA / 2, power=POWER, alternative="larger")
        out.append(
            f"Power (the pilot's error SD {sd:.4f} pooled over {', '.join(PILOT)} with the seed as a block; a paired "
            f"difference's SD {sd * math.sqrt(2):.4f}): test 1 needs {math.ceil(n1)} seeds to detect {SMALLEST}, "
            f"test 2 {math.ceil(n2)} to reject at a true difference of 0 (80% power, first Holm level); cap "
            f"{MAX_SEEDS}.\n"
        )
    return out


def cost(record: dict[str, Any], grpo_tokens: float, until: str) -> float | None:
    """The run's cost, in GRPO steps at B, to its evaluation `until`, on a step where generation is
    `GENERATION_SHARE` of GRPO's (generation by rollouts, the rest by update tokens)."""
    step = next((e["step"] for e in record["evaluations"] if until in e["points"]), None)
    if step is None:
        return None
    per_step = PROTOCOL["prompts_per_step"] * PROTOCOL["num_generations"]
    g = GENERATION_SHARE
    return sum(g * s["rollouts"] / per_step + (1 - g) * s["update_processed_tokens"] / grpo_tokens
               for s in record["steps"][:step])  # fmt: skip


def arms_section(runs: dict) -> list[str]:
    grpo = [s["update_processed_tokens"] for r in runs.get("grpo", {}).values() for s in r["steps"]]
    grpo_tokens = float(np.mean(grpo)) if grpo else math.nan
    rows = []
    for arm, seeds in runs.items():
        acc = {point: [accuracy(r, point) for r in seeds.values()] for point in ("budget", "equal_steps")}
        costs = {point: [cost(r, grpo_tokens, point) for r in seeds.values()] for point in ("budget", "equal_steps")}
        seconds = [np.mean([s["seconds"] for s in r["steps"]]) for r in seeds.values()]
        generation = [np.mean([s["generation"] for s in r["steps"]]) for r in seeds.values()]
        spread = {p: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for p, v in acc.items()}
        rows.append([f"`{arm}`", len(seeds), *(f"{np.mean(acc[p]):.4f} +- {spread[p]:.4f}" for p in acc),
                     *(f"{np.mean(costs[p]):.1f}" for p in costs),
                     f"{np.mean(seconds):.0f} ({np.mean(generation):.0f})"])  # fmt: skip
    headers = ["arm", "seeds", "test accuracy at R (mean +- SD)", "after 16 steps", "cost to R (GRPO steps, g=0.8)",
               "cost to step 16", "seconds a step (generation), measured"]  # fmt: skip
    return ["## Every arm (secondary, descriptive)\n", tabulate(rows, headers=headers, tablefmt="github") + "\n"]


def build(results: Path = RESULTS, figures: bool = False) -> str:
    runs = load_runs(results)
    head = ["# SmolLM2 pruning study: report\n", "Rebuilt by `python benchmarks/smollm2_pruning/report.py` from "
            "`runs/`; the protocol is `protocol.md` beside it.\n"]  # fmt: skip
    if not runs:
        return "\n".join([*head, "No run has finished yet.\n"])
    check, valid = manipulation(runs)
    return "\n".join([*head, *check, *tests(runs, valid), *arms_section(runs), *transitions_section(runs)])


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
