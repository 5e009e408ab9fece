"""The skip-mode study's report (BENCHMARKS.md section 16): the manipulation check, then the declared measurements
and test, from the finished runs in `benchmarks/results/skip_mode/runs/`.

    python benchmarks/skip_mode/report.py            # writes benchmarks/results/skip_mode/report.md
    python benchmarks/skip_mode/report.py --check    # fails if the committed report.md differs from a rebuild

It runs nothing. The protocol (`protocol.md`) fixes what is read, in this order: which runs have finished; the
manipulation check on the pilot (seeds 0-1 of `grpo`, `skip_filter`, `filter`), then on every seed; only where the
check is met, the declared measurements (the saving, the loss) and the test (non-inferiority of `skip_filter` to
`grpo` at margin 0.03, one-sided paired t-test at 0.05); then the descriptive comparisons. Intervals are scipy's t
intervals over seeds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.adaptive.report import report_main  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results" / "skip_mode"
ARMS = ("grpo", "filter", "skip_filter", "lze", "lze_skip")
PILOT = {"arms": ("grpo", "skip_filter", "filter"), "seeds": (0, 1)}
FIRST_VISITS = 4
"""Steps 0-3 (epoch 0) visit every prompt first; steps 4-15 are the later visits the protocol reads."""
STEPS = 16
GRPO_LATER_ROLLOUTS = 12 * 64
"""GRPO's rollouts in steps 4-15: 12 steps of 8 prompts x 8 rollouts."""
PRECISION_NEEDED, ABOVE_RANDOM_NEEDED, GENERATED_SHARE_MAX = 0.75, 0.3, 0.9
"""The manipulation check: the rule's precision on later visits, its margin over a random choice's, and the most of
GRPO's later rollouts the skip mode may generate."""
MARGIN, ALPHA = 0.03, 0.05


