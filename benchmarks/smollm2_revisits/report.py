"""The SmolLM2 revisit study's report (BENCHMARKS.md section 13), rebuilt from its raw results.

    python benchmarks/smollm2_revisits/report.py            # writes report.md
    python benchmarks/smollm2_revisits/report.py --check    # fails if the committed report.md differs from a rebuild

The order is the protocol's (`benchmarks/results/smollm2_revisits/protocol.md`): the time model, then the manipulation
check, computed before any outcome, then the declared tests at the time budget T, the power analysis that sizes the
seeds, and the secondary outcomes.
"""

from __future__ import annotations

import json
import math
import sys
from functools import cache
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
from benchmarks.fused.report import interval  # noqa: E402
from benchmarks.smollm2_revisits.run import ARMS, PROTOCOL, RESULTS, splits  # noqa: E402


DECLARED = [*ARMS, "lze_uncertainty", "probe", "grpo_4x8"]
"""Every arm of the protocol, in its order: `run.py`'s primary and secondary arms and the probe, which left the library
with BENCHMARKS.md section 15's verdict (its committed runs hold its settings; it ran at commit 11e6ad3)."""

COMPARISONS = [
    ("lze", "uniform_live", "the ranking"),
    ("lze", "filter", "the 0.4 quota"),
    ("filter", "grpo", "the filter"),
]
"""The declared tests: (arm, minus arm, what the difference isolates)."""
VARIED = [
    ("lze", "lze_uncertainty", "history in the ranking"),
    ("probe", "lze", "probe rounds for full groups"),
    ("grpo_4x8", "grpo", "4 prompts x 8 for 8 x 8"),
    ("lze", "grpo_4x8", "LZE against a GRPO step as cheap"),
]
"""The secondary arms beside the arm each varies, and LZE beside GRPO on 4 prompts a step, whose modelled step costs
about LZE's (so both make about as many steps by T): (arm, minus arm, what the difference isolates)."""
ALPHA, POWER, SMALLEST = 0.05, 0.8, 0.03
"""Family-wise level (Holm over the three), the power and the difference the seeds are sized to detect."""
MAX_SEEDS = {"primary": 6, "secondary": 3}
VISITS_NEEDED, HISTORY_SHARE_NEEDED = 4, 0.25


def load_runs(results: Path) -> dict[str, dict[int, dict[str, Any]]]:
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted((results / "runs").glob("*/seed_*.json")):
        record = json.loads(path.read_text())
        runs.setdefault(record["arm"], {})[record["seed"]] = record
    return runs


def at(record: dict[str, Any], point: str) -> dict[str, Any] | None:
    """The run's evaluation at `point` (`half`, `budget` or `equal_steps`)."""
    return next((e for e in record["evaluations"] if point in e["points"]), None)


def accuracy(record: dict[str, Any], point: str = "budget", split: str = "test", mask: np.ndarray | None = None):
    evaluation = at(record, point)
    if evaluation is None or split not in evaluation:
        return math.nan
    rates = np.asarray(evaluation[split]["rate"], dtype=float)
    return float(rates[mask].mean() if mask is not None else rates.mean())


def table(runs: dict, arm: str, value) -> pd.Series:
    """`value(record)` of each seed of `arm`."""
    return pd.Series({seed: value(record) for seed, record in sorted(runs.get(arm, {}).items())}, dtype=float)


def paired(runs: dict, arm: str, other: str, value) -> pd.Series:
    a, b = table(runs, arm, value), table(runs, other, value)
    return (a - b).dropna()


@cache
def unseen_mask() -> np.ndarray:
    return np.asarray(splits()["unseen"], dtype=bool)


def budget_step(record: dict[str, Any]) -> int:
    evaluation = at(record, "budget")
    return evaluation["step"] if evaluation else record["steps"][-1]["step"]


