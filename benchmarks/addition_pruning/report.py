"""The addition pruning study's report (issue #71), rebuilt from its raw results.

    python benchmarks/addition_pruning/report.py            # writes report.md and its figure
    python benchmarks/addition_pruning/report.py --check    # fails if the committed report.md differs from a rebuild

The order is the protocol's (`benchmarks/results/addition_pruning/protocol.md`): the manipulation check, computed
before any outcome, then the declared tests, the power the seeds run give, and the secondary outcomes. The later-visit
and transition counts are the SmolLM2 study's (`benchmarks/smollm2_pruning/report.py`), on this study's records.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from collections.abc import Callable
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
from benchmarks.addition_pruning.run import ARMS, PROTOCOL, RESULTS  # noqa: E402
from benchmarks.fused.report import interval  # noqa: E402
from benchmarks.smollm2_pruning.report import (  # noqa: E402
    ALPHA,  # noqa: E402
    TEST_HEADERS,
    declared_rows,
    later_visits,
    pooled_error_sd,
    transitions_section,
)


MARGIN = 0.015
TESTS = [
    ("grpo_prune_small", "grpo_small", "budget", "the choice at equal rollouts", None),
    ("grpo_prune_small", "grpo", "equal_steps", "the same learning for 5/8 of the rollouts", MARGIN),
]
"""The declared tests: (arm, minus arm, the evaluation point, what the difference isolates, the non-inferiority margin
or `None` for a two-sided test)."""
TESTED = ["grpo_prune_small", "grpo_small", "grpo"]
"""The arms of the declared tests, whose error SD (pooled, the seed as a block) gives the power."""
POWER, SMALLEST = 0.8, 0.015
PLANNED_PAIRED_SD = 0.0109
"""The paired SD the protocol planned the seeds with (the largest of sections 1-3's)."""
DEAD_RATIO_NEEDED = 0.5
"""The manipulation check: the pruned small arm's dead share after first visits at most this share of the control's."""
GENERATION_SHARE = 0.8
SIDES = ("solved", "unsolved")


def load_runs(results: Path, arms: dict[str, Any] = ARMS) -> dict[str, dict[int, dict[str, Any]]]:
    """The finished runs under `results/runs/`, by arm (in the order of `arms`) and seed."""
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for arm in arms:
        for path in sorted((results / "runs" / arm).glob("seed_*.json.gz")):
            with gzip.open(path, "rt") as f:
                runs.setdefault(arm, {})[int(path.name.split(".")[0].split("_")[1])] = json.load(f)
    return runs


def evaluation(record: dict[str, Any], point: str) -> dict[str, Any] | None:
    return next((e for e in record["evaluations"] if point in e["points"]), None)


def accuracy(record: dict[str, Any], point: str, split: str = "test") -> float | None:
    found = evaluation(record, point)
    return None if found is None else float(found[f"{split}_accuracy"])


def to_budget(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's logged steps up to R."""
    found = evaluation(record, "budget")
    last = found["step"] if found else math.inf
    return [s for s in record["steps"] if s["step"] <= last]


def budget_rows(runs: dict) -> list[str]:
    """Every run's generated rollouts at its evaluation at R, which must be R (a run that stopped short has none)."""
    short = [f"`{arm}` seed {s}" for arm, seeds in runs.items() for s, r in seeds.items()
             if (e := evaluation(r, "budget")) is None or e["rollouts"] != PROTOCOL["rollout_budget"]]  # fmt: skip
    if not short:
        return [f"Every run's evaluation at R came after exactly {PROTOCOL['rollout_budget']:,} generated rollouts.\n"]
    return [f"**Runs whose evaluation at R is not at {PROTOCOL['rollout_budget']:,} rollouts: {', '.join(short)}.**\n"]


def manipulation(runs: dict) -> tuple[list[str], bool]:
    rows, share = [], {}
    for arm, seeds in runs.items():
        later = pd.concat([later_visits(r) for r in seeds.values()])
        share[arm] = float((~later["live"].astype(bool)).mean()) if len(later) else math.nan
        steps = [to_budget(r) for r in seeds.values()]
        last = [s[-1] for s in steps if s]
        scored = [sum(e.get(f"lze/revisits_scored_{side}", 0.0) for e in last) for side in SIDES]
        live = [sum(e.get(f"lze/revisits_live_{side}", 0.0) for e in last) for side in SIDES]
        precision = 1 - sum(live) / sum(scored) if sum(scored) else math.nan
        skipped = [np.mean([e.get(f"lze/skipped_prompts_{side}", 0.0) for s in steps for e in s]) for side in SIDES]
        live_a_step = np.mean([(1 - e["lze/dead_frac"]) * e["lze/fresh_rollouts"] / PROTOCOL["num_generations"]
                               for s in steps for e in s])  # fmt: skip
        rows.append([f"`{arm}`", len(seeds), f"{share[arm]:.3f}",
                     "n/a" if math.isnan(precision) else f"{precision:.3f}",
                     *(f"{int(s)} ({1 - v / s:.2f})" if s else "0" for s, v in zip(scored, live)),
                     *(f"{v:.0f}" for v in skipped), f"{live_a_step:.1f}"])  # fmt: skip
    headers = ["arm", "seeds", "dead share after first visits", "precision (revisits dead again)",
               "revisits scored, solved side (dead again)", "unsolved side", "skipped solved (an epoch)",
               "skipped unsolved (an epoch)", "live groups a step"]  # fmt: skip
    control, pruned = share.get("grpo_small", math.nan), share.get("grpo_prune_small", math.nan)
    valid = bool(pruned <= DEAD_RATIO_NEEDED * control) if not math.isnan(pruned + control) else False
    out = [
        "## Manipulation check (before any outcome)\n",
        "Up to R, from the selection logs (every generated group, with its prompt key) and the pruner's metrics; "
        "skipped counts are a step's epoch's, averaged over the steps.\n",
        tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n",
        f"Required: `grpo_prune_small`'s dead share after first visits at most {DEAD_RATIO_NEEDED} of `grpo_small`'s "
        f"(the random choice of as many prompts): {pruned:.3f} against {control:.3f}. "
        + ("**Met: test 1 stands.**" if valid else "**Not met (or not yet measured): test 1 is void.**")
        + " A random choice's precision is the dead share of `grpo_small`'s later visits. "
        + " ".join(budget_rows(runs)),
    ]
    return out, valid


def paired(runs: dict, arm: str, other: str, point: str, split: str = "test") -> pd.Series:
    seeds = sorted(set(runs.get(arm, {})) & set(runs.get(other, {})))
    values = {s: (accuracy(runs[arm][s], point, split), accuracy(runs[other][s], point, split)) for s in seeds}
    return pd.Series({s: a - b for s, (a, b) in values.items() if a is not None and b is not None}, dtype=float)


def pooled_sd(runs: dict) -> float:
    """The error SD of test accuracy at R over the tested arms, the seed as a block."""
    return pooled_error_sd([{"arm": a, "seed": s, "y": accuracy(r, "budget")}
                            for a in TESTED for s, r in runs.get(a, {}).items()])  # fmt: skip


def tests(runs: dict, valid: bool) -> list[str]:
    rows = declared_rows(TESTS, [paired(runs, arm, other, point) for arm, other, point, _, _ in TESTS], valid)
    table = tabulate(rows, headers=TEST_HEADERS, tablefmt="github", disable_numparse=True)
    out = ["## The declared tests\n", table + "\n"]
    sd = pooled_sd(runs)
    if not math.isnan(sd):
        n = min(len(d) for d in (paired(runs, a, o, p) for a, o, p, _, _ in TESTS))
        power = TTestPower()
        effect = power.solve_power(nobs=n, alpha=ALPHA / 2, power=POWER, alternative="two-sided")
        detectable = effect * sd * math.sqrt(2)
        row = [f"{sd:.4f}", f"{sd * math.sqrt(2):.4f}", f"{PLANNED_PAIRED_SD}", n, f"{detectable:.4f}", f"{SMALLEST}"]
        headers = ["error SD (arm x seed)", "a paired difference's SD", "planned paired SD", "seeds",
                   "test 1 detects (80% power, first Holm level)", "the protocol's target"]  # fmt: skip
        out += [
            f"Power: the error SD pooled over {', '.join(TESTED)} with the seed as a block, against the paired SD the "
            "protocol planned for.\n",
            tabulate([row], headers=headers, tablefmt="github", disable_numparse=True) + "\n",
        ]
    return out


def cost(record: dict[str, Any], grpo_tokens: float, until: str) -> float | None:
    """The run's cost, in GRPO steps at B, to its evaluation `until`, on a step where generation is
    `GENERATION_SHARE` of GRPO's (generation by generated rollouts, the rest by update tokens)."""
    found = evaluation(record, until)
    if found is None:
        return None
    per_step = PROTOCOL["prompts_per_step"] * PROTOCOL["num_generations"]
    g = GENERATION_SHARE
    return sum(g * s["lze/fresh_rollouts"] / per_step + (1 - g) * s["lze/update_tokens"] / grpo_tokens
               for s in record["steps"] if s["step"] <= found["step"])  # fmt: skip


def mean_sd(values: list[float | None]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return f"{np.mean(values):.4f} +- {np.std(values, ddof=1) if len(values) > 1 else 0.0:.4f}"


def arms_section(runs: dict) -> list[str]:
    grpo = [s["lze/update_tokens"] for r in runs.get("grpo", {}).values() for s in r["steps"]]
    grpo_tokens = float(np.mean(grpo)) if grpo else math.nan
    rows = []
    for arm, seeds in runs.items():
        records = list(seeds.values())
        rows.append([f"`{arm}`", len(seeds),
                     *(mean_sd([accuracy(r, p, split) for r in records])
                       for p, split in (("budget", "test"), ("equal_steps", "test"), ("budget", "ood"))),
                     *(f"{np.mean([c for r in records if (c := cost(r, grpo_tokens, p)) is not None]):.1f}"
                       for p in ("budget", "equal_steps"))])  # fmt: skip
    headers = ["arm", "seeds", "test accuracy at R (mean +- SD)", f"after {PROTOCOL['equal_steps']} steps",
               "OOD at R", f"cost to R (GRPO steps, g={GENERATION_SHARE})",
               f"cost to step {PROTOCOL['equal_steps']}"]  # fmt: skip
    pairs = [("grpo_prune", "grpo", "budget", "test"), ("grpo_prune_small", "grpo_small", "budget", "ood"),
             ("grpo_small", "grpo", "budget", "test")]  # fmt: skip
    differences = [[f"`{a}` - `{b}`", f"{split} at {p}", interval(paired(runs, a, b, p, split))]
                   for a, b, p, split in pairs]  # fmt: skip
    return [
        "## Every arm (secondary, descriptive)\n",
        tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n",
        "Paired differences outside the declared tests (no correction; descriptive):\n",
        tabulate(
            differences,
            headers=["difference", "at", "mean [95% t interval]"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n",
    ]


def figure(runs: dict, results: Path) -> list[str]:
    """Test accuracy against generated rollouts, each arm's mean over its seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for arm, seeds in runs.items():
        curves = pd.DataFrame([{"rollouts": e["rollouts"], "acc": e["test_accuracy"], "seed": s}
                               for s, r in seeds.items() for e in r["evaluations"]])  # fmt: skip
        mean = curves.groupby("rollouts")["acc"].mean()
        ax.plot(mean.index, mean.values, marker="o", label=f"{arm} ({len(seeds)} seeds)")
    ax.axvline(PROTOCOL["rollout_budget"], color="grey", linestyle=":", label="R")
    ax.set(xlabel="generated rollouts", ylabel="test accuracy (levels 1-2, greedy)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(results / "accuracy_vs_rollouts.png", dpi=110)
    plt.close(fig)
    return ["![test accuracy against generated rollouts](accuracy_vs_rollouts.png)\n"]


def assemble(title: str, script: str, runs: dict, results: Path, figures: bool,
             sections: Callable[[dict], list[str]]) -> str:  # fmt: skip
    """A pruning study's report: its title, the command that rebuilds it, `sections(runs)` and the figure (drawn when
    `figures`)."""
    head = [f"# {title}: report\n", f"Rebuilt by `python {script}` from `runs/`; the protocol is `protocol.md` "
            "beside it.\n"]  # fmt: skip
    if not runs:
        return "\n".join([*head, "No run has finished yet.\n"])
    picture = figure(runs, results) if figures else ["![test accuracy against generated rollouts]"
                                                     "(accuracy_vs_rollouts.png)\n"]  # fmt: skip
    return "\n".join([*head, *sections(runs), *picture])


def sections(runs: dict) -> list[str]:
    check, valid = manipulation(runs)
    return [*check, *tests(runs, valid), *arms_section(runs), *transitions_section(runs)]


def build(results: Path = RESULTS, figures: bool = False) -> str:
    script = "benchmarks/addition_pruning/report.py"
    return assemble("Addition pruning study", script, load_runs(results), results, figures, sections)


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
