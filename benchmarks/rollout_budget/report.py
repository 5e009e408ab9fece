"""Report of the rollout-budget benchmark (issue #23): does a mode save fresh rollouts against GRPO *and* against GRPO
with a smaller generation batch?

    python benchmarks/rollout_budget/report.py OUT_DIR [OUT_DIR ...] --baseline grpo \
        --controls "grpo:per_device_train_batch_size=256" "grpo:per_device_train_batch_size=128" \
        --output benchmarks/results/rollout_budget/carries

Reads every `seed_*/demo_results.json` under the given `python benchmarks/bench.py train` folders and writes
`report.md`, `report.json` and `accuracy_vs_rollouts.png`. Per run (arm) and seed: final in-domain and OOD accuracy,
their mean over the last 3 evaluations, generated (fresh) rollouts per step relative to the baseline's, the replayed
share of the updated groups, dead groups among those generated, the rollouts and FLOPs spent until the run's
3-evaluation mean first reached the baseline's smoothed final in-domain accuracy (`reach_test_*`: the same target for
every arm of a seed), and the step projected under vLLM (`lze_trl.demo.projection`). Means over seeds come with a 95%
t interval; differences to the baseline are paired by seed. Ratios "to the baseline" divide each seed's figure by
the baseline's on the same seed; "to the best control" by the smallest among the control arms that reached the
target on that seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from tabulate import tabulate


def load(folders: list[str]) -> dict[str, dict[int, dict]]:
    """`{arm: {seed: method result}}` from every `seed_*/demo_results.json` under `folders`."""
    arms: dict[str, dict[int, dict]] = {}
    for folder in folders:
        for path in sorted(Path(folder).glob("seed_*/demo_results.json")):
            results = json.loads(path.read_text())
            seed = int(results["config"]["seed"])
            for name, method in results["methods"].items():
                arms.setdefault(name, {})[seed] = method
    return arms


def smoothed_final(curve: list[dict], key: str, window: int = 3) -> float:
    return float(np.mean([r[key] for r in curve[-window:]]))


def rows(arms: dict[str, dict[int, dict]], baseline: str, controls: list[str]) -> pd.DataFrame:
    """One row per (arm, seed) with the per-seed figures and ratios."""
    out = []
    for arm, seeds in arms.items():
        for seed, method in seeds.items():
            base = arms[baseline].get(seed)
            if base is None:
                continue
            s, b = method["summary"], base["summary"]
            steps = max(s["optimizer_steps"], 1)
            reach = s.get("reach_test_rollouts")
            base_reach = b.get("reach_test_rollouts")
            control_reach = [arms[c][seed]["summary"].get("reach_test_rollouts") for c in controls if seed in arms[c]]
            control_reach = [r for r in control_reach if r is not None]
            projected, base_projected = s.get("projected_vllm_step_seconds"), b.get("projected_vllm_step_seconds")
            out.append(
                {
                    "arm": arm,
                    "seed": seed,
                    "test_final": s["final_test_accuracy"],
                    "ood_final": s["final_ood_accuracy"],
                    "test_last3": smoothed_final(method["curve"], "test_accuracy"),
                    "ood_last3": smoothed_final(method["curve"], "ood_accuracy"),
                    "fresh_rollouts_per_step": s["rollouts"] / steps,
                    "fresh_rollouts_ratio": s["rollouts"] / b["rollouts"],
                    "replayed_share": s.get("replayed_share", 0.0),
                    "dead_share": s.get("dead_share"),
                    "reached": reach is not None,
                    "rollouts_to_target_vs_base": reach / base_reach if reach is not None and base_reach else np.nan,
                    "rollouts_to_target_vs_best_control": (
                        reach / min(control_reach) if reach is not None and control_reach else np.nan
                    ),
                    "flops_to_target_vs_base": (
                        s["reach_test_flops"] / b["reach_test_flops"]
                        if reach is not None and b.get("reach_test_flops")
                        else np.nan
                    ),
                    "total_flops_ratio": s["total_flops"] / b["total_flops"],
                    "projected_vllm_step_ratio": projected / base_projected
                    if projected and base_projected
                    else np.nan,
                    "cpu_seconds_ratio": s["train_cpu_seconds"] / b["train_cpu_seconds"],
                }
            )
    return pd.DataFrame(out)


def interval(values: pd.Series) -> str:
    """`mean [low, high]` with a 95% t interval (`mean` alone for one value; `n/a` for none)."""
    values = values.dropna().astype(float)
    if len(values) == 0:
        return "n/a"
    mean = values.mean()
    if len(values) == 1:
        return f"{mean:.3f}"
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return f"{mean:.3f} [{mean - half:.3f}, {mean + half:.3f}]"


def paired(frame: pd.DataFrame, arm: str, baseline: str, column: str) -> str:
    """The arm's mean difference to the baseline over the seeds both ran, with its 95% t interval."""
    a = frame[frame.arm == arm].set_index("seed")[column]
    b = frame[frame.arm == baseline].set_index("seed")[column]
    return interval((a - b).dropna())