def selections(record: dict[str, Any]) -> pd.DataFrame:
    """The run's selection log up to T: the batches decided before its update at T."""
    log = pd.DataFrame(record["selection_log"])
    return log[log["step"] < budget_step(record)]


def history_changes(log: pd.DataFrame) -> tuple[int, int, int]:
    """Selections against the uncertainty, selections, and selections in batches where not every live group was
    selected. A batch's selections against the uncertainty are its `k` selected groups minus the most of them that a
    top `k` of its live groups by `4p(1-p)` alone holds (ties broken either way): those no such ranking could make."""
    changed = selected = chosen = 0
    for _, batch in log.groupby("batch"):
        live = batch[batch["live"]]
        picked = (live["weight"] > 0).to_numpy()
        k = int(picked.sum())
        if k == 0:
            continue
        p = live["pass_rate"].to_numpy(dtype=float)
        uncertainty = np.round(4 * p * (1 - p), 9)
        kth = np.sort(uncertainty)[::-1][k - 1]
        above, tied = uncertainty > kth, uncertainty == kth
        shared = int((picked & above).sum()) + min(int((picked & tied).sum()), k - int(above.sum()))
        changed += k - shared
        selected += k
        chosen += k if k < len(live) else 0
    return changed, selected, chosen


def same_noise_changes(record: dict[str, Any]) -> tuple[int, int, int, int]:
    """Against the ranking by the uncertainty alone with the run's own noise draws: each batch's selections that
    `selector="lze"` with `energy_terms=["uncertainty"]` would not have made with the same Gumbel draws (the batch's
    generator, `(seed, batch)`), ties counted as the selector breaks them; and how many of LZE's selections the logged
    energies reproduce with those draws (the check that the draws are the run's). Returns (changed, selected, chosen:
    selected in batches with a choice, reproduced)."""
    from lze_trl.method.selection import select_top_k

    ratio = float(record["settings"].get("selection_ratio", 0.4))
    changed = selected = chosen = reproduced = 0
    for b, batch in selections(record).groupby("batch", sort=True):
        live = batch["live"].to_numpy(dtype=bool)
        picked = (batch["weight"] > 0).to_numpy()
        if not picked.any():
            continue
        p = batch["pass_rate"].to_numpy(dtype=float)
        uncertainty = np.where(live, 4 * p * (1 - p), 0.0)
        by_uncertainty = select_top_k(uncertainty, live, ratio, 0.05, np.random.default_rng([record["seed"], b]))
        again = select_top_k(batch["energy"].to_numpy(), live, ratio, 0.05, np.random.default_rng([record["seed"], b]))
        k = int(picked.sum())
        changed += int((picked & ~by_uncertainty).sum())
        selected += k
        chosen += k if k < int(live.sum()) else 0
        reproduced += int((again & picked).sum())
    return changed, selected, chosen, reproduced


def same_noise_section(runs: dict) -> list[str]:
    """The history's share of LZE's choices measured against the uncertainty-only ranking with the same noise draws,
    and what the arms that choose otherwise (at random, by the uncertainty alone) score on the same measure."""
    rows = []
    for arm in ("lze", "lze_uncertainty", "uniform_live"):
        if arm not in runs:
            continue
        c, s, h, r = (sum(v) for v in zip(*(same_noise_changes(rec) for rec in runs[arm].values())))
        reproduced = f"{r / s:.3f}" if arm != "uniform_live" else "n/a (drawn, not ranked)"
        rows.append([arm, len(runs[arm]), f"{c / s:.3f}", f"{c / h:.3f}" if h else "n/a", reproduced])
    headers = ["arm", "seeds", "selected against the uncertainty (same draws)", "the same, in batches with a choice",
               "selections the logged energies reproduce"]  # fmt: skip
    ranking = paired(runs, "lze", "uniform_live", accuracy)
    return [
        "### The same measure with the run's noise draws (a correction, after the runs)\n",
        tabulate(rows, headers=headers, tablefmt="github") + "\n",
        "The declared measure above ranks without the selection noise and counts a tie at the cut-off as agreement. "
        "Re-ranking each batch by the uncertainty alone with the batch's own Gumbel draws (`(seed, batch)`, as the "
        "selector draws them; the last column checks that those draws reproduce the run's selections from its logged "
        "energies) measures what history changed: `lze`'s row. `uniform_live`'s row is what a random choice of as "
        "many live groups scores on it, and `lze_uncertainty`'s is 0 by construction. The 0.25 the protocol required "
        "sits between the two and does not bear on whether the ranking test can tell LZE from a random choice, so the "
        "report gives that comparison as a result (not a declared test: the protocol voided it): LZE minus "
        f"`uniform_live` at T {interval(ranking)} over {len(ranking)} seeds, detectable at 80% power "
        f"{detectable(len(ranking), float(ranking.std(ddof=1))):.4f}.\n",
    ]


