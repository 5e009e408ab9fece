"""Selector sweep report: the paper's Table 2 (peers and controls) and Fig. 3 (energy ablations, selection ratio).

Reads one or more `lze-trl bench train` output folders (their `bench_train.json` and per-seed `demo_results.json`),
merges the runs by name (a run found in several folders, e.g. the `grpo` baseline, is taken from the first), and
computes per run, mean and sample standard deviation over seeds:

- held-out in-domain test accuracy at the end and averaged over the last `window` evaluations (one evaluation of 600
  prompts moves by about 0.02 from one to the next),
- OOD accuracy at the end, its gain over the start and its mean over the last `window` evaluations; train-prompt
  accuracy at the end,
- the share of groups kept for the update and the share of generated groups that were dead (all-correct or
  all-wrong),
- the rollouts spent until the run first reached the baseline's final in-domain test and OOD accuracy, over the
  baseline's total rollouts (mean over the seeds that reached it),
- update tokens per step, total FLOPs and training CPU time, as ratios to the baseline's of the same seed.

[`sweep_markdown`] writes the Table-2-style table, [`plot_sweep`] a three-panel figure: each energy term removed in
turn, the selection ratio, and every selector.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .statistics import _first_reaching, stats_over_seeds
from .tables import level_markdown, sweep_markdown


ENERGY_TERMS = ("anchor", "uncertainty", "momentum")


LZE_RATIO = 0.4
"""`selection_ratio` of the plain `lze` run (the config's default)."""


def load_runs(folders: list[str | Path]) -> dict[str, Any]:
    """
    The per-seed records of every run in `lze-trl bench train` output folders.

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
            raise FileNotFoundError(f"{bench_file} not found: pass folders written by `lze-trl bench train`.")
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


def _stat(values: list[float]) -> dict[str, float | int | None]:
    stat = stats_over_seeds(values)
    return {"mean": stat["mean"], "std": stat["std"], "n": stat["n"]}


def _late(curve: list[dict[str, Any]], key: str, window: int) -> float:
    return float(np.mean([row[key] for row in curve[-window:]]))


def _appender(cols: dict[str, list[float | None]]):
    def add(key: str, value: float | None) -> None:
        cols.setdefault(key, []).append(value)

    return add


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
        cols: dict[str, list[float | None]] = {}
        for seed in seeds:
            add = _appender(cols)
            run, base = per_seed[seed], base_runs[seed]
            summary, base_summary = run["summary"], base["summary"]
            add("start_test_accuracy", summary["start_test_accuracy"])
            add("final_test_accuracy", summary["final_test_accuracy"])
            add("late_test_accuracy", _late(run["curve"], "test_accuracy", window))
            add("final_ood_accuracy", summary["final_ood_accuracy"])
            add("final_train_accuracy", summary["final_train_accuracy"])
            add("update_tokens_per_step", summary["update_tokens_per_step"])
            add("update_tokens_ratio", summary["update_tokens"] / base_summary["update_tokens"])
            add("total_flops_ratio", summary["total_flops"] / base_summary["total_flops"])
            add("cpu_seconds_ratio", summary["train_cpu_seconds"] / base_summary["train_cpu_seconds"])
            add("rollouts_ratio", summary["rollouts"] / base_summary["rollouts"])
            add("ood_gain", summary["final_ood_accuracy"] - summary["start_ood_accuracy"])
            add("late_ood_accuracy", _late(run["curve"], "ood_accuracy", window))
            add("dead_share", summary.get("dead_share"))
            kept = [step["lze/selected_frac"] for step in run.get("steps", []) if "lze/selected_frac" in step]
            add("kept_share", float(np.mean(kept)) if kept else None)
            # Rollouts spent until the run first reached the baseline's final accuracy (mean of its last `window`
            # evaluations; the run's curve smoothed the same way), over the baseline's total. Computed here from the
            # curves, so that runs of folders with another baseline compare with this one.
            for split in ("test", "ood"):
                key = f"{split}_accuracy"
                reached = _first_reaching(run["curve"], key, _late(base["curve"], key, window), window)
                add(
                    f"rollouts_to_base_{split}",
                    None if reached is None else reached["rollouts"] / base_summary["rollouts"],
                )
        row = {"name": name, "overrides": dict(next(iter(per_seed.values()))["overrides"]), "seeds": seeds}
        row.update({key: _stat(values) for key, values in cols.items()})
        rows.append(row)
    return rows


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
    start = {f"{split}:{level}": _stat([loaded["start"][split][level]]) for split, level in columns}
    rows = [{"name": "start", "levels": start}]
    for name, per_seed in loaded["runs"].items():
        levels = {}
        for split, level in columns:
            values = [run.get("final_accuracy_by_level", {}).get(split, {}).get(level) for run in per_seed.values()]
            levels[f"{split}:{level}"] = _stat([v for v in values if v is not None])
        rows.append({"name": name, "levels": levels})
    return rows


def classify(row: dict[str, Any]) -> tuple[str, Any]:
    """
    Where a run belongs in the figure: `("ratio", r)` for `lze` runs that only change `selection_ratio` (the plain
    `lze` run is `r = 0.4`), `("ablation", (r, missing_terms))` for `lze` runs restricted by `energy_terms` (at ratio
    `r`), else `("selector", name)`.
    """
    overrides = dict(row["overrides"])
    if overrides.get("selector") == "lze" and not overrides.get("prune_solved"):
        extra = set(overrides) - {"selector", "selection_ratio"}
        ratio = float(overrides.get("selection_ratio", LZE_RATIO))
        if not extra:
            return "ratio", ratio
        if extra == {"energy_terms"}:
            terms = overrides["energy_terms"]
            terms = terms.split(",") if isinstance(terms, str) else list(terms)
            return "ablation", (ratio, tuple(t for t in ENERGY_TERMS if t not in terms))
    return "selector", row["name"]


def plot_sweep(rows: list[dict[str, Any]], baseline: str, path: str | Path, metric: str = "late_test_accuracy") -> str:
    """
    Fig.-3-style figure: (a) LZE with each energy term removed, (b) LZE's held-out accuracy against
    `selection_ratio`, (c) every selector's accuracy, annotated with its total FLOPs relative to the baseline. Error
    bars are sample standard deviations over seeds; the dotted line is the baseline.
    """
    from .plots import _pyplot

    plt = _pyplot()
    by_kind: dict[str, list[tuple[Any, dict[str, Any]]]] = {"ratio": [], "ablation": [], "selector": []}
    for row in rows:
        kind, key = classify(row)
        by_kind[kind].append((key, row))
    base = next(row for row in rows if row["name"] == baseline)[metric]["mean"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2), gridspec_kw={"width_ratios": [1.3, 1, 1.5]})
    label = "held-out test accuracy" + (" (mean of last evals)" if metric.startswith("late") else "")

    full = [row for key, row in by_kind["ratio"] if key == LZE_RATIO]
    lze_at = dict(by_kind["ratio"])
    ablations: list[tuple[float, str, dict[str, Any], bool, float]] = []  # (x, label, row, is_full, ratio)
    x = 0.0
    for ratio in sorted({key[0] for key, _ in by_kind["ablation"]}):
        if ratio in lze_at:
            ablations.append((x, "full", lze_at[ratio], True, ratio))
            x += 1
        for key, row in sorted(by_kind["ablation"], key=lambda kr: kr[0]):
            if key[0] == ratio:
                ablations.append((x, "\n".join("no " + term for term in key[1]), row, False, ratio))
                x += 1
        x += 0.6  # a gap between the groups of one selection ratio
    ax = axes[0]
    if ablations:
        ax.bar(
            [x for x, *_ in ablations],
            [row[metric]["mean"] for _, _, row, _, _ in ablations],
            yerr=[row[metric]["std"] for _, _, row, _, _ in ablations],
            color=["tab:green" if is_full else "tab:orange" for _, _, _, is_full, _ in ablations],
            capsize=4,
        )
        ax.set_xticks(
            [x for x, *_ in ablations], [label for _, label, *_ in ablations], fontsize=7, rotation=45, ha="right"
        )
        for ratio in sorted({r for *_, r in ablations}):
            xs = [x for x, *_, r in ablations if r == ratio]
            ax.text(
                float(np.mean(xs)),
                1.01,
                f"selection_ratio {ratio:g}",
                ha="center",
                fontsize=8,
                transform=ax.get_xaxis_transform(),
            )
    ax.set_title("(a) energy terms removed", pad=14)

    ax = axes[1]
    ratios = sorted(by_kind["ratio"], key=lambda kr: kr[0])
    if ratios:
        ax.errorbar(
            [key for key, _ in ratios],
            [row[metric]["mean"] for _, row in ratios],
            yerr=[row[metric]["std"] for _, row in ratios],
            marker="o",
            capsize=4,
            color="tab:green",
            label="lze accuracy",
        )
        twin = ax.twinx()
        twin.plot(
            [key for key, _ in ratios],
            [row["total_flops_ratio"]["mean"] for _, row in ratios],
            marker="s",
            linestyle="--",
            color="tab:purple",
            label=f"total FLOPs / {baseline}",
        )
        twin.set_ylim(0, 1.05)
        twin.set_ylabel(f"total FLOPs / {baseline}", color="tab:purple")
    ax.set_xlabel("selection_ratio")
    ax.set_title("(b) selection ratio")

    ax = axes[2]
    selectors = [row for _, row in by_kind["selector"]] + ([full[0]] if full else [])
    selectors.sort(key=lambda row: row[metric]["mean"] if row[metric]["mean"] is not None else -1.0)
    ax.barh(
        range(len(selectors)),
        [row[metric]["mean"] for row in selectors],
        xerr=[row[metric]["std"] for row in selectors],
        color=["tab:green" if row["name"].startswith("lze") else "tab:blue" for row in selectors],
        capsize=4,
    )
    ax.set_yticks(range(len(selectors)), [row["name"] for row in selectors], fontsize=8)
    for i, row in enumerate(selectors):
        ax.annotate(
            f"{row['total_flops_ratio']['mean']:.2f}x FLOPs",
            (0.01, i),
            fontsize=7,
            va="center",
            xycoords=("axes fraction", "data"),
            color="white",
        )
    ax.axvline(base, color="grey", linestyle=":", label=f"{baseline}")
    ax.set_xlabel(label)
    ax.set_title("(c) selectors (FLOPs relative to the baseline)")
    values = [row[metric]["mean"] for row in rows if row[metric]["mean"] is not None]
    low, high = min(values), max(values)
    pad = max(0.02, 0.25 * (high - low))
    ax.set_xlim(max(0.0, low - 3 * pad), min(1.0, high + pad))
    for ax, corner in zip(axes[:2], ("upper right", "lower left")):
        ax.axhline(base, color="grey", linestyle=":", label=f"{baseline}")
        ax.set_ylim(max(0.0, low - 3 * pad), min(1.0, high + pad))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        # One legend per panel, with the twin axis's lines too (panel b), in a corner the data leave empty.
        handles, labels = ax.get_legend_handles_labels()
        for twin in ax.get_shared_x_axes().get_siblings(ax):
            if twin is not ax:
                more = twin.get_legend_handles_labels()
                handles, labels = handles + more[0], labels + more[1]
        ax.legend(handles, labels, fontsize=8, loc=corner)
    axes[2].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


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
