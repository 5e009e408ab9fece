"""The report of BENCHMARKS.md sections 1-3 (the adaptive rollout budget), rebuilt from the committed raw results:

    python benchmarks/adaptive/report.py            # writes benchmarks/results/adaptive/report.md and the figures
    python benchmarks/adaptive/report.py --check    # rebuilds the report and fails if it differs from the committed

Reads `benchmarks/results/adaptive/runs/<regime>_s<seed>/seed_<seed>/demo_results.json.gz` (written by `run.sh`) and
the C-GRPO arm's `cgrpo_runs/`, the uniform control's `control_runs/` and the adaptive budget with a fitted prior's
`fitted_runs/` beside it (the same layout, written by `benchmarks/cgrpo/run.py`, `control.py` and `run.sh`). The probe
and the adaptive budget left the library (BENCHMARKS.md section 15): their runs stay, `run.sh` runs GRPO's frontier and
LZE only, and the runners of the savers' arms (`run.sh`'s, `control.py`, `worth.py`) are at commit 11e6ad3.
Per regime: the tables of `benchmarks/frontier/report.py` (accuracy, cost, GRPO's frontier at each arm's
budget); every arm against GRPO with intervals corrected for the number of arms (Bonferroni intervals, Holm-adjusted
p-values); every arm against GRPO's own curve read at the arm's rollouts; then the issue's goals for the adaptive
budget, met or missed (goal 3c: against C-GRPO at equal rollouts). The protocol is in BENCHMARKS.md sections 1-3.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.frontier.report import WINDOW, figure, half_width, load, report, rows, smoothed_final  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results" / "adaptive"
REGIMES = {"carries": "`carries`", "dead": "the dead-mass regime", "arithmetic": "`arithmetic`"}
BASELINE = "grpo"
FRONTIER = [
    "grpo:per_device_train_batch_size=256",
    "grpo:per_device_train_batch_size=128",
    "grpo:num_generations=4,per_device_train_batch_size=256",
    "grpo:num_generations=2,per_device_train_batch_size=128",
]
ADAPTIVE = "lze:rollout_rounds=2+4+8"  # the arm label of the committed runs (settings as named then)
FITTED = (
    ADAPTIVE + " (fitted prior)"
)  # the same setting once a new prompt's prior is fitted to the batch (`fitted_runs/`)
CGRPO = "cgrpo"
CONTROL = "uniform_rounds"  # the adaptive budget, a uniform choice of as many groups (control.py, at commit 11e6ad3)
EXTRA_RUNS = ("cgrpo_runs", "control_runs", "worth_runs")
WORTH = "worth_rounds"  # going on while a group may reach the update (worth.py, at commit 11e6ad3), experimental
TRL_CHECK = "grpo@cgrpo-trl"  # plain GRPO under C-GRPO's TRL (1.14.2), one seed: not an arm, the version check
PROBE_LIMIT_K, G = 2, 8  # the first round and the group of the probe limit k/G + (1 - d)(1 - k/G)
METRICS = {"test_last3": "in-domain", "ood_last3": "OOD", "train_last3": "train prompts"}


def corrected(differences: pd.Series, arms: int) -> tuple[float, float, float, float]:
    """Mean, Bonferroni-corrected 95% t interval (over `arms` comparisons) and the paired t-test's p-value."""
    values = differences.dropna().astype(float).to_numpy()
    mean = float(values.mean())
    if len(values) < 2:
        return mean, np.nan, np.nan, np.nan
    if values.std(ddof=1) == 0:  # the same difference on every seed
        return mean, mean, mean, 1.0 if mean == 0 else 0.0
    half = half_width(pd.Series(values), 1 - 0.05 / arms)
    return mean, mean - half, mean + half, float(stats.ttest_1samp(values, 0.0).pvalue)


def curve_at(curve: list[dict], rollouts: float, key: str) -> float:
    """A run's 3-evaluation mean of `key` at its last evaluation with at most `rollouts` generated."""
    reached = [i for i, row in enumerate(curve) if row["rollouts"] <= rollouts * 1.001]
    last = reached[-1] if reached else 0
    return float(np.mean([row[key] for row in curve[max(last - WINDOW + 1, 0) : last + 1]]))


