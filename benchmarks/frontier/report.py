"""Report of runs against GRPO and GRPO's frontier (first written for the rollout-budget benchmark, issue #23): does a
mode save fresh rollouts against GRPO *and* against GRPO with a smaller generation batch?

    python benchmarks/frontier/report.py OUT_DIR [OUT_DIR ...] --baseline grpo \
        --controls "grpo:per_device_train_batch_size=256" "grpo:per_device_train_batch_size=128" \
        --output OUT

Reads every `seed_*/demo_results.json` (or `.json.gz`) under the given `python benchmarks/bench.py train` folders
and writes `report.md`, `report.json` and `accuracy_vs_rollouts.png`. A folder given as `PATH@LABEL` (e.g. a longer
run of some arms, `--steps 240`) names its arms `ARM@LABEL`, so they sit beside the same arms of the main folder.

Per run (arm) and seed: the mean in-domain and OOD accuracy over the last 3 evaluations, generated (fresh) rollouts
relative to the baseline's, dead groups among those generated, the rollouts
and FLOPs spent until the run's 3-evaluation mean first reached the target, the step projected under vLLM
(`lze_examples.demo.projection`; with `--profile PATH`, re-projected from the run's totals under that per-token
profile, e.g. one written by `benchmarks/bench_vllm_cpu.py --profile`), and whether the run's guards warned
(`methods.<m>.warnings`). The target of a seed is the baseline's mean in-domain accuracy over its last 3 evaluations on
that seed (the same for every arm, labelled ones included); "90% target" is the start plus 90% of the baseline's gain,
less fragile to a plateau one prompt short. Means over seeds come with a 95% t interval; differences are paired by
seed. Ratios "to the baseline" divide each seed's figure by the baseline's on the same seed; "to the best control" by
the smallest among the control arms (labelled ones included) that reached the target on that seed. The matched control
of an arm is the control (or the baseline) with the same label whose fresh rollouts per step are closest to the arm's:
the GRPO run that generates what the arm generates. The frontier table judges each arm against GRPO's best use of its
budget: per metric (in-domain, OOD, train prompts), the best of the baseline and the controls that generate at most
the arm's fresh rollouts (2% slack), fewer prompts or fewer rollouts per prompt alike. The dead share counts the groups
that could reach the update: all the generated ones, or a probe's completed ones (`lze/completed_dead_frac`).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from tabulate import tabulate

from lze_examples.demo.projection import load_profile, projected_summary_seconds
from lze_examples.demo.summary import first_reaching


WINDOW = 3


def load(folders: list[str]) -> dict[str, dict[int, dict]]:
    """`{arm: {seed: method result}}` from every `seed_*/demo_results.json` under `folders`."""
    arms: dict[str, dict[int, dict]] = {}
    for folder in folders:
        folder, _, label = folder.partition("@")
        paths = sorted(Path(folder).glob("seed_*/demo_results.json")) + sorted(
            Path(folder).glob("seed_*/demo_results.json.gz")
        )
        for path in paths:
            results = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
            seed = int(results["config"]["seed"])
            for name, method in results["methods"].items():
                arms.setdefault(f"{name}@{label}" if label else name, {})[seed] = method
    return arms


def smoothed_final(curve: list[dict], key: str, window: int = WINDOW) -> float:
    return float(np.mean([r[key] for r in curve[-window:]]))


def reach(curve: list[dict], target: float, key: str = "rollouts") -> float | None:
    """`key` (rollouts, total FLOPs) at the first evaluation whose 3-evaluation mean reaches `target`."""
    row = first_reaching(curve, "test_accuracy", target, WINDOW)
    return None if row is None else float(row[key])


RECORDED_METRICS = {"lze/first_round_agreement": "lze/probe_agreement"}
"""Metrics the committed runs logged under the name they had then."""


def probe_mean(steps: list[dict] | None, key: str) -> float | None:
    """Mean of a run's per-step metric of its rounds (`lze/completed_dead_frac`, `lze/first_round_agreement`, which the
    committed runs logged as `lze/probe_agreement`); `None` without rounds."""
    recorded = RECORDED_METRICS.get(key)
    values = [e[key] if key in e else e[recorded] for e in steps or [] if key in e or recorded in e]
    return float(np.mean(values)) if values else None


def pick(value: float | None, otherwise: float | None) -> float | None:
    return otherwise if value is None else value


def label(arm: str) -> str:
    return arm.partition("@")[2]


def rows(
    arms: dict[str, dict[int, dict]], baseline: str, controls: list[str], profile: dict | None = None
) -> pd.DataFrame:
    """One row per (arm, seed) with the per-seed figures and ratios; steps projected under `profile` when given."""
    out = []
    controls = [c for c in arms if c.partition("@")[0] in controls]
    for arm, seeds in arms.items():
        for seed, method in seeds.items():
            base = arms[baseline].get(seed)
            if base is None:
                continue
            s, b = method["summary"], base["summary"]
            steps = max(s["optimizer_steps"], 1)
            target = smoothed_final(base["curve"], "test_accuracy")
            start = base["curve"][0]["test_accuracy"]
            target90 = start + 0.9 * (target - start)
            reached, reached90 = reach(method["curve"], target), reach(method["curve"], target90)
            base_reach, base_reach90 = reach(base["curve"], target), reach(base["curve"], target90)
            control_reach = [reach(arms[c][seed]["curve"], target) for c in controls if seed in arms[c]]
            control_reach = [r for r in control_reach if r is not None]
            if profile is None:
                projected, base_projected = s.get("projected_vllm_step_seconds"), b.get("projected_vllm_step_seconds")
            else:
                projected = projected_summary_seconds(profile, s)
                base_projected = projected_summary_seconds(profile, b)
            flops_reached = reach(method["curve"], target, "total_flops")
            out.append(
                {
                    "arm": arm,
                    "seed": seed,
                    "test_final": s["final_test_accuracy"],
                    "ood_final": s["final_ood_accuracy"],
                    "test_last3": smoothed_final(method["curve"], "test_accuracy"),
                    "ood_last3": smoothed_final(method["curve"], "ood_accuracy"),
                    "train_last3": smoothed_final(method["curve"], "train_accuracy"),
                    # the groups that could reach the update: all generated ones, or a probe's completed ones
                    "update_dead_share": pick(
                        probe_mean(method.get("steps"), "lze/completed_dead_frac"), s.get("dead_share")
                    ),
                    "probe_agreement": pick(probe_mean(method.get("steps"), "lze/first_round_agreement"), np.nan),
                    "fresh_rollouts_per_step": s["rollouts"] / steps,
                    "fresh_rollouts_ratio": s["rollouts"] / b["rollouts"],
                    "dead_share": s.get("dead_share"),
                    "reached": reached is not None,
                    "rollouts_to_target_vs_base": (
                        reached / base_reach if reached is not None and base_reach else np.nan
                    ),
                    "rollouts_to_target_vs_best_control": (
                        reached / min(control_reach) if reached is not None and control_reach else np.nan
                    ),
                    "reached90": reached90 is not None,
                    "rollouts_to_target90_vs_base": (
                        reached90 / base_reach90 if reached90 is not None and base_reach90 else np.nan
                    ),
                    "flops_to_target_vs_base": (
                        flops_reached / reach(base["curve"], target, "total_flops")
                        if flops_reached is not None and base_reach
                        else np.nan
                    ),
                    "total_flops_ratio": s["total_flops"] / b["total_flops"],
                    "projected_vllm_step_ratio": projected / base_projected
                    if projected and base_projected
                    else np.nan,
                    "cpu_seconds_ratio": s["train_cpu_seconds"] / b["train_cpu_seconds"],
                    # what the run's guards said (LZEWarning); runs written before it was recorded have no key
                    "warned": bool(method["warnings"]) if "warnings" in method else None,
                }
            )
    return pd.DataFrame(out)


def half_width(values: pd.Series, confidence: float = 0.95) -> float:
    """The half-width of the two-sided t interval at `confidence` of the mean of `values` (scipy's `ttest_1samp`; NaN
    dropped; 0 for fewer than two values, or one value repeated)."""
    values = values.dropna().astype(float)
    if values.nunique() < 2:  # fewer than two, or one value repeated: no spread
        return 0.0
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(confidence)
    return float(high - low) / 2


def interval(values: pd.Series) -> str:
    """`mean [low, high]` with a 95% t interval (`mean` alone for one value; `n/a` for none)."""
    values = values.dropna().astype(float)
    if len(values) == 0:
        return "n/a"
    mean = values.mean()
    if len(values) == 1:
        return f"{mean:.3f}"
    half = half_width(values)
    return f"{mean:.3f} [{mean - half:.3f}, {mean + half:.3f}]"


def differences(frame: pd.DataFrame, arm: str, other: str, column: str) -> pd.Series:
    a = frame[frame.arm == arm].set_index("seed")[column]
    b = frame[frame.arm == other].set_index("seed")[column]
    return (a - b).dropna()


def paired(frame: pd.DataFrame, arm: str, other: str, column: str) -> str:
    """The arm's mean difference to `other` over the seeds both ran, with its 95% t interval."""
    return interval(differences(frame, arm, other, column))


