"""Mean and spread of the benchmarks' figures over seeds, with pandas (and a t interval of the mean from scipy).

Every statistic leaves out the seeds without a finite value (a target never reached, a ratio to zero) and says how
many seeds it is over: `mean`, `std` (sample standard deviation, 0 with one seed), `n`; [`seed_stats`] and
[`aggregate`] add `min`, `max`, the 95% t interval of the mean (`ci95`, with two seeds or more) and every seed's
value as given (`values`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from lze_examples.demo.summary import RATIO_KEYS


SUMMARY_KEYS = (
    "start_test_accuracy",
    "final_test_accuracy",
    "final_ood_accuracy",
    "start_train_accuracy",
    "final_train_accuracy",
    "best_train_accuracy",
    "train_seconds",
    "train_cpu_seconds",
    "seconds_per_step",
    "rollout_seconds",
    "update_seconds",
    "rollout_tokens",
    "update_tokens",
    "update_tokens_per_step",
    "update_flops",
    "total_flops",
    "reach_test_seconds",
    "reach_test_flops",
    "reach_test_rollout_tokens",
    "reach_train_seconds",
    "reach_train_flops",
    "reach_train_step",
    "reach90_train_seconds",
    "reach90_train_flops",
    "reach90_train_step",
    "selection_share_of_step",
    "utilisation",
    "dead_share",
    "dead_share_last_quarter",
)
"""The per-run figures ([`~lze_examples.demo.summary.summarize`]) aggregated over seeds by [`aggregate`]."""

AGGREGATES = ["mean", "std", "min", "max", "count"]


def _finite(values: pd.Series) -> pd.Series:
    """The values as floats, NaN where missing (`None`) or not finite."""
    numbers = pd.to_numeric(values, errors="coerce").astype("float64")
    return numbers.where(np.isfinite(numbers))


def _stat(row: pd.Series, full: bool = False) -> dict[str, Any]:
    """One row of `agg(AGGREGATES)` as `{mean, std, n}` (`full`: also `min`, `max`, `ci95`); `None`s without data."""
    n = int(row["count"])
    mean = float(row["mean"]) if n else None
    std = (float(row["std"]) if n > 1 else 0.0) if n else None
    out: dict[str, Any] = {"mean": mean, "std": std, "n": n}
    if full:
        out["min"] = float(row["min"]) if n else None
        out["max"] = float(row["max"]) if n else None
        out["ci95"] = None
        if n > 1 and std == 0:
            out["ci95"] = [mean, mean]
        elif n > 1:
            low, high = stats.t.interval(0.95, n - 1, loc=mean, scale=std / np.sqrt(n))
            out["ci95"] = [float(low), float(high)]
    return out


def column_stats(records: Sequence[dict[str, Any]], columns: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """
    `{mean, std, n}` of every column of `records` (one dict per seed), over the seeds with a finite value.

    Args:
        records (`Sequence[dict]`):
            One record per seed, `{figure: value}` (`None` where the seed has no value).
        columns (`Iterable[str]`, *optional*):
            The figures, in order; defaults to every key of the records, in the order first seen.
    """
    frame = pd.DataFrame.from_records(list(records), columns=list(columns) if columns is not None else None)
    table = frame.apply(_finite).agg(AGGREGATES)
    return {column: _stat(table[column]) for column in frame.columns}


def seed_stats(values: Sequence[float | None]) -> dict[str, Any]:
    """
    Mean, sample standard deviation, min, max and 95% t interval of one figure over seeds, leaving out seeds
    without it.

    Returns:
        `dict[str, Any]`: `mean`, `std`, `min`, `max`, `ci95` (`None` without any value; `ci95` also with one), `n`
        (seeds with a value) and `values` (every seed's, as given).
    """
    row = _finite(pd.Series(list(values), dtype="object")).agg(AGGREGATES)
    return {**_stat(row, full=True), "values": list(values)}


def aggregate(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """
    Every summary figure ([`SUMMARY_KEYS`]) and ratio to the baseline (`RATIO_KEYS`) of every method over seeds
    ([`seed_stats`] of each), and whether each seed met the target.

    Args:
        per_seed (`list[dict]`):
            One comparison per seed: `methods.<name>.summary` and `.ratios`.

    Returns:
        `dict[str, Any]`: per method, `summary` and `ratios` (`{figure: stat}`).
    """
    records = [
        (name, part, key, row[part].get(key))
        for result in per_seed
        for name, row in result["methods"].items()
        for part, keys in (("summary", SUMMARY_KEYS), ("ratios", RATIO_KEYS))
        for key in keys
    ]
    # object dtype: `values` keeps every seed's value as given (`None`, not NaN)
    frame = pd.DataFrame(records, columns=["method", "part", "key", "value"], dtype=object)
    frame["number"] = _finite(frame["value"])
    groups = frame.groupby(["method", "part", "key"], sort=False)
    table = groups["number"].agg(AGGREGATES)
    values = groups["value"].agg(list)
    out: dict[str, Any] = {}
    for name in per_seed[0]["methods"]:
        out[name] = {}
        for part, keys in (("summary", SUMMARY_KEYS), ("ratios", RATIO_KEYS)):
            index = [(name, part, key) for key in keys]
            out[name][part] = {
                key: {**_stat(table.loc[i], full=True), "values": values[i]} for key, i in zip(keys, index)
            }
    return out