def manipulation(runs: dict) -> tuple[list[str], bool]:
    """The manipulation check's section, and whether the ranking test stands."""
    out = ["## Manipulation check (before any outcome)\n"]
    rows, valid = [], True
    for arm in ("lze", "lze_uncertainty", "uniform_live", "filter", "grpo"):
        if arm not in runs:
            continue
        visits, changed, selected, chosen = [], 0, 0, 0
        for record in runs[arm].values():
            log = selections(record)
            visits += log.groupby("prompt_key").size().tolist()
            c, s, h = history_changes(log)
            changed, selected, chosen = changed + c, selected + s, chosen + h
        share = changed / selected if selected else math.nan
        among = changed / chosen if chosen else math.nan
        median = float(np.median(visits)) if visits else math.nan
        rows.append([arm, len(runs[arm]), f"{median:g}", f"{min(visits, default=0)}", f"{share:.3f}", f"{among:.3f}"])
        if arm == "lze":
            valid = median >= VISITS_NEEDED and share >= HISTORY_SHARE_NEEDED
    headers = ["arm", "seeds", "median visits a prompt by T", "fewest", "selected against the uncertainty",
               "the same, in batches with a choice"]  # fmt: skip
    out.append(tabulate(rows, headers=headers, tablefmt="github") + "\n")
    out.append(
        f"Required in `lze` (declared): a median of at least {VISITS_NEEDED} visits and at least "
        f"{HISTORY_SHARE_NEEDED} of its selections against the uncertainty ranking (`lze_uncertainty`, where only the "
        "selection noise can do it, is the floor; the arms that do not rank show what random or no choice gives). "
        + (
            "**Met: the ranking test stands.**"
            if valid
            else "**Not met: the ranking test (LZE minus `uniform_live`) is void**; the other two tests stand."
        )
        + "\n"  # fmt: skip
    )
    return out, valid


def seeds_needed(sd: float, family: int = len(COMPARISONS)) -> float:
    """Paired seeds for `POWER` to detect a difference of `SMALLEST` with the two-sided paired t-test at the first Holm
    level, when the differences have SD `sd`."""
    if sd == 0 or math.isnan(sd):
        return math.nan
    effect = SMALLEST / sd
    power = TTestPower()
    return float(power.solve_power(effect_size=effect, nobs=None, alpha=ALPHA / family, power=POWER))


def detectable(seeds: int, sd: float, family: int = len(COMPARISONS)) -> float:
    """The smallest difference `seeds` paired seeds detect with `POWER` at the first Holm level."""
    if seeds < 2 or math.isnan(sd):
        return math.nan
    return float(TTestPower().solve_power(effect_size=None, nobs=seeds, alpha=ALPHA / family, power=POWER) * sd)


