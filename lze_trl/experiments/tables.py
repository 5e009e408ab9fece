"""Every table of the experiments: the demo's comparison table, headline and pass-rate histogram (text), the
training and selection benchmarks and the selector sweep (Markdown)."""

from __future__ import annotations

from typing import Any

from .statistics import RATIO_KEYS


def _fmt(value: Any, kind: str = "") -> str:
    if value is None:
        return "n/a"
    if kind == "acc":
        return f"{value:.3f}"
    if kind == "s":
        return f"{value:.1f}s"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "flops":
        return f"{value:.3g}"
    return str(value)


TABLE_ROWS = (
    ("in-domain test acc (final)", "final_test_accuracy", "acc"),
    ("OOD acc (final)", "final_ood_accuracy", "acc"),
    ("train-prompt acc (final)", "final_train_accuracy", "acc"),
    ("wall-clock, training", "train_seconds", "s"),
    ("CPU time, training", "train_cpu_seconds", "s"),
    ("rollout tokens (completions)", "rollout_tokens", "int"),
    ("update tokens", "update_tokens", "int"),
    ("update tokens / step", "update_tokens_per_step", "int"),
    ("update FLOPs (6N/token)", "update_flops", "flops"),
    ("total FLOPs (+2N/rollout token)", "total_flops", "flops"),
    ("time to target test acc", "reach_test_seconds", "s"),
    ("FLOPs to target test acc", "reach_test_flops", "flops"),
    ("time to target train acc", "reach_train_seconds", "s"),
    ("FLOPs to target train acc", "reach_train_flops", "flops"),
    ("time to 90% of gain, train acc", "reach90_train_seconds", "s"),
    ("FLOPs to 90% of gain, train acc", "reach90_train_flops", "flops"),
    ("selection share of step", "selection_share_of_step", "pct"),
)


def format_table(results: dict[str, Any]) -> str:
    """The demo's comparison table (one column per method, then one ratio column per non-baseline method)."""
    names = list(results["methods"])
    base = results["baseline"]
    others = [n for n in names if n != base]
    header = ["metric", *names, *[f"{n} / {base}" for n in others]]
    lines = []
    for label, key, kind in TABLE_ROWS:
        cells = [label]
        split = key.split("_")[1] if key.startswith(("reach_", "reach90_")) else None
        base_summary = results["methods"][base]["summary"]
        for name in names:
            value = results["methods"][name]["summary"].get(key)
            if split is not None and not base_summary.get(f"target_{split}_informative", True):
                cells.append("no gain")  # the baseline did not gain beyond the evaluation's noise
                continue
            cells.append(f"{100 * value:.2f}%" if kind == "pct" and value is not None else _fmt(value, kind))
        for name in others:
            cells.append(_fmt(results["methods"][name]["ratios"].get(key), "ratio") if key in RATIO_KEYS else "")
        lines.append(cells)
    widths = [max(len(str(row[i])) for row in [header, *lines]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *[line(row) for row in lines]])


def _reach(value: float | None) -> str:
    return "not reached" if value is None else _fmt(value, "ratio")