def paired_mean(frame: pd.DataFrame, arm: str, other: str, column: str) -> float:
    return float(differences(frame, arm, other, column).mean())


def warned(part: pd.DataFrame) -> str | None:
    """`k/n`: of the `n` seeds whose guard warnings were recorded, `k` warned (`None`: none recorded)."""
    said = part.warned.dropna()
    return f"{int(said.astype(bool).sum())}/{len(said)}" if len(said) else None


def matched_control(frame: pd.DataFrame, arm: str, candidates: list[str]) -> str | None:
    """The candidate with the arm's label whose fresh rollouts per step are closest to the arm's (`None`: the arm is
    one of them, or no candidate has its label)."""
    if arm in candidates:
        return None
    same = [c for c in candidates if label(c) == label(arm) and (frame.arm == c).any()]
    if not same:
        return None
    per_step = frame.groupby("arm").fresh_rollouts_per_step.mean()
    return min(same, key=lambda c: abs(per_step[c] - per_step[arm]))


def best_frontier(frame: pd.DataFrame, arm: str, candidates: list[str], column: str) -> str | None:
    """
    The frontier point (the baseline or a control, same label) with the best mean `column` among those that generate
    at most the arm's fresh rollouts (2% slack): GRPO's best use of the arm's budget, by fewer prompts or fewer
    rollouts per prompt (`None`: the arm is one of them, or none generates that little).
    """
    if arm in candidates:
        return None
    ratio = frame.groupby("arm").fresh_rollouts_ratio.mean()
    means = frame.groupby("arm")[column].mean()
    within = [c for c in candidates if label(c) == label(arm) and c in ratio and ratio[c] <= ratio[arm] + 0.02]
    return max(within, key=lambda c: means[c]) if within else None