def against_grpo(frame: pd.DataFrame, arms: dict) -> tuple[str, dict]:
    """Every arm minus GRPO (at the end, and GRPO read at the arm's rollouts), corrected for the arms compared."""
    others = [a for a in dict.fromkeys(frame.arm) if a != BASELINE]
    base = frame[frame.arm == BASELINE].set_index("seed")
    table, out = [], {}
    for metric in METRICS:
        diffs = {a: frame[frame.arm == a].set_index("seed")[metric] - base[metric] for a in others}
        results = {a: corrected(d, len(others)) for a, d in diffs.items()}
        p_values = [results[a][3] for a in others]
        holm = multipletests(p_values, method="holm")[1] if not np.isnan(p_values).any() else p_values
        curve_key = {"test_last3": "test_accuracy", "ood_last3": "ood_accuracy", "train_last3": "train_accuracy"}[
            metric
        ]
        for a, p_holm in zip(others, holm):
            mean, low, high, _ = results[a]
            part = frame[frame.arm == a].set_index("seed")
            at_equal = pd.Series(
                {
                    s: part.loc[s, metric]
                    - curve_at(arms[BASELINE][s]["curve"], arms[a][s]["summary"]["rollouts"], curve_key)
                    for s in part.index
                }
            )
            eq_mean, eq_low, eq_high, _ = corrected(at_equal, len(others))
            out.setdefault(a, {})[metric] = {
                "minus_grpo": [mean, low, high, float(p_holm)],
                "minus_grpo_at_equal_rollouts": [eq_mean, eq_low, eq_high],
            }
            table.append(
                [
                    METRICS[metric],
                    f"`{a}`",
                    f"{part.fresh_rollouts_ratio.mean():.3f}",
                    f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]",
                    f"{p_holm:.3f}",
                    f"{eq_mean:+.3f} [{eq_low:+.3f}, {eq_high:+.3f}]",
                ]
            )
    headers = [
        "metric",
        "run",
        "fresh rollouts / GRPO",
        "- GRPO at the end (corrected 95%)",
        "Holm p",
        "- GRPO's curve at the run's rollouts (corrected 95%)",
    ]
    return tabulate(table, headers, tablefmt="github"), out


def completed_groups(seeds: dict[int, dict]) -> float:
    """The mean over seeds of a run's mean `lze/completed_groups` per generation batch."""
    return float(np.mean([np.mean([e["lze/completed_groups"] for e in run["steps"]]) for run in seeds.values()]))


FIRST_EPOCH = 2048 // 64  # steps of the first pass over the training prompts (every regime: 2048 prompts, 64 a step)


def first_epoch_rollouts(arms: dict, arm: str) -> tuple[float, float]:
    """An arm's fresh rollouts over GRPO's (same seeds) in the first pass over the training prompts (every prompt
    new) and after it, from each step's `lze/fresh_rollouts`."""
    sums = {}
    for name in (arm, BASELINE):
        steps = pd.DataFrame([e for seed in sorted(arms[arm]) for e in arms[name][seed]["steps"]])
        first = steps.step <= FIRST_EPOCH
        sums[name] = steps["lze/fresh_rollouts"][first].sum(), steps["lze/fresh_rollouts"][~first].sum()
    return sums[arm][0] / sums[BASELINE][0], sums[arm][1] / sums[BASELINE][1]


def at_equal_rollouts(arms: dict, arm: str, other: str, compared: int) -> tuple[float, float, float, float]:
    """`arm` minus `other` in-domain, paired by seed, each run's curve read at the smaller of the two runs' total
    rollouts (`curve_at`), with the corrected interval of [`corrected`]."""
    seeds = sorted(set(arms[arm]) & set(arms[other]))
    differences = {}
    for seed in seeds:
        a, b = arms[arm][seed], arms[other][seed]
        rollouts = min(a["summary"]["rollouts"], b["summary"]["rollouts"])
        differences[seed] = curve_at(a["curve"], rollouts, "test_accuracy") - curve_at(
            b["curve"], rollouts, "test_accuracy"
        )
    return corrected(pd.Series(differences, dtype=float), compared)


