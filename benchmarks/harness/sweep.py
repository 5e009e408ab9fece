"""Selector sweep report: the paper's Table 2 (peers and controls) and Fig. 3 (energy ablations, selection ratio).

Reads one or more `python benchmarks/bench.py train` output folders (their `bench_train.json` and per-seed
`demo_results.json`), merges the runs by name (a run found in several folders, e.g. the `grpo` baseline, is taken from
the first), and computes per run, mean and sample standard deviation over seeds (pandas, see
[`~benchmarks.harness.stats.column_stats`]):

- held-out in-domain test accuracy at the end and averaged over the last `window` evaluations (one evaluation of 600
  prompts moves by about 0.02 from one to the next),
- OOD accuracy at the end, its gain over the start and its mean over the last `window` evaluations; train-prompt
  accuracy at the end,
- the share of groups kept for the update and the share of generated groups that were dead (all-correct or
  all-wrong),
- the rollouts spent until the run first reached the baseline's final in-domain test and OOD accuracy, over the
  baseline's total rollouts (mean over the seeds that reached it),
- update tokens per step, total FLOPs and training CPU time, as ratios to the baseline's of the same seed.

[`sweep_markdown`] writes the Table-2-style table, [`~benchmarks.harness.sweep_plot.plot_sweep`] a three-panel
figure: each energy term removed in turn, the selection ratio, and every selector.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from lze_examples.demo.summary import first_reaching

from .markdown import level_markdown, sweep_markdown
from .stats import column_stats
from .sweep_plot import plot_sweep


def load_runs(folders: list[str | Path]) -> dict[str, Any]:
    """
    The per-seed records of every run in `python benchmarks/bench.py train` output folders.

    Args:
        folders (`list[str | Path]`):
            Folders holding `bench_train.json` and `seed_<n>/demo_results.json`.

    Returns:
        `dict`: `baseline` (the first folder's), `seeds` (every folder's, sorted), `config`, `start` (the first
        seed's starting greedy accuracy per level: `{"test": {level: acc}, "ood": {...}}`) and `runs`:
        `{name: {seed: method record}}`, in the order first seen.
    """
    runs: dict[str, dict[int, Any]] = {}
    baseline, config, seeds, start = None, None, set(), None
    for folder in folders:
        folder = Path(folder)
        bench_file = folder / "bench_train.json"
        if not bench_file.is_file():
            raise FileNotFoundError(
                f"{bench_file} not found: pass folders written by `python benchmarks/bench.py train`."
            )
        bench = json.loads(bench_file.read_text())
        baseline = baseline or bench["baseline"]
        seeds.update(int(seed) for seed in bench["seeds"])
        config = config or bench["config"]
        for seed in bench["seeds"]:
            result = json.loads((folder / f"seed_{seed}" / "demo_results.json").read_text())
            if start is None and "start" in result:
                start = {split: result["start"].get(f"{split}_accuracy_by_level", {}) for split in ("test", "ood")}
            for name, method in result["methods"].items():
                runs.setdefault(name, {}).setdefault(int(seed), method)
    if baseline not in runs:
        raise ValueError(f"The baseline run {baseline!r} is missing from {folders}.")
    return {"baseline": baseline, "seeds": sorted(seeds), "config": config, "start": start or {}, "runs": runs}


def _late(curve: list[dict[str, Any]], key: str, window: int) -> float:
    return float(np.mean([row[key] for row in curve[-window:]]))


def sweep_table(loaded: dict[str, Any], window: int = 3) -> list[dict[str, Any]]:
    """
    One row per run: accuracies and cost ratios to the baseline, each `{"mean", "std", "n"}` over the seeds that
    both the run and the baseline have.

    Args:
        loaded (`dict`):
            The output of [`load_runs`].
        window (`int`, *optional*, defaults to `3`):
            Evaluations averaged for the `late_test_accuracy` column.
    """
    base_runs = loaded["runs"][loaded["baseline"]]
    rows = []
    for name, per_seed in loaded["runs"].items():
        seeds = [s for s in per_seed if s in base_runs]
        records = [_seed_record(per_seed[seed], base_runs[seed], window) for seed in seeds]
        row = {"name": name, "overrides": dict(next(iter(per_seed.values()))["overrides"]), "seeds": seeds}
        row.update(column_stats(records) if records else {})
        rows.append(row)
    return rows


def _seed_record(run: dict[str, Any], base: dict[str, Any], window: int) -> dict[str, float | None]:
    """One seed's figures of a run of the sweep, against the baseline's run of the same seed."""
    summary, base_summary = run["summary"], base["summary"]
    kept = [step["lze/selected_frac"] for step in run.get("steps", []) if "lze/selected_frac" in step]
    record = {
        "start_test_accuracy": summary["start_test_accuracy"],
        "final_test_accuracy": summary["final_test_accuracy"],
        "late_test_accuracy": _late(run["curve"], "test_accuracy", window),
        "final_ood_accuracy": summary["final_ood_accuracy"],
        "final_train_accuracy": summary["final_train_accuracy"],
        "update_tokens_per_step": summary["update_tokens_per_step"],
        "update_tokens_ratio": summary["update_tokens"] / base_summary["update_tokens"],
        "total_flops_ratio": summary["total_flops"] / base_summary["total_flops"],
        "cpu_seconds_ratio": summary["train_cpu_seconds"] / base_summary["train_cpu_seconds"],
        "fresh_rollouts_ratio": summary["rollouts"] / base_summary["rollouts"],
        "ood_gain": summary["final_ood_accuracy"] - summary["start_ood_accuracy"],
        "late_ood_accuracy": _late(run["curve"], "ood_accuracy", window),
        "dead_share": summary.get("dead_share"),
        "kept_share": float(np.mean(kept)) if kept else None,
    }
    # Rollouts spent until the run first reached the baseline's final accuracy (mean of its last `window`
    # evaluations; the run's curve smoothed the same way), over the baseline's total. Computed here from the curves,
    # so that runs of folders with another baseline compare with this one.
    for split in ("test", "ood"):
        key = f"{split}_accuracy"
        reached = first_reaching(run["curve"], key, _late(base["curve"], key, window), window)
        record[f"rollouts_to_base_{split}"] = (
            None if reached is None else reached["rollouts"] / base_summary["rollouts"]
        )
    return record


def level_table(loaded: dict[str, Any]) -> list[dict[str, Any]]:
    """
    One row per run: its final greedy accuracy per split (`test`, `ood`) and level, each `{"mean", "std", "n"}` over
    seeds (from each seed's `final_accuracy_by_level`), after a `start` row (the starting policy's, one value).

    Args:
        loaded (`dict`):
            The output of [`load_runs`].

    Returns:
        `list[dict]`: `{"name", "levels": {"test:0": stat, ..., "ood:2": stat}}` rows, `start` first.
    """
    columns = [(split, level) for split in ("test", "ood") for level in sorted(loaded["start"].get(split, {}))]
    names = [f"{split}:{level}" for split, level in columns]
    start = [{f"{split}:{level}": loaded["start"][split][level] for split, level in columns}]
    rows = [{"name": "start", "levels": column_stats(start, names)}]
    for name, per_seed in loaded["runs"].items():
        records = [
            {
                f"{split}:{level}": run.get("final_accuracy_by_level", {}).get(split, {}).get(level)
                for split, level in columns
            }
            for run in per_seed.values()
        ]
        rows.append({"name": name, "levels": column_stats(records, names)})
    return rows


def write_report(folders: list[str | Path], output_dir: str | Path, window: int = 3) -> dict[str, Any]:
    """
    Loads the folders, writes `sweep.md`, `sweep.json` and `sweep.png` into `output_dir` and returns the rows.
    """
    loaded = load_runs(folders)
    rows = sweep_table(loaded, window)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    table = sweep_markdown(rows, loaded["baseline"], window)
    levels = level_table(loaded)
    seeds = ", ".join(str(s) for s in loaded["seeds"])
    text = (
        f"Seeds {seeds}; {loaded['config']['steps']} steps per run; baseline `{loaded['baseline']}`; mean ± sample "
        f"std over seeds; ratios are per seed to the baseline of the same seed.\n\n{table}\n"
    )
    if len(levels[0]["levels"]) > 0:
        text += f"\nFinal greedy accuracy per level (mean ± sample std over seeds):\n\n{level_markdown(levels)}\n"
    (output_dir / "sweep.md").write_text(text)
    report = {"baseline": loaded["baseline"], "rows": rows, "levels": levels}
    (output_dir / "sweep.json").write_text(json.dumps(report, indent=1))
    figure = plot_sweep(rows, loaded["baseline"], output_dir / "sweep.png")
    return {"rows": rows, "markdown": text, "figure": figure, "baseline": loaded["baseline"]}