def format_headline(summary: dict[str, Any]) -> str:
    """The headline table of a `summary` (see [`headline_summary`]): one row per method."""
    start = summary["start"]
    base = summary["baseline"]
    lines = [
        f"Start: {start['learning_zone_share']:.0%} of the training groups in the learning zone; greedy accuracy "
        f"in-domain {start['test_accuracy']:.3f} ({start['test_size']} prompts), OOD {start['ood_accuracy']:.3f} "
        f"({start['ood_size']} prompts).",
    ]
    header = [
        "method",
        "in-domain",
        "OOD",
        "update tokens",
        "rollouts",
        "total FLOPs",
        "dead groups",
        "rollouts to target",
        "FLOPs to target",
    ]
    rows = []
    for name, m in summary["methods"].items():
        rows.append(
            [
                name,
                _fmt(m["test_accuracy"], "acc"),
                _fmt(m["ood_accuracy"], "acc"),
                _fmt(m["update_tokens_ratio"], "ratio"),
                _fmt(m["rollouts_ratio"], "ratio"),
                _fmt(m["total_flops_ratio"], "ratio"),
                "n/a" if m["dead_share"] is None else f"{m['dead_share']:.0%}",
                _reach(m["rollouts_to_grpo_final"]),
                _reach(m["flops_to_grpo_final"]),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    lines += [line(header), "  ".join("-" * w for w in widths), *[line(r) for r in rows]]
    lines.append(
        f"Ratios are to {base}'s totals; 'to target' counts what a run spent until it first reached {base}'s final "
        "in-domain accuracy (mean of its last evaluations)."
    )
    return "\n".join(lines)


def format_histogram(hist: dict[str, Any]) -> str:
    total = max(sum(hist["counts"]), 1)
    lines = []
    for b, c in zip(hist["bins"], hist["counts"]):
        lines.append(f"  p={b:5.3f} {c:5d} {'#' * int(round(40 * c / total))}")
    lines.append(
        f"  never solved {hist['never_solved_frac']:.1%}, always solved {hist['always_solved_frac']:.1%}, "
        f"in the learning zone {hist['learning_zone_frac']:.1%}, mean pass rate {hist['mean']:.3f}"
    )
    return "\n".join(lines)


def _cell(stat: dict[str, Any], kind: str) -> str:
    if stat["mean"] is None:
        return "n/a"
    mean, std = stat["mean"], stat["std"]
    # Figures that some seeds never reached: mean over the seeds that did, with how many those are.
    missing = "" if stat["n"] == len(stat["values"]) else f" [{stat['n']}/{len(stat['values'])} seeds]"
    if kind == "acc":
        return f"{mean:.3f} ± {std:.3f}{missing}"
    if kind == "s":
        return f"{mean:.1f} ± {std:.1f} s{missing}"
    if kind == "ratio":
        return f"{mean:.2f} ± {std:.2f}x{missing}"
    if kind == "pct":
        return f"{100 * mean:.2f} ± {100 * std:.2f}%{missing}"
    return f"{mean:.3g} ± {std:.2g}{missing}"


BENCH_ROWS = (
    ("in-domain test acc, start", "start_test_accuracy", "acc"),
    ("in-domain test acc, final", "final_test_accuracy", "acc"),
    ("OOD acc, final", "final_ood_accuracy", "acc"),
    ("train-prompt acc, start", "start_train_accuracy", "acc"),
    ("train-prompt acc, final", "final_train_accuracy", "acc"),
    ("wall-clock, training", "train_seconds", "s"),
    ("CPU time, training", "train_cpu_seconds", "s"),
    ("rollout tokens (completions)", "rollout_tokens", ""),
    ("update tokens / step", "update_tokens_per_step", ""),
    ("update FLOPs", "update_flops", ""),
    ("total FLOPs", "total_flops", ""),
    ("time to target train acc", "reach_train_seconds", "s"),
    ("FLOPs to target train acc", "reach_train_flops", ""),
    ("time to 90% of gain, train acc", "reach90_train_seconds", "s"),
    ("FLOPs to 90% of gain, train acc", "reach90_train_flops", ""),
    ("selection share of step", "selection_share_of_step", "pct"),
    ("rollout tokens to target test acc", "reach_test_rollout_tokens", ""),
    ("FLOPs to target test acc", "reach_test_flops", ""),
    ("time to target test acc", "reach_test_seconds", "s"),
    ("utilisation (update / generated completion tokens)", "utilisation", "pct"),
    ("dead groups, whole run", "dead_share", "pct"),
    ("dead groups, last quarter", "dead_share_last_quarter", "pct"),
)


def bench_markdown(results: dict[str, Any]) -> str:
    """The training benchmark as Markdown: one column per method (mean ± std over seeds), then the ratios."""
    agg = results["aggregate"]
    names = list(agg)
    base = results["baseline"]
    lines = [
        f"Seeds: {results['seeds']}; {results['config']['steps']} steps x {results['config']['prompts_per_step']} "
        f"prompts x {results['config']['num_generations']} rollouts; baseline `{base}`; mean ± sample std over seeds.",
        "",
        "| metric | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, key, kind in BENCH_ROWS:
        lines.append(f"| {label} | " + " | ".join(_cell(agg[n]["summary"][key], kind) for n in names) + " |")
    others = [n for n in names if n != base]
    if others:
        lines += ["", f"Ratios to `{base}` (per seed, then mean ± std):", ""]
        lines += [
            "| ratio | " + " | ".join(f"`{n}` / `{base}`" for n in others) + " |",
            "|---|" + "---|" * len(others),
        ]
        for key in RATIO_KEYS:
            lines.append(f"| {key} | " + " | ".join(_cell(agg[n]["ratios"][key], "ratio") for n in others) + " |")
        lines += [
            "",
            "Target met on the in-domain test split (per seed): "
            + "; ".join(f"`{n}`: {agg[n]['target_met']}" for n in others),
            "",
            "Same checks on the training prompts (per seed): "
            + "; ".join(f"`{n}`: {agg[n]['target_train_prompts_met']}" for n in others),
        ]
    load = [r["machine"]["start"]["load_average"] for r in results["runs"]]
    lines += [
        "",
        f"Machine: {results['machine']['platform']}, {results['machine']['cpu_count']} CPUs, "
        f"torch {results['machine']['torch']}, {results['config']['torch_threads']} thread(s); "
        f"load average (1/5/15 min) at the start of each seed: {load}.",
    ]
    return "\n".join(lines) + "\n"


def selection_markdown(results: dict[str, Any]) -> str:
    """The selection micro-benchmark as Markdown."""
    step = results.get("step")
    lines = [
        f"Generation batch of {results['groups']} prompt groups drawn from a pool observed once; "
        f"{results['repeats']} batches per pool; times in ms (median / p90).",
        "",
        "| pool | score + select_top_k | + record_selection | state bytes / prompt | state MB |"
        + (" vs one demo step |" if step else ""),
        "|---:|---:|---:|---:|---:|" + ("---:|" if step else ""),
    ]
    for row in results["pools"]:
        ss, full = row["score_select_ms"], row["with_record_selection_ms"]
        cells = [
            f"{row['pool_size']:,}",
            f"{ss['median']:.3f} / {ss['p90']:.3f}",
            f"{full['median']:.3f} / {full['p90']:.3f}",
            f"{row['bytes_per_prompt']:.1f}",
            f"{row['nbytes'] / 1e6:.1f}",
        ]
        if step:
            cells.append(f"{100 * full['median'] / 1e3 / step['seconds_per_step']:.2f}%")
        lines.append("| " + " | ".join(cells) + " |")
    if step:
        lines += [
            "",
            f"Demo training step (LZE, {step['groups_per_step']} groups x {step['num_generations']} rollouts): "
            f"{1e3 * step['seconds_per_step']:.1f} ms; selection measured inside those steps: "
            f"{1e3 * step['selection_seconds_per_step']:.3f} ms ({100 * step['selection_share']:.2f}% of the step). "
            f"'vs one demo step' divides a {results['groups']}-group batch's selection by that "
            f"{step['groups_per_step']}-group step, so it overstates the share in a step that really generates "
            f"{results['groups']} groups.",
        ]
    m = results["machine"]
    lines += ["", f"Machine: {m['platform']}, {m['cpu_count']} CPUs, load average at start {m['load_average']}."]
    return "\n".join(lines) + "\n"


def _pm(stat: dict[str, Any], digits: int = 3, suffix: str = "") -> str:
    if stat["mean"] is None:
        return "n/a"
    return f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}{suffix}"


def sweep_markdown(rows: list[dict[str, Any]], baseline: str, window: int = 3) -> str:
    """The Table-2-style Markdown table of [`sweep_table`]'s rows (mean ± sample std over seeds)."""
    header = (
        f"| run | test acc, final | test acc, last {window} evals | OOD acc, final | OOD gain | OOD acc, last "
        f"{window} evals | train acc | groups kept | dead groups | rollouts to {baseline}'s final test acc "
        f"| rollouts to {baseline}'s final OOD acc | update tokens / {baseline} | total FLOPs / {baseline} "
        f"| CPU time / {baseline} | rollouts / {baseline} |"
    )
    lines = [header, "|" + "---|" * 15]

    def reach(stat: dict[str, Any], n: int) -> str:
        # Mean over the seeds that reached the target, with how many did.
        if stat.get("n", 0) == 0:
            return f"not reached (0/{n})"
        return _pm(stat, 2, "x") + ("" if stat["n"] == n else f" ({stat['n']}/{n} seeds)")

    for row in rows:
        n = len(row["seeds"])
        lines.append(
            f"| `{row['name']}` | {_pm(row['final_test_accuracy'])} | {_pm(row['late_test_accuracy'])} "
            f"| {_pm(row['final_ood_accuracy'])} | {_pm(row['ood_gain'], 3)} | {_pm(row['late_ood_accuracy'])} "
            f"| {_pm(row['final_train_accuracy'])} | {_pm(row['kept_share'], 2)} | {_pm(row['dead_share'], 2)} "
            f"| {reach(row['rollouts_to_base_test'], n)} | {reach(row['rollouts_to_base_ood'], n)} "
            f"| {_pm(row['update_tokens_ratio'], 2, 'x')} "
            f"| {_pm(row['total_flops_ratio'], 2, 'x')} | {_pm(row['cpu_seconds_ratio'], 2, 'x')} "
            f"| {_pm(row['rollouts_ratio'], 2, 'x')} |"
        )
    return "\n".join(lines)
