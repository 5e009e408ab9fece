"""The demo's printed tables: the comparison table, the headline table and the starting pass-rate histogram, as
aligned plain text (laid out by `tabulate`: the first column left-aligned, the others right-aligned, a rule under the
header)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .summary import RATIO_KEYS


def format_value(value: Any, kind: str = "") -> str:
    """
    One figure as a table cell.

    Args:
        value (`Any`):
            The figure (`None`: `"n/a"`, or `"not reached"` for kind `"reach"`).
        kind (`str`, *optional*, defaults to `""`):
            `"acc"` (3 decimals), `"s"` (seconds), `"ratio"` and `"reach"` (`1.23x`), `"int"` (thousands separators),
            `"flops"` (3 significant digits), `"pct"` (a share as `12.34%`), `"pct0"` (a share as `12%`), else `str`.
    """
    if value is None:
        return "not reached" if kind == "reach" else "n/a"
    if kind == "acc":
        return f"{value:.3f}"
    if kind == "s":
        return f"{value:.1f}s"
    if kind in ("ratio", "reach"):
        return f"{value:.2f}x"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "flops":
        return f"{value:.3g}"
    if kind == "pct":
        return f"{100 * value:.2f}%"
    if kind == "pct0":
        return f"{value:.0%}"
    return str(value)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """
    Aligned plain-text lines: the first column left-aligned, the others right-aligned, columns two spaces apart, a
    rule of dashes under the header (each column as wide as its widest cell, header included).
    """
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    align = ["left"] + ["right"] * (len(header) - 1)
    # The header goes in as the first row: tabulate pads a header of its own by two spaces (`MIN_PADDING`).
    table = [list(header), ["-" * width for width in widths], *[list(row) for row in rows]]
    from tabulate import tabulate

    lines = tabulate(table, tablefmt="plain", colalign=align, disable_numparse=True).split("\n")
    # tabulate strips the trailing blanks of a row (an empty last cell): every row at the table's full width
    return [line.ljust(len(lines[1])) for line in lines]


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
    rows = []
    for label, key, kind in TABLE_ROWS:
        cells = [label]
        split = key.split("_")[1] if key.startswith(("reach_", "reach90_")) else None
        base_summary = results["methods"][base]["summary"]
        for name in names:
            value = results["methods"][name]["summary"].get(key)
            if split is not None and not base_summary.get(f"target_{split}_informative", True):
                cells.append("no gain")  # the baseline did not gain beyond the evaluation's noise
                continue
            cells.append(format_value(value, kind))
        for name in others:
            cells.append(
                format_value(results["methods"][name]["ratios"].get(key), "ratio") if key in RATIO_KEYS else ""
            )
        rows.append(cells)
    return "\n".join(text_table(header, rows))


HEADLINE_COLUMNS = (
    ("in-domain", "test_accuracy", "acc"),
    ("OOD", "ood_accuracy", "acc"),
    ("update tokens", "update_tokens_ratio", "ratio"),
    ("generated rollouts", "generated_rollouts_ratio", "ratio"),
    ("total FLOPs", "total_flops_ratio", "ratio"),
    ("vLLM step", "projected_vllm_step_ratio", "ratio"),
    ("dead groups", "dead_share", "pct0"),
    ("rollouts to target", "rollouts_to_grpo_final", "reach"),
    ("FLOPs to target", "flops_to_grpo_final", "reach"),
)


def format_headline(summary: dict[str, Any]) -> str:
    """The headline table of a `summary` (see [`~lze_examples.demo.summary.headline_summary`]): one row per method."""
    start = summary["start"]
    base = summary["baseline"]
    lines = [
        f"Start: {start['learning_zone_share']:.0%} of the training groups in the learning zone; greedy accuracy "
        f"in-domain {start['test_accuracy']:.3f} ({start['test_size']} prompts), OOD {start['ood_accuracy']:.3f} "
        f"({start['ood_size']} prompts).",
    ]
    header = ["method", *[label for label, _, _ in HEADLINE_COLUMNS]]
    rows = [
        [name, *[format_value(m[key], kind) for _, key, kind in HEADLINE_COLUMNS]]
        for name, m in summary["methods"].items()
    ]
    lines += text_table(header, rows)
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
