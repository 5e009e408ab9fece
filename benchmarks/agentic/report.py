"""The report of BENCHMARKS.md section 13 (the generation saving in a multi-turn setting), rebuilt from the committed
raw results:

    python benchmarks/agentic/report.py            # writes benchmarks/results/agentic/report.md and model_calls.png
    python benchmarks/agentic/report.py --check    # rebuilds the report and fails if it differs from the committed

Reads `benchmarks/results/agentic/runs/<regime>_s<seed>/` (`demo_results.json.gz` and `turns.json`, written by
`run.py`). Per regime and arm, paired by seed with GRPO: model calls (over the run, and after the first pass over the
training prompts), rollouts and generated tokens over GRPO's (mean, and the seeds' range; no times: the arms ran
under different loads), model calls per rollout, and in-domain and OOD
accuracy (the mean of the last 3 evaluations) minus GRPO's with 95% t intervals corrected for the 3 arms compared
(Bonferroni). The protocol is in BENCHMARKS.md section 13.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pandas as pd
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.report import corrected, report_main  # noqa: E402
from benchmarks.agentic.run import REGIMES  # noqa: E402
from benchmarks.frontier.report import smoothed_final  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results" / "agentic"
BASELINE = "grpo"
FITTED = "lze+adaptive (fitted prior)"  # `lze+adaptive` run once a new prompt's prior is fitted (`fitted_runs/`)


def load(runs: Path, rename: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per (regime, seed, arm): its totals, its accuracies and its model calls per step (arms renamed by
    `rename`)."""
    rows = []
    for folder in sorted(runs.glob("*_s*")):
        regime, seed = folder.name.rsplit("_s", 1)
        results = json.loads(gzip.decompress((folder / "demo_results.json.gz").read_bytes()))
        turns = json.loads((folder / "turns.json").read_text())["arms"]
        for arm, method in results["methods"].items():
            calls = pd.DataFrame(turns[arm])
            epoch = results["config"]["n_train"] // results["config"]["prompts_per_step"]  # steps of the first pass
            rows.append(
                {
                    "regime": regime,
                    "seed": int(seed),
                    "arm": (rename or {}).get(arm, arm),
                    "rollouts": int(calls["rollouts"].sum()),
                    "model_calls": int(calls["model_turns"].sum()),
                    "model_calls_after_first_epoch": int(calls[calls.step >= epoch]["model_turns"].sum()),
                    "model_tokens": int(calls["model_tokens"].sum()),
                    "solved": float(calls["solved"].sum() / calls["rollouts"].sum()),
                    "calls_per_step": calls.groupby("step")["model_turns"].sum().to_dict(),
                    **{m: smoothed_final(method["curve"], f"{m}_accuracy") for m in ("test", "ood", "train")},
                }
            )
    return pd.DataFrame(rows)


def ratio(part: pd.DataFrame, arm: str, column: str) -> str:
    """The arm's `column` over GRPO's on the same seed: mean (lowest-highest seed)."""
    base = part[part.arm == BASELINE].set_index("seed")[column]
    values = (part[part.arm == arm].set_index("seed")[column] / base).dropna()
    return f"{values.mean():.3f}x ({values.min():.3f}-{values.max():.3f})"


def arms_of(frame: pd.DataFrame) -> list[str]:
    """The arms in `frame`, GRPO first."""
    return [BASELINE] + [arm for arm in dict.fromkeys(frame.arm) if arm != BASELINE]


def accuracy_delta(part: pd.DataFrame, arm: str, column: str) -> str:
    base = part[part.arm == BASELINE].set_index("seed")[column]
    compared = len(arms_of(part)) - 1
    mean, low, high, _ = corrected(part[part.arm == arm].set_index("seed")[column] - base, compared)
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def regime_table(part: pd.DataFrame) -> str:
    rows = []
    for arm in arms_of(part):
        mine = part[part.arm == arm]
        rows.append(
            {
                "arm": arm,
                "model calls": ratio(part, arm, "model_calls"),
                "after the first epoch": ratio(part, arm, "model_calls_after_first_epoch"),
                "rollouts": ratio(part, arm, "rollouts"),
                "generated tokens": ratio(part, arm, "model_tokens"),
                "calls per rollout": f"{(mine.model_calls / mine.rollouts).mean():.2f}",
                "solved": f"{mine.solved.mean():.3f}",
                "in-domain": f"{mine.test.mean():.3f}",
                "in-domain - GRPO": "" if arm == BASELINE else accuracy_delta(part, arm, "test"),
                "OOD - GRPO": "" if arm == BASELINE else accuracy_delta(part, arm, "ood"),
            }
        )
    return tabulate(rows, headers="keys", tablefmt="github")


def fewer_calls_on_every_seed(part: pd.DataFrame, arm: str) -> bool:
    base = part[part.arm == BASELINE].set_index("seed")["model_calls"]
    return bool((part[part.arm == arm].set_index("seed")["model_calls"] < base).all())


def figure(frame: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    regimes = list(dict.fromkeys(frame.regime))
    fig, axes = plt.subplots(1, len(regimes), figsize=(5.5 * len(regimes), 3.8), squeeze=False)
    for ax, regime in zip(axes[0], regimes):
        for arm in arms_of(frame):
            part = frame[(frame.regime == regime) & (frame.arm == arm)]
            per_step = pd.DataFrame(list(part.calls_per_step)).mean()
            ax.plot(per_step.index.astype(int), per_step.to_numpy(), label=arm)
        ax.set(title=regime, xlabel="step", ylabel="model calls per step (mean over seeds)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build(results: Path, figures: bool = True) -> str:
    frame = load(results / "runs")
    if (results / "fitted_runs").is_dir():
        frame = pd.concat([frame, load(results / "fitted_runs", {"lze+adaptive": FITTED})], ignore_index=True)
    lines = [
        "# The generation saving in a multi-turn setting (BENCHMARKS.md section 13)",
        "",
        "Rebuilt by `python benchmarks/agentic/report.py` from `runs/`. Ratios are each seed's over GRPO's on "
        "the same seed: mean (lowest-highest seed). Accuracies are the mean of the last 3 evaluations; differences "
        f"are paired by seed, with 95% t intervals corrected for the {len(arms_of(frame)) - 1} arms (Bonferroni). "
        "'solved' is "
        "the share of training rollouts whose last answer was right.",
    ]
    for regime in REGIMES:
        part = frame[frame.regime == regime]
        if part.empty:
            continue
        seeds = sorted(set(part.seed))
        lines += ["", f"## {regime} (seeds {', '.join(map(str, seeds))})", "", regime_table(part), ""]
        for arm in arms_of(part)[1:]:
            verdict = "fewer" if fewer_calls_on_every_seed(part, arm) else "not fewer"
            lines.append(f"- {arm}: {verdict} model calls than GRPO on every seed.")
    if figures:
        figure(frame, results / "model_calls.png")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return report_main(build, RESULTS, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