def report(frame: pd.DataFrame, baseline: str) -> tuple[str, dict]:
    arms = list(dict.fromkeys(frame.arm))
    table, summary = [], {}
    for arm in arms:
        part = frame[frame.arm == arm]
        base_se = frame[frame.arm == baseline]["test_last3"].std(ddof=1) / np.sqrt((frame.arm == baseline).sum())
        base_se_ood = frame[frame.arm == baseline]["ood_last3"].std(ddof=1) / np.sqrt((frame.arm == baseline).sum())
        gap = (
            part.set_index("seed")["test_last3"] - frame[frame.arm == baseline].set_index("seed")["test_last3"]
        ).mean()
        gap_ood = (
            part.set_index("seed")["ood_last3"] - frame[frame.arm == baseline].set_index("seed")["ood_last3"]
        ).mean()
        summary[arm] = {
            "seeds": int(len(part)),
            **{c: float(part[c].mean()) for c in part.columns if c not in ("arm", "seed", "reached")},
            "reached": int(part["reached"].sum()),
            "test_last3_gap": float(gap),
            "ood_last3_gap": float(gap_ood),
            "within_one_se_test": bool(gap >= -base_se),
            "within_one_se_ood": bool(gap_ood >= -base_se_ood),
        }
        table.append(
            [
                f"`{arm}`",
                len(part),
                interval(part.test_last3),
                paired(frame, arm, baseline, "test_last3") if arm != baseline else "",
                interval(part.ood_last3),
                paired(frame, arm, baseline, "ood_last3") if arm != baseline else "",
                interval(part.fresh_rollouts_ratio),
                interval(part.replayed_share),
                interval(part.dead_share),
                f"{int(part.reached.sum())}/{len(part)}",
                interval(part.rollouts_to_target_vs_base),
                interval(part.rollouts_to_target_vs_best_control),
                interval(part.flops_to_target_vs_base),
                interval(part.total_flops_ratio),
                interval(part.projected_vllm_step_ratio),
            ]
        )
    headers = [
        "run",
        "seeds",
        "in-domain, last 3",
        "- baseline (paired)",
        "OOD, last 3",
        "- baseline (paired)",
        "fresh rollouts / baseline",
        "replayed share",
        "dead share",
        "reached target",
        "rollouts to target / baseline's",
        "/ best control's",
        "FLOPs to target / baseline's",
        "total FLOPs / baseline",
        "projected vLLM step / baseline",
    ]
    return tabulate(table, headers, tablefmt="github"), summary


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
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--baseline", default="grpo")
    parser.add_argument("--controls", nargs="*", default=[])
    parser.add_argument("--output", required=True)
    cli = parser.parse_args()
    arms = load(cli.folders)
    frame = rows(arms, cli.baseline, cli.controls)
    table, summary = report(frame, cli.baseline)
    out = Path(cli.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(table + "\n")
    (out / "report.json").write_text(json.dumps({"arms": summary, "rows": frame.to_dict("records")}, indent=1))
    figure(arms, out / "accuracy_vs_rollouts.png")
    print(table)


if __name__ == "__main__":
    main()
