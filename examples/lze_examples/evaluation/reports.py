"""Merging, tabulating and writing evaluation results."""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from .arguments import BENCHMARK_TITLES


def merge_results(*results: Mapping[str, Any]) -> dict[str, Any]:
    """
    Merges the results of several [`evaluate`] runs (e.g. one per model, read back from their `results.json`) into
    one, for a single table. Later runs win for a model label that appears twice.
    """
    merged: dict[str, Any] = {"settings": {}, "benchmarks": [], "sources": {}, "splits": {}, "models": {}}
    for result in results:
        merged["settings"] = merged["settings"] or dict(result.get("settings", {}))
        for name in result.get("benchmarks", []):
            if name not in merged["benchmarks"]:
                merged["benchmarks"].append(name)
        merged["sources"].update(result.get("sources", {}))
        merged["splits"].update(result.get("splits", {}))
        merged["models"].update(copy.deepcopy(dict(result["models"])))
    return merged


def markdown_table(results: Mapping[str, Any], metric: str = "pass@1", digits: int = 3) -> str:
    """
    A Markdown table shaped like the paper's Table 1: one row per model, one column per benchmark, then the average
    over the benchmarks (unweighted, as in the paper).

    Args:
        results (`Mapping[str, Any]`):
            The output of [`evaluate`] (or [`merge_results`]).
        metric (`str`, *optional*, defaults to `"pass@1"`):
            Which metric to show: `"pass@1"` (= `"avg@k"`), or `"pass@k"`.
        digits (`int`, *optional*, defaults to `3`):
            Decimals.

    Returns:
        `str`: The table.
    """
    from tabulate import tabulate

    names = list(results["benchmarks"])
    header = ["Model", *(BENCHMARK_TITLES.get(n, n) for n in names), "Avg"]

    def cell(value: float | None) -> str:
        return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"

    rows = []
    for label, entry in results["models"].items():
        values = [entry["benchmarks"].get(n, {}).get(metric) for n in names]
        present = [v for v in values if v is not None]
        average = sum(present) / len(present) if present and len(present) == len(values) else None
        rows.append([str(label), *(cell(v) for v in values), cell(average)])
    lines = [tabulate(rows, headers=header, tablefmt="github", disable_numparse=True)]
    settings = results.get("settings", {})
    k = settings.get("num_samples", 1)
    decoding = "greedy" if not settings.get("temperature") else f"temperature {settings['temperature']}"
    caption = f"{metric} ({decoding}, k={k}" + (f", avg@{k}" if k > 1 and metric == "pass@1" else "") + ")"
    if splits := [f"{name}={split}" for name, split in results.get("splits", {}).items() if split]:
        caption += f"; splits: {', '.join(splits)}"
    return "\n".join(lines) + f"\n\n{caption}\n"


def write_results(results: Mapping[str, Any], output_dir: str, name: str = "results") -> tuple[str, str]:
    """
    Writes `<name>.json` and the Markdown table `<name>.md` (see [`markdown_table`]) into `output_dir`; returns their
    paths. `name` is [`EvalArguments.results_name`] for a run of [`evaluate`], which keeps each split's files apart.
    """
    os.makedirs(output_dir, exist_ok=True)
    json_path = os.path.join(output_dir, f"{name}.json")
    md_path = os.path.join(output_dir, f"{name}.md")
    with open(json_path, "w") as f:
        json.dump(results, f, indent=2, default=_json_default)
    with open(md_path, "w") as f:
        f.write(markdown_table(results))
    return json_path, md_path


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    raise TypeError(f"Cannot serialise {type(value).__name__} to JSON.")