def tests(runs: dict, ranking_valid: bool) -> list[str]:
    out = ["## The declared tests: test accuracy at T\n"]
    differences = {name: paired(runs, a, b, accuracy) for a, b, name in COMPARISONS}
    p = {}
    for name, d in differences.items():
        p[name] = float(stats.ttest_1samp(d, 0.0).pvalue) if len(d) >= 2 and d.nunique() > 1 else math.nan
    family = [name for _, _, name in COMPARISONS if ranking_valid or name != "the ranking"]
    tested = [p[name] if not math.isnan(p[name]) else 1.0 for name in family]
    reject, adjusted = multipletests(tested, alpha=ALPHA, method="holm")[:2]
    verdicts = dict(zip(family, zip(reject, adjusted)))
    rows = []
    for a, b, name in COMPARISONS:
        d = differences[name]
        if name in verdicts:
            rejected, adj = verdicts[name]
            verdict = "differs" if rejected else "no difference shown"
            adjusted_p = f"{adj:.4f}"
        else:
            verdict, adjusted_p = "void (manipulation check)", "n/a"
        sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
        rows.append([f"`{a}` - `{b}` ({name})", len(d), interval(d), f"{sd:.4f}", f"{p[name]:.4f}", adjusted_p,
                     verdict, f"{detectable(len(d), sd):.4f}"])  # fmt: skip
    headers = ["comparison", "seeds", "mean [95% t interval]", "paired SD", "p", "Holm-adjusted p", "verdict",
               "detectable (80% power)"]  # fmt: skip
    out.append(tabulate(rows, headers=headers, tablefmt="github") + "\n")
    out.append(
        "Two-sided paired t-tests by seed, Holm over the comparisons at family-wise 0.05 (the ranking leaves the "
        "family where the manipulation check voids it); detectable: the smallest difference the seeds run detect with "
        "80% power at the first Holm level (the power table below). Test accuracy: greedy, at the study's completion "
        "length, 400 questions.\n"
    )
    return out + secondary_comparisons(runs) + power_section(differences)


def on_every_axis(runs: dict, comparisons: list[tuple[str, str, str]]) -> str:
    """Each (arm, minus arm, name) of `comparisons`, paired by seed, at T, after 16 steps and at T / 2, with the two
    arms' means at T on the seeds they share (where an arm ran more seeds, its mean over all of them can differ)."""
    rows = []
    for a, b, name in comparisons:
        points = [
            paired(runs, a, b, lambda r, point=point: accuracy(r, point))
            for point in ["budget", "equal_steps", "half"]
        ]
        shared = points[0].index
        means = [table(runs, arm, accuracy)[shared].mean() for arm in (a, b)]
        rows.append([f"`{a}` - `{b}` ({name})", len(shared), *map(interval, points), "{:.3f} - {:.3f}".format(*means)])
    headers = ["comparison", "seeds", "at T", "after 16 steps", "at T / 2", "at T, the means on those seeds"]
    return tabulate(rows, headers=headers, tablefmt="github") + "\n"


def secondary_comparisons(runs: dict) -> list[str]:
    """The declared comparisons, and LZE minus GRPO, on every axis: at T (declared), after 16 steps and at T / 2."""
    return [
        "The same comparisons, and LZE minus GRPO, at equal time and at equal steps (16 steps; no test but at T):\n",
        on_every_axis(runs, [*COMPARISONS, ("lze", "grpo", "the method")]),
    ]


def power_section(differences: dict[str, pd.Series]) -> list[str]:
    out = ["## Power: the seeds each comparison needs\n"]
    rows = []
    for name, d in differences.items():
        sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
        needed = seeds_needed(sd)
        ask = min(math.ceil(needed), MAX_SEEDS["primary"]) if not math.isnan(needed) else math.nan
        rows.append([name, len(d), f"{sd:.4f}", f"{needed:.1f}", ask, f"{detectable(len(d), sd):.4f}",
                     f"{detectable(MAX_SEEDS['primary'], sd):.4f}"])  # fmt: skip
    headers = ["comparison", "seeds run", "paired SD", f"seeds for {POWER:.0%} power at {SMALLEST}",
               f"seeds to run (cap {MAX_SEEDS['primary']})", "detectable with the seeds run",
               "detectable at the cap"]  # fmt: skip
    out.append(tabulate(rows, headers=headers, tablefmt="github") + "\n")
    out.append(
        f"`TTestPower` (statsmodels), two-sided, level {ALPHA} / {len(COMPARISONS)} (the first Holm level), from the "
        "paired SDs of the seeds run; a primary arm runs the largest number its comparisons ask, at most "
        f"{MAX_SEEDS['primary']}.\n"
    )
    return out