def report(frame: pd.DataFrame, baseline: str, controls: list[str]) -> tuple[str, dict]:
    """Two Markdown tables (accuracy; cost) and the per-arm summary written into `report.json`."""
    arms = list(dict.fromkeys(frame.arm))
    candidates = list(dict.fromkeys([baseline] + [a for a in arms if a.partition("@")[0] in (*controls, baseline)]))
    base = frame[frame.arm == baseline]
    base_se = base[["test_last3", "ood_last3"]].std(ddof=1) / np.sqrt(len(base))
    accuracy, cost, frontier, summary = [], [], [], {}
    for arm in arms:
        part = frame[frame.arm == arm]
        matched = matched_control(frame, arm, candidates)
        best = {c: best_frontier(frame, arm, candidates, c) for c in ("test_last3", "ood_last3", "train_last3")}
        gap = {c: paired_mean(frame, arm, baseline, c) for c in ("test_last3", "ood_last3")}
        summary[arm] = {
            "seeds": int(len(part)),
            **{
                c: float(part[c].mean())
                for c in part.columns
                if c not in ("arm", "seed", "reached", "reached90", "warned")
            },
            "warned": warned(part),
            "reached": int(part["reached"].sum()),
            "reached90": int(part["reached90"].sum()),
            "test_last3_gap": gap["test_last3"],
            "ood_last3_gap": gap["ood_last3"],
            "within_one_se_test": bool(gap["test_last3"] >= -base_se["test_last3"]),
            "within_one_se_ood": bool(gap["ood_last3"] >= -base_se["ood_last3"]),
            "matched_control": matched,
        }
        if matched:
            for c in ("test_last3", "ood_last3"):
                summary[arm][f"{c}_minus_matched"] = paired_mean(frame, arm, matched, c)
        for c, point in best.items():
            if point:
                summary[arm][f"{c}_best_frontier"] = point
                summary[arm][f"{c}_minus_best_frontier"] = paired_mean(frame, arm, point, c)
                summary[arm][f"{c}_minus_best_frontier_interval"] = paired(frame, arm, point, c)
        if any(best.values()):
            frontier.append(
                [f"`{arm}`", interval(part.fresh_rollouts_ratio)]
                + [cell for c, point in best.items() for cell in (f"`{point}`", paired(frame, arm, point, c))]
            )
        accuracy.append(
            [
                f"`{arm}`",
                len(part),
                interval(part.test_last3),
                paired(frame, arm, baseline, "test_last3") if arm != baseline else "",
                interval(part.ood_last3),
                paired(frame, arm, baseline, "ood_last3") if arm != baseline else "",
                interval(part.train_last3),
                f"`{matched}`" if matched else "",
                paired(frame, arm, matched, "test_last3") if matched else "",
                paired(frame, arm, matched, "ood_last3") if matched else "",
            ]
        )
        cost.append(
            [
                f"`{arm}`",
                interval(part.fresh_rollouts_ratio),
                interval(part.update_dead_share),
                interval(part.probe_agreement) if part.probe_agreement.notna().any() else "",
                f"{int(part.reached.sum())}/{len(part)}",
                interval(part.rollouts_to_target_vs_base),
                interval(part.rollouts_to_target_vs_best_control) if arm not in candidates else "",
                f"{int(part.reached90.sum())}/{len(part)}",
                interval(part.rollouts_to_target90_vs_base),
                interval(part.flops_to_target_vs_base),
                interval(part.total_flops_ratio),
                interval(part.projected_vllm_step_ratio),
                warned(part) or "not recorded",
            ]
        )
    accuracy_headers = [
        "run",
        "seeds",
        "in-domain, last 3",
        "- baseline (paired)",
        "OOD, last 3",
        "- baseline (paired)",
        "train prompts, last 3",
        "matched control",
        "in-domain - matched",
        "OOD - matched",
    ]
    cost_headers = [
        "run",
        "fresh rollouts / baseline",
        "dead share (groups that could reach the update)",
        "first-round agreement",
        "reached target",
        "rollouts to target / baseline's",
        "/ best control's",
        "reached 90% target",
        "rollouts to 90% target / baseline's",
        "FLOPs to target / baseline's",
        "total FLOPs / baseline",
        "projected vLLM step / baseline",
        "seeds whose run warned",
    ]
    text = (
        "Accuracy (mean [95% t interval] over seeds; differences paired by seed):\n\n"
        + tabulate(accuracy, accuracy_headers, tablefmt="github")
        + "\n\nCost (ratios per seed to the baseline's on the same seed):\n\n"
        + tabulate(cost, cost_headers, tablefmt="github")
    )
    if frontier:
        headers = ["run", "fresh rollouts / baseline"] + [
            h for name in ("in-domain", "OOD", "train prompts") for h in (f"best frontier, {name}", "- it (paired)")
        ]
        text += (
            "\n\nAgainst GRPO's frontier at the run's budget: per metric, the best of the baseline and the controls "
            "that generate at most the run's fresh rollouts (2% slack), paired by seed:\n\n"
            + tabulate(frontier, headers, tablefmt="github")
        )
    return text, summary