def goals(regime: str, frame: pd.DataFrame, summary: dict, versus: dict, arms: dict, adaptive: str) -> list[list[str]]:
    """The issue's goals 1-3 for an adaptive budget's arm in one regime: the measured figure and met or missed."""
    arm = summary[adaptive]
    d = float(frame[frame.arm == BASELINE].dead_share.mean())
    limit = PROBE_LIMIT_K / G + (1 - d) * (1 - PROBE_LIMIT_K / G)
    mean, low, high, _ = versus[adaptive]["test_last3"]["minus_grpo"]
    rollouts = arm["fresh_rollouts_ratio"]
    best = arm.get("test_last3_best_frontier")
    best_gap = arm.get("test_last3_minus_best_frontier")
    curve_gap = versus[adaptive]["test_last3"]["minus_grpo_at_equal_rollouts"][0]
    probe_gap = float(
        (
            frame[frame.arm == adaptive].set_index("seed").test_last3
            - frame[frame.arm == "lze:probe_generations=2,selection_ratio=0.33"].set_index("seed").test_last3
        ).mean()
    )
    name = f"{REGIMES[regime]}, `{adaptive}`"
    rows = [
        [
            name,
            "1. in-domain - GRPO, corrected lower bound >= -0.01",
            f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]",
            "met" if low >= -0.01 else "missed",
        ],
        [
            name,
            f"2. fresh rollouts <= probe limit {limit:.2f}x (GRPO dead share {d:.2f})",
            f"{rollouts:.3f}x",
            "met" if rollouts <= limit else "missed",
        ],
        [
            name,
            "3. in-domain at equal rollouts >= the best frontier point within its budget",
            f"{best_gap:+.3f} (`{best}`)" if best else "no frontier point within its budget",
            ("met" if best_gap >= 0 else "missed") if best else "n/a",
        ],
        [
            name,
            "3. in-domain >= GRPO's curve at its rollouts",
            f"{curve_gap:+.3f}",
            "met" if curve_gap >= 0 else "missed",
        ],
        [name, "(context) in-domain - the fixed-quota probe (0.33)", f"{probe_gap:+.3f}", ""],
        [name, "(context) groups completed per batch, of 64", f"{completed_groups(arms[adaptive]):.1f}", ""],
        [
            name,
            f"(context) fresh rollouts / GRPO's in steps 1-{FIRST_EPOCH} (every prompt new) and after",
            "{:.3f}x, {:.3f}x".format(*first_epoch_rollouts(arms, adaptive)),
            "",
        ],
    ]
    # what the change from the arm before it bought: the fitted prior against the pooled one, the rule against it
    before, what = {FITTED: (ADAPTIVE, "the prior"), WORTH: (FITTED, "the rule")}.get(adaptive, (None, ""))
    if before in arms:
        mean, low, high, _ = corrected(
            frame[frame.arm == adaptive].set_index("seed").test_last3
            - frame[frame.arm == before].set_index("seed").test_last3,
            len(arms) - 1,
        )
        rows.append(
            [name, f"({what}) in-domain - `{before}`, corrected 95%", f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]", ""]
        )
    if CONTROL in arms:
        mean, low, high, _ = corrected(
            frame[frame.arm == adaptive].set_index("seed").test_last3
            - frame[frame.arm == CONTROL].set_index("seed").test_last3,
            len(arms) - 1,
        )
        control_rollouts = summary[CONTROL]["fresh_rollouts_ratio"]
        rows.append(
            [
                name,
                f"(control) in-domain - the uniform choice of as many groups ({control_rollouts:.3f}x rollouts)",
                f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]",
                "",
            ]
        )
    if CGRPO in arms:
        mean, low, high, _ = at_equal_rollouts(arms, adaptive, CGRPO, len(arms) - 1)
        verdict = "strictly above" if low > 0 else ("met (at or above)" if mean >= 0 else "missed")
        rows += [
            [
                name,
                "3c. in-domain - C-GRPO at equal rollouts (corrected 95%)",
                f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]",
                verdict,
            ],
            [name, "(context) C-GRPO's fresh rollouts / GRPO", f"{summary[CGRPO]['fresh_rollouts_ratio']:.3f}x", ""],
        ]
    return rows


def selections_by_level(regime: str, arms: dict) -> list[list]:
    """How often each arm's update took a prompt of each training level (times selected per prompt, the run's end
    state `selected_per_prompt_by_level`, mean over seeds), for LZE and the arms that generate in rounds."""
    rows = []
    for arm in ("lze", "lze:probe_generations=2,selection_ratio=0.33", ADAPTIVE, FITTED, WORTH):
        if arm in arms:
            levels = pd.DataFrame(
                [run["final_prompt_state"]["selected_per_prompt_by_level"] for run in arms[arm].values()]
            )
            rows.append([REGIMES[regime], f"`{arm}`", *(f"level {c}: {levels[c].mean():.2f}" for c in levels)])
    return rows