def spread(records: list[dict[str, Any]], value) -> str:
    """`mean ± SD` of `value(record)` over `records` (the mean alone for one)."""
    values = pd.Series([value(r) for r in records], dtype=float)
    return f"{values.mean():.3f} ± {values.std(ddof=1):.3f}" if len(values) > 1 else f"{values.mean():.3f}"


def truncated_share(record: dict[str, Any]) -> float:
    """The share of the run's generated rollouts, up to T, that hit the completion length."""
    steps = [s for s in record["steps"] if s["step"] <= budget_step(record)]
    return sum(s["truncated_rollouts"] for s in steps) / sum(s["rollouts"] for s in steps)


def rollouts_by_budget(record: dict[str, Any]) -> float:
    return float(sum(s["rollouts"] for s in record["steps"] if s["step"] <= budget_step(record)))


def arms_section(runs: dict) -> list[str]:
    out = ["## Every arm at T, at T / 2 and after 16 steps\n"]
    rows = []
    for arm in [a for a in DECLARED if a in runs]:
        records = list(runs[arm].values())
        rows.append([
            arm, len(records), spread(records, accuracy), spread(records, lambda r: accuracy(r, "half")),
            spread(records, lambda r: accuracy(r, "equal_steps")),
            spread(records, lambda r: accuracy(r, split="test_long")),
            spread(records, lambda r: accuracy(r, mask=unseen_mask())),
            spread(records, lambda r: accuracy(r, split="pool")), spread(records, budget_step),
            spread(records, rollouts_by_budget), spread(records, truncated_share),
        ])  # fmt: skip
    headers = ["arm", "seeds", "test at T", "at T / 2", "after 16 steps", "at T, room for 96", "at T, unseen sums",
               "pool pass rate at T", "steps by T", "rollouts by T", "rollouts truncated"]  # fmt: skip
    out.append(tabulate(rows, headers=headers, tablefmt="github") + "\n")
    out.append("Mean ± SD over seeds. Every arm minus GRPO, paired by seed (descriptive):\n")
    rows = []
    for arm in [a for a in DECLARED if a != "grpo" and a in runs]:
        rows.append([arm, interval(paired(runs, arm, "grpo", accuracy)),
                     interval(paired(runs, arm, "grpo", lambda r: accuracy(r, "equal_steps"))),
                     interval(paired(runs, arm, "grpo", lambda r: accuracy(r, split="test_long")))])  # fmt: skip
    out.append(
        tabulate(rows, headers=["arm", "at T", "after 16 steps", "at T, room for 96"], tablefmt="github") + "\n"
    )
    varied = [c for c in VARIED if c[0] in runs and c[1] in runs]
    if varied:
        out.append(
            "Each secondary arm against the arm it varies, and LZE against GRPO on 4 prompts a step (a step as "
            "cheap as LZE's), paired by seed (descriptive, no test):\n"
        )
        out.append(on_every_axis(runs, varied))
    return out


def zero_spread_share(record: dict[str, Any]) -> float:
    """The share of the run's groups, up to T, whose rollouts all scored alike (no live group): what TRL logs as
    `frac_reward_zero_std` under this binary reward."""
    return float(1.0 - selections(record)["live"].astype(float).mean())