def figure(arms: dict[str, dict[int, dict]], path: Path) -> None:
    """Mean in-domain and OOD accuracy against generated rollouts (mean over seeds), one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for arm, seeds in arms.items():
        curves = [method["curve"] for method in seeds.values()]
        length = min(len(c) for c in curves)
        rollouts = np.mean([[r["rollouts"] for r in c[:length]] for c in curves], axis=0)
        for ax, key in zip(axes, ("test_accuracy", "ood_accuracy")):
            ax.plot(
                rollouts, np.mean([[r[key] for r in c[:length]] for c in curves], axis=0), marker="o", ms=3, label=arm
            )
    for ax, title in zip(axes, ("in-domain accuracy", "OOD accuracy")):
        ax.set_xlabel("rollouts generated")
        ax.set_title(f"{title} (mean over seeds)")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="bench folders (seed_*/demo_results.json[.gz]), PATH@LABEL allowed")
    parser.add_argument("--baseline", default="grpo")
    parser.add_argument("--controls", nargs="*", default=[])
    parser.add_argument("--output", required=True)
    parser.add_argument("--profile", default=None, help="re-project the vLLM step under this per-token profile (JSON)")
    parser.add_argument(
        "--from_json",
        default=None,
        help="rebuild the tables from the per-seed rows of a committed report.json instead of the bench folders "
        "(no figure, no re-projection)",
    )
    cli = parser.parse_args()
    if cli.profile and not Path(cli.profile).is_file():
        parser.error(f"--profile {cli.profile}: no such file (write one with benchmarks/bench_vllm_cpu.py --profile)")
    if bool(cli.folders) == bool(cli.from_json):
        parser.error("give bench folders or --from_json REPORT_JSON (one of the two)")
    if cli.from_json:
        arms, frame = None, pd.DataFrame(json.loads(Path(cli.from_json).read_text())["rows"])
        if "update_dead_share" not in frame:  # reports written before probe-then-complete
            frame["update_dead_share"] = frame["dead_share"]
        frame = frame.assign(**{c: np.nan for c in ("train_last3",) if c not in frame})
        frame = frame.assign(**{c: None for c in ("warned",) if c not in frame})
        frame = frame.assign(**{c: np.nan for c in ("probe_agreement",) if c not in frame})
    else:
        arms = load(cli.folders)
        frame = rows(arms, cli.baseline, cli.controls, load_profile(cli.profile) if cli.profile else None)
    table, summary = report(frame, cli.baseline, cli.controls)
    out = Path(cli.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(table + "\n")
    (out / "report.json").write_text(json.dumps({"arms": summary, "rows": frame.to_dict("records")}, indent=1))
    if arms is not None:
        figure(arms, out / "accuracy_vs_rollouts.png")
    print(table)


if __name__ == "__main__":
    main()