DEMO_ARMS = ("grpo", "lze", "lze:probe_generations=2,selection_ratio=0.33")
"""The arms `lze-trl demo` runs one seed of (its `lze+prune` has no arm here)."""


def seed_spread(regime: str, frame: pd.DataFrame) -> list[list]:
    """How far one seed's final accuracy (mean of the last 3 evaluations) is from another's, per arm the demo runs:
    the largest difference between two seeds, in-domain and OOD (the noise of a one-seed run such as the demo's)."""
    spread = frame.groupby("arm")[["test_last3", "ood_last3"]].agg(lambda values: values.max() - values.min())
    return [
        [REGIMES[regime], f"`{arm}`", *(f"{v:.3f}" for v in spread.loc[arm])]
        for arm in DEMO_ARMS
        if arm in spread.index
    ]


README_ARMS = {  # the README's headline runs, as it names them
    "lze": "LZE",
    "lze:probe_generations=2,selection_ratio=0.33": "LZE + probe",
    FITTED: "LZE + adaptive budget",
    "grpo:num_generations=4,per_device_train_batch_size=256": "GRPO, half the group",
}


def readme_figure(frames: dict[str, pd.DataFrame], path: Path) -> None:
    """The README's figure: per regime, each headline run's in-domain accuracy minus GRPO's (paired by seed, mean and
    95% t interval) against its fresh rollouts as a share of GRPO's; GRPO is the point (1, 0)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(frames), figsize=(4.2 * len(frames), 3.6), sharey=True)
    for ax, (regime, frame) in zip(axes, frames.items()):
        grpo = frame[frame.arm == BASELINE].set_index("seed")["test_last3"]
        ax.axhline(0, color="grey", lw=0.8)
        ax.plot([1.0], [0.0], "ks", label="GRPO")
        for (arm, label), marker in zip(README_ARMS.items(), "oD^v"):
            runs = frame[frame.arm == arm].set_index("seed")
            mean, low, high, _ = corrected(runs["test_last3"] - grpo.reindex(runs.index), 1)  # one comparison
            x = runs["fresh_rollouts_ratio"].mean()
            ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt=marker, capsize=3, label=label)
        ax.set_title(f"{REGIMES[regime].replace('`', '')} (GRPO: {grpo.mean():.3f})")
        ax.set_xlabel("fresh rollouts / GRPO's")
        ax.set_xlim(0.3, 1.08)
        ax.set_xticks(np.arange(0.4, 1.01, 0.2))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("in-domain accuracy - GRPO's")
    axes[-1].legend(fontsize=8, loc="lower right")
    fig.suptitle("Accuracy against generation, 5 seeds (BENCHMARKS.md sections 1-3)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def trl_versions(regime: str, check: dict, grpo: dict) -> list[list]:
    """GRPO under TRL 1.14.2 (`check`) against GRPO under 1.16.0 on the same seeds: each metric's 3-evaluation mean."""
    rows = []
    for seed in sorted(check):
        for metric in ("test", "ood"):
            old, new = (smoothed_final(run[seed]["curve"], f"{metric}_accuracy") for run in (check, grpo))
            rows.append([REGIMES[regime], seed, metric, f"{old:.3f}", f"{new:.3f}", f"{old - new:+.3f}"])
    return rows


def timing(folder: Path, prior: str) -> str:
    """Goal 4's table from the `bench_vllm_cpu.py` runs in `folder` (`run*.json`, the adaptive budget with the `prior`
    of a new prompt): per arm, the median over the runs of each run's mean over its measured steps, and the step and
    generation over GRPO's (the first arm)."""
    runs = [json.loads(path.read_text())["results"] for path in sorted(folder.glob("run*.json"))]
    frame = pd.DataFrame([arm for run in runs for arm in run])
    columns = ["rollouts", "update_rows", "total", "generation", "scoring", "update"]
    medians = frame.groupby("selector", sort=False)[columns].median()
    base = medians.iloc[0]
    medians["step / GRPO"] = medians.total / base.total
    medians["generation / GRPO"] = medians.generation / base.generation
    table = tabulate(medians.reset_index(), headers="keys", tablefmt="github", floatfmt=".2f", showindex=False)
    return (
        f"\n## Time per step (goal 4), the {prior}: `benchmarks/bench_vllm_cpu.py`, medians of {len(runs)} runs\n\n"
        f"{table}\n\nEach run's s/step (generation): "
        + "; ".join(
            ", ".join(f"{arm['selector']} {arm['total']:.1f} ({arm['generation']:.1f})" for arm in run) for run in runs
        )
        + "\n"
    )