def signals_section(runs: dict, results: Path) -> list[str]:
    """What a user can read in their own run's TRL logs: the dead groups and where a step's time goes."""
    out = ["## The signals in TRL's logs\n"]
    split = {}
    for path in sorted((results / "speed").glob("*.json")):
        steps = json.loads(path.read_text())["steps"][1:]  # the first step left out, as the time model does
        seconds = np.mean([s["seconds"] for s in steps])
        generation, update = (np.mean([s[k] for s in steps]) for k in ("generation", "update"))
        split[path.stem] = [f"{seconds:.1f}", f"{generation:.1f}", f"{update:.1f}", f"{generation / seconds:.2f}"]
    rows = [[arm, len(runs[arm]), spread(list(runs[arm].values()), zero_spread_share), *split.get(arm, [""] * 4)]
            for arm in [a for a in DECLARED if a in runs]]  # fmt: skip
    headers = ["arm", "seeds", "groups with zero reward spread, to T", "speed run s/step", "generation s", "update s",
               "generation share"]  # fmt: skip
    out.append(tabulate(rows, headers=headers, tablefmt="github") + "\n")
    out.append(
        "Groups with zero reward spread: mean ± SD over seeds of each run's share up to T (TRL logs it per step as "
        "`frac_reward_zero_std`). The step split: the speed runs (their steps after the first, alone on the idle "
        "machine, one torch thread; blank for the arms without one), the seconds in the generation calls (TRL logs "
        "them as `profiling/Time taken: <Trainer>.transformers.generate`, or `vLLM.generate`) and the update (the "
        "rest of the step; reward and selection take under a tenth of a second).\n"
    )
    return out


def time_section(results: Path) -> list[str]:
    model = json.loads((results / "time_model.json").read_text())
    c = model["coefficients"]
    out = ["## The clock: the time model\n"]
    out.append(
        f"A step's seconds = {c['intercept']:.2f} + {c['generation_calls']:.2f} x generation calls + "
        f"{c['rollouts']:.4f} x rollouts + {c['update_processed_tokens']:.5f} x update tokens "
        f"(least squares on {len(model['steps'])} steps of the speed runs, R² {model['r_squared']:.3f}, residual SD "
        f"{model['residual_sd']:.2f} s). GRPO's mean modelled step {model['grpo_step']:.1f} s; the budget T = "
        f"{PROTOCOL['grpo_steps_at_budget']} of them = {model['budget']:.0f} s.\n"
    )
    rows = [[s["arm"], s["step"], f"{s['seconds']:.1f}", f"{s['predicted']:.1f}", s["generation_calls"], s["rollouts"],
             s["update_processed_tokens"]] for s in model["steps"]]  # fmt: skip
    headers = ["speed run", "step", "seconds", "modelled", "generation calls", "rollouts", "update tokens"]
    out.append(tabulate(rows, headers=headers, tablefmt="github") + "\n")
    return out + identification(model)


def identification(model: dict[str, Any]) -> list[str]:
    """What tells the intercept from the cost of a generation call: the model refitted without the probe's speed
    runs (the only steps with two generation calls), and the probe's step each fit predicts (a correction)."""
    import warnings

    import statsmodels.api as sm

    features = model["features"]
    steps = model["steps"]
    probe = [s for s in steps if s["arm"] == "probe"]
    rest = [s for s in steps if s["arm"] != "probe"]

    def design(rows: list[dict]) -> np.ndarray:
        return sm.add_constant(np.array([[r[f] for f in features] for r in rows], float), has_constant="add")

    with warnings.catch_warnings():  # without the probe the design is rank-deficient: what the table shows
        warnings.simplefilter("ignore")
        refit = sm.OLS(np.array([r["seconds"] for r in rest]), design(rest)).fit()
    c = model["coefficients"]
    calls = len({r["generation_calls"] for r in rest}) > 1
    rows = [
        ["every speed run", f"{c['intercept']:.2f}", f"{c['generation_calls']:.2f}",
         f"{np.mean([s['predicted'] for s in probe]):.1f}"],
        ["without the probe's", *(["not identified"] * 2 if not calls else [f"{v:.2f}" for v in refit.params[:2]]),
         f"{float(np.mean(refit.predict(design(probe)))):.1f}"],
    ]  # fmt: skip
    headers = ["fitted on", "intercept (s)", "a generation call (s)", "the probe's step, modelled (s)"]
    return [
        "### What fixes the intercept (a correction, after the runs)\n",
        tabulate(rows, headers=headers, tablefmt="github") + "\n",
        f"The probe's step measured: {np.mean([s['seconds'] for s in probe]):.1f} s. Only the probe's steps make two "
        "generation calls, so only they tell the intercept from the cost of a call; the steps a run makes by T rest "
        "on that fit, while each arm's step alone is measured (the speed runs).\n",
    ]