def load(results: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Every finished run, by arm and seed."""
    runs: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in ARMS}
    for arm in ARMS:
        for path in sorted((results / "runs" / arm).glob("seed_*.json")):
            record = json.loads(path.read_text())
            runs[arm][int(record["seed"])] = record
    return runs


def later_log(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's per-step logs of the later visits (TRL's `step` 5-16: generated at global steps 4-15)."""
    return [e for e in record["log_history"] if FIRST_VISITS < e["step"] <= STEPS]


def later_groups(record: dict[str, Any]) -> tuple[int, int]:
    """(groups scored, live groups) of the later visits, from the selection log."""
    log = record["selection_log"]
    later = [i for i, s in enumerate(log["step"]) if FIRST_VISITS <= s < STEPS]
    return len(later), sum(bool(log["live"][i]) for i in later)


def rule_precision(record: dict[str, Any]) -> tuple[float, float, float]:
    """A shadow `grpo` run's later visits: the rule's predicted groups (unsolved side), those of them live, and the
    random choice's precision (the dead share of all later groups)."""
    log = later_log(record)
    predicted = sum(e.get("lze/shadow_prunable_unsolved", 0.0) for e in log)
    live = sum(e.get("lze/shadow_prunable_live_unsolved", 0.0) for e in log)
    groups, live_groups = later_groups(record)
    return predicted, live, 1 - live_groups / max(groups, 1)


def later_rollouts(record: dict[str, Any]) -> float:
    """Rollouts the run generated in its later visits (steps 4-15)."""
    return float(sum(s["rollouts"] for s in record["steps"][FIRST_VISITS:STEPS]))


def accuracy(record: dict[str, Any], step: int = STEPS) -> float:
    """Test accuracy after `step` (the whole held-out set)."""
    evaluation = next(e for e in record["evaluations"] if e["step"] == step)
    return float(np.mean(evaluation["test"]["rate"]))


def t_interval(values: list[float]) -> str:
    """`mean [95% t interval] (n)`, the mean alone for one value, `n/a` for none."""
    if not values:
        return "n/a"
    mean = float(np.mean(values))
    if len(values) < 2:
        return f"{mean:.4f} (1 seed)"
    half = stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / np.sqrt(len(values))
    return f"{mean:.4f} [{mean - half:.4f}, {mean + half:.4f}] ({len(values)} seeds)"


def check(runs: dict, seeds: tuple[int, ...] | None = None) -> tuple[list[list[Any]], bool | None]:
    """The manipulation check's rows on `seeds` (all finished by default) and whether it is met (`None` until both
    its arms have a run)."""
    grpo = {s: r for s, r in runs["grpo"].items() if seeds is None or s in seeds}
    skip = {s: r for s, r in runs["skip_filter"].items() if seeds is None or s in seeds}
    if not grpo or not skip:
        return [], None
    predicted, live, random = zip(*(rule_precision(r) for r in grpo.values()))
    precision = 1 - sum(live) / max(sum(predicted), 1)
    random_precision = float(np.mean(random))
    share = sum(later_rollouts(r) for r in skip.values()) / (GRPO_LATER_ROLLOUTS * len(skip))
    met_1 = precision >= PRECISION_NEEDED and precision - random_precision >= ABOVE_RANDOM_NEEDED
    met_2 = share <= GENERATED_SHARE_MAX
    value = f"{precision:.3f} (1 - {sum(live):.0f}/{sum(predicted):.0f})"
    rows = [
        ["1. the rule predicts (grpo, shadow)", len(grpo), value,
         f">= {PRECISION_NEEDED} and >= a random choice's {random_precision:.3f} + {ABOVE_RANDOM_NEEDED}",
         "met" if met_1 else "not met"],
        ["2. the mode skips (skip_filter)", len(skip), f"{share:.3f} of GRPO's later rollouts",
         f"<= {GENERATED_SHARE_MAX}", "met" if met_2 else "not met"],
    ]  # fmt: skip
    return rows, met_1 and met_2


def declared(runs: dict) -> list[list[Any]]:
    """The declared measurements and the test, on every finished seed."""
    saving = [later_rollouts(r) / GRPO_LATER_ROLLOUTS for r in runs["skip_filter"].values()]
    loss = []
    for record in runs["grpo"].values():
        _, live, _ = rule_precision(record)
        loss.append(live / max(later_groups(record)[1], 1))
    pairs = sorted(set(runs["skip_filter"]) & set(runs["grpo"]))
    diffs = [accuracy(runs["skip_filter"][s]) - accuracy(runs["grpo"][s]) for s in pairs]
    test = "n/a (fewer than 2 paired seeds)"
    if len(diffs) >= 2:
        p = stats.ttest_1samp(np.asarray(diffs) + MARGIN, 0.0, alternative="greater").pvalue
        test = f"p = {p:.4f}: " + ("non-inferior" if p < ALPHA else "not shown non-inferior")
    return [
        ["1. the saving: skip_filter's later rollouts / GRPO's (target <= 0.75)", t_interval(saving), ""],
        ["2. the loss: GRPO's later live groups the rule skips (target <= 0.05)", t_interval(loss), ""],
        [f"3. accuracy after {STEPS} steps, skip_filter - grpo (margin -{MARGIN})", t_interval(diffs), test],
    ]


def descriptive(runs: dict) -> list[list[Any]]:
    """The secondary comparisons at equal steps, paired by seed."""
    rows = []
    for a, b in (("skip_filter", "filter"), ("filter", "grpo"), ("lze_skip", "lze"), ("lze", "grpo")):
        pairs = sorted(set(runs[a]) & set(runs[b]))
        diffs = [accuracy(runs[a][s]) - accuracy(runs[b][s]) for s in pairs]
        sd = f"{np.std(diffs, ddof=1):.4f}" if len(diffs) >= 2 else "n/a"
        rows.append([f"{a} - {b}", t_interval(diffs), sd])
    return rows


def build(results: Path, figures: bool = True) -> str:
    runs = load(results)
    finished = [[arm, len(runs[arm]), ", ".join(str(s) for s in sorted(runs[arm])) or "-"] for arm in ARMS]
    lines = [
        "# The skip-mode study: report",
        "",
        "Rebuilt by `python benchmarks/skip_mode/report.py` from `runs/` (protocol: `protocol.md`). It runs nothing.",
        "",
        "## Finished runs",
        "",
        tabulate(finished, ["arm", "runs", "seeds"], tablefmt="github"),
        "",
    ]
    pilot_done = all(set(PILOT["seeds"]) <= set(runs[arm]) for arm in PILOT["arms"])
    rows, met = check(runs, PILOT["seeds"])
    lines += ["## Manipulation check on the pilot (seeds 0-1), read first", ""]
    if not pilot_done:
        lines += ["The pilot is not complete: the check is read, and the study goes on, once seeds 0-1 of "
                  f"{', '.join(PILOT['arms'])} have finished. Its rows so far (not a verdict):", ""]  # fmt: skip
    if rows:
        lines += [tabulate(rows, ["check", "seeds", "value", "required", "verdict"], tablefmt="github"), ""]
    if not pilot_done or not met:
        if pilot_done:
            lines += ["The check is not met: the study stops at its pilot (`decision.md`), and no accuracy is read."]
        return "\n".join(lines).rstrip() + "\n"
    checks = ["check", "seeds", "value", "required", "verdict"]
    lines += ["## Manipulation check on every seed", "", tabulate(check(runs)[0], checks, tablefmt="github"), ""]
    measured = tabulate(declared(runs), ["measurement", "mean [95% t interval]", "test"], tablefmt="github")
    lines += ["## Declared measurements and test", "", measured, ""]
    compared = tabulate(descriptive(runs), ["difference", "mean [95% t interval]", "paired SD"], tablefmt="github")
    lines += ["## Descriptive: accuracy at equal steps, paired by seed", "", compared]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