def build(results: Path = RESULTS, figures: bool = False) -> str:
    """The whole report (Markdown) from `results/runs`; with `figures`, also each regime's figure."""
    parts, goal_rows, trl_check, levels, spreads, frames = [], [], [], [], [], {}
    for regime, name in REGIMES.items():
        folders = [str(p) for runs in ("runs", *EXTRA_RUNS) for p in (results / runs).glob(f"{regime}_s*")]
        arms = load(sorted(folders))
        fitted = load(sorted(str(p) for p in (results / "fitted_runs").glob(f"{regime}_s*")))
        if ADAPTIVE in fitted:  # run under the code that fits a new prompt's prior, under the same setting's name
            arms[FITTED] = fitted[ADAPTIVE]
        if TRL_CHECK in arms:
            trl_check += trl_versions(regime, arms.pop(TRL_CHECK), arms[BASELINE])
        if not arms:
            continue
        frame = frames[regime] = rows(arms, BASELINE, FRONTIER)
        tables, summary = report(frame, BASELINE, FRONTIER)
        versus_table, versus = against_grpo(frame, arms)
        seeds = ", ".join(map(str, sorted(frame.seed.unique())))
        parts.append(
            f"## {name} (seeds {seeds})\n\n{tables}\n\nAgainst GRPO, paired by seed, 95% intervals "
            f"corrected for the {len(arms) - 1} arms (Bonferroni; Holm-adjusted p-values of the paired t-tests):\n\n"
            f"{versus_table}\n"
        )
        levels += selections_by_level(regime, arms)
        spreads += seed_spread(regime, frame)
        goal_rows += [
            row
            for arm in (ADAPTIVE, FITTED, WORTH)
            if arm in summary
            for row in goals(regime, frame, summary, versus, arms, arm)
        ]
        if figures:
            figure(arms, results / f"{regime}_accuracy_vs_rollouts.png")
    if figures:
        readme_figure(frames, results / "readme.png")
    head = "# The adaptive rollout budget (BENCHMARKS.md sections 1-3), rebuilt by benchmarks/adaptive/report.py\n\n"
    goal_table = tabulate(goal_rows, ["regime", "goal", "measured (mean over seeds)", ""], tablefmt="github")
    text = head + "## The issue's goals for the adaptive budget's arms\n\n" + goal_table + "\n\n" + "\n".join(parts)
    for folder, prior in (("timing", "pooled prior"), ("timing_fitted", "fitted prior")):
        if (results / folder).is_dir():
            text += timing(results / folder, prior)
    text += (
        "\n## Times each training level's prompts were selected for the update (per prompt, mean over seeds)\n\n"
        + tabulate(levels, ["regime", "arm"] + ["by level"] * (max(map(len, levels)) - 2), tablefmt="github")
        + "\n"
    )
    text += (
        "\n## How far one seed is from another: the largest difference of the final accuracy between two seeds\n\n"
        + tabulate(spreads, ["regime", "arm", "in-domain", "OOD"], tablefmt="github", disable_numparse=True)
        + "\n"
    )
    if trl_check:
        headers = ["regime", "seed", "metric (last 3)", "GRPO, TRL 1.14.2", "GRPO, TRL 1.16.0", "difference"]
        text += (
            "\n## The TRL check: plain GRPO under C-GRPO's TRL against the same seed under the others' TRL\n\n"
            + tabulate(trl_check, headers, tablefmt="github")
            + "\n"
        )
    return text


def report_main(
    build: Callable[..., str], results: Path, description: str, argv: list[str] | None, name: str = "report.md"
) -> int:
    """The command line of a report rebuilt from committed raw results: write `results/<name>` (and the
    figures), or with `--check` rebuild it and return 1 if it differs from the committed one."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--results", type=Path, default=results, help="folder with runs/ and report.md")
    parser.add_argument("--check", action="store_true", help="fail if the rebuilt report differs from the committed")
    cli = parser.parse_args(argv)
    text = build(cli.results, figures=not cli.check)
    path = cli.results / name
    if cli.check:
        same = path.exists() and path.read_text() == text
        print("the committed report rebuilds" if same else f"{path} differs from its rebuild from {cli.results}/runs")
        return 0 if same else 1
    path.write_text(text)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