def figure(runs: dict, start: dict, results: Path, path: Path) -> None:
    """Test accuracy against modelled training minutes (each run's evaluations at T / 2 and T, at their clocks; mean
    over seeds, each seed a dot), and the steps each arm made by T."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    start_accuracy = float(np.mean(start["test"]["rate"]))
    arms = [a for a in DECLARED if a in runs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.9), gridspec_kw={"width_ratios": [1.4, 1]})
    for arm in arms:
        records = list(runs[arm].values())
        points = [[(0.0, start_accuracy), *((at(r, p)["clock"] / 60, accuracy(r, p)) for p in ("half", "budget"))]
                  for r in records]  # fmt: skip
        mean = np.mean(points, axis=0)
        left.plot(mean[:, 0], mean[:, 1], "-o", ms=4, label=f"{arm} ({len(records)} seeds)")
        for run_points in points:
            xs, ys = zip(*run_points[1:])
            left.plot(xs, ys, ".", ms=4, color=left.lines[-1].get_color(), alpha=0.5)
    left.set_xlabel("modelled training minutes (the time model; T / 2 and T)")
    left.set_ylabel("greedy test accuracy (400 questions)")
    left.grid(alpha=0.3)
    left.legend(fontsize=7)
    right.barh(arms, [np.mean([budget_step(r) for r in runs[a].values()]) for a in arms])
    right.invert_yaxis()
    right.set_xlabel("steps made by T")
    right.grid(alpha=0.3, axis="x")
    fig.suptitle("SmolLM2-135M-Instruct, a pool of 32 prompts revisited, at equal time (BENCHMARKS.md section 13)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build(results: Path = RESULTS, figures: bool = False) -> str:
    """The report (Markdown) from `results`; with `figures`, its figure too (`accuracy_time.png`)."""
    runs = load_runs(results)
    start = json.loads((results / "start.json").read_text())
    if figures and runs:
        figure(runs, start, results, results / "accuracy_time.png")
    done = {arm: sorted(seeds) for arm, seeds in runs.items()}
    out = [
        "# SmolLM2 revisit study: report\n",
        "Rebuilt by `python benchmarks/smollm2_revisits/report.py` from `runs/`; the protocol is `protocol.md`.\n",
        f"Completion length {start['max_completion_length']} tokens (`start.json`: the starting model's completions "
        "on the pool are cut in "
        + ", ".join(f"{v:.0%} at {k}" for k, v in start["cut_share"].items())
        + f"). The starting model: test accuracy {np.mean(start['test']['rate']):.4f}, with room for 96 "
        f"{np.mean(start['test_long']['rate']):.4f}, pool pass rate {np.mean(start['pool']['rate']):.4f}.\n",
        "Runs: " + "; ".join(f"`{arm}` seeds {seeds}" for arm, seeds in done.items()) + ".\n",
        "![Test accuracy against modelled training time](accuracy_time.png)\n",
    ]
    out += time_section(results)
    check, valid = manipulation(runs)
    out += check
    out += same_noise_section(runs)
    out += tests(runs, valid)
    out += arms_section(runs)
    out += signals_section(runs, results)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
