"""Tables of a run's selection: loading a run, learning-zone events and summaries, explorations, histograms (the prompt
table itself is the method's, [`~lze_trl.method.prompt_state.prompt_table`], re-exported by `lze_trl.plotting`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from ..method.checkpoint import PROMPTS_PARQUET, SELECTION_LOG_PARQUET
from ..method.selection import in_learning_zone
from .base import PathLike


if TYPE_CHECKING:
    import pandas as pd


# ----------------------------------------------------------------------------------------------------------- tables
def load_run(run_dir: PathLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """
    Reads a run's prompt table and selection log.

    Args:
        run_dir (`str` or `os.PathLike`):
            A training `output_dir` (holding the files written at the end of training) or a checkpoint folder. When
            `run_dir` has no table but has `checkpoint-*` folders, the latest checkpoint is read.

    Returns:
        `tuple[pandas.DataFrame, pandas.DataFrame]`: `(prompts, selection_log)`, as [`LZEGRPOTrainer.prompt_table`]
        and `selection_log.to_pandas()` return them (the log with its boolean `selected` column).
    """
    import pandas as pd

    folder = os.fspath(run_dir)
    if not os.path.isfile(os.path.join(folder, PROMPTS_PARQUET)):
        from transformers.trainer_utils import get_last_checkpoint

        checkpoint = get_last_checkpoint(folder) if os.path.isdir(folder) else None
        if checkpoint is None or not os.path.isfile(os.path.join(checkpoint, PROMPTS_PARQUET)):
            raise FileNotFoundError(
                f"No {PROMPTS_PARQUET} in {folder!r} nor in a checkpoint folder under it: pass the output_dir of a "
                "finished LZEGRPOTrainer run or one of its checkpoint-* folders."
            )
        folder = checkpoint
    prompts = pd.read_parquet(os.path.join(folder, PROMPTS_PARQUET))
    log = pd.read_parquet(os.path.join(folder, SELECTION_LOG_PARQUET))
    if "selected" not in log.columns:
        log["selected"] = log["weight"] > 0
    return prompts, log


ZONES: tuple[str, ...] = ("unsolved", "learning zone", "solved")
"""The zones of a pass rate (see [`zone_state`])."""


def zone_state(pass_rate: np.typing.ArrayLike) -> np.ndarray:
    """
    Names the zone of each pass rate: `"unsolved"` (0), `"learning zone"` (strictly between), `"solved"` (1).

    Args:
        pass_rate (array-like):
            Pass rates; NaN gives `"unknown"`.

    Returns:
        `np.ndarray`: array of strings.
    """
    p = np.asarray(pass_rate, dtype=np.float64)
    return np.select([p <= 0, p >= 1, in_learning_zone(p)], ["unsolved", "solved", "learning zone"], "unknown")


def _sorted_log(selection_log: pd.DataFrame) -> pd.DataFrame:
    """The log ordered by generation batch (then step), with a `selected` column."""
    log = selection_log
    if "selected" not in log.columns:
        log = log.assign(selected=log["weight"] > 0)
    order = ["batch", "step"] if "batch" in log.columns else ["step"]
    return log.sort_values(order, kind="stable").reset_index(drop=True)


def learning_zone_events(selection_log: pd.DataFrame) -> pd.DataFrame:
    """
    When each prompt entered and left the learning zone, from the selection log.

    A prompt *enters* the learning zone at an observation in the zone that follows one outside it (or that is its
    first observation), and *leaves* it at an observation outside the zone that follows one inside it: as `"solved"`
    (pass rate 1) or `"unsolved"` (pass rate 0). Observations with a NaN pass rate are ignored.

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log (columns `step`, `batch`, `prompt_key`, `pass_rate`, `weight`).

    Returns:
        `pandas.DataFrame`: one row per event, ordered by step: `prompt_key`, `step`, `batch`, `event`
        (`"entered"`, `"left_solved"` or `"left_unsolved"`), `pass_rate` and `previous_pass_rate`.
    """
    import pandas as pd

    log = _sorted_log(selection_log)
    log = log[np.isfinite(log["pass_rate"].to_numpy(dtype=np.float64))]
    columns = ["prompt_key", "step", "batch", "event", "pass_rate", "previous_pass_rate"]
    if log.empty:
        return pd.DataFrame({c: [] for c in columns})
    zone = in_learning_zone(log["pass_rate"])
    previous = log.groupby("prompt_key", sort=False)["pass_rate"].shift(1)
    was_zone = in_learning_zone(previous)
    first = previous.isna().to_numpy()
    entered = zone & (first | ~was_zone)
    left = ~zone & was_zone
    p = log["pass_rate"].to_numpy()
    event = np.where(entered, "entered", np.where(p >= 1, "left_solved", "left_unsolved"))
    keep = entered | left
    events = log.loc[keep, ["prompt_key", "step"]].copy()
    events["batch"] = log.loc[keep, "batch"] if "batch" in log.columns else events["step"]
    events["event"] = event[keep]
    events["pass_rate"] = p[keep]
    events["previous_pass_rate"] = previous[keep].to_numpy()
    return events[columns].reset_index(drop=True)


def learning_zone_summary(selection_log: pd.DataFrame, prompts: pd.DataFrame | None = None) -> pd.DataFrame:
    """
    Per prompt: how often it was observed, in the zone and selected, and when it first entered and last left the zone.

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log.
        prompts (`pandas.DataFrame`, *optional*):
            The prompt table; its columns (prompt text, difficulty, ...) are joined on `prompt_key`.

    Returns:
        `pandas.DataFrame`: one row per prompt of the log: `prompt_key`, `observations`, `in_zone`, `selected`,
        `first_step`, `last_step`, `entered_step` (first entry into the zone, NaN if never), `left_step` (the last
        exit, NaN if it never left or is back in the zone at its last observation), `zone_entries` and `final_state`
        (`"unsolved"`, `"learning zone"` or `"solved"` at its last observation), then the prompt table's columns.
    """
    log = _sorted_log(selection_log)
    log = log.assign(in_zone=in_learning_zone(log["pass_rate"]))
    grouped = log.groupby("prompt_key", sort=True)
    summary = grouped.agg(
        observations=("pass_rate", "size"),
        in_zone=("in_zone", "sum"),
        selected=("selected", "sum"),
        first_step=("step", "min"),
        last_step=("step", "max"),
        last_pass_rate=("pass_rate", "last"),
    )
    events = learning_zone_events(log)
    entries = events[events["event"] == "entered"].groupby("prompt_key")
    exits = events[events["event"] != "entered"].groupby("prompt_key")
    summary["entered_step"] = entries["step"].min()
    summary["zone_entries"] = entries.size()
    summary["zone_entries"] = summary["zone_entries"].fillna(0).astype(int)
    summary["left_step"] = exits["step"].max()
    summary["final_state"] = zone_state(summary["last_pass_rate"])
    summary.loc[summary["final_state"] == "learning zone", "left_step"] = np.nan
    summary = summary.drop(columns="last_pass_rate").reset_index()
    if prompts is not None:
        extra = [c for c in prompts.columns if c not in summary.columns or c == "prompt_key"]
        summary = summary.merge(prompts[extra], on="prompt_key", how="left")
    return summary


def exploration_events(selection_log: pd.DataFrame, solved_after: int = 2) -> pd.DataFrame:
    """
    The observations of pruned prompts (forward pruning's exploration), reconstructed from the selection log.

    With `prune_solved=True` a prompt whose pass rate is 1 on `solved_after` consecutive observations is pruned: it is
    only rolled out again when it is drawn for exploration. So an observation that follows `solved_after` (or more)
    consecutive fully-solved ones is an exploration: it is `"forgotten"` (the prompt returns to the active pool) when
    its pass rate is below 1, `"still_solved"` otherwise. Needs the log from the prompt's first observations on (a log
    truncated by `selection_log_max_rows` can miss a streak).

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log.
        solved_after (`int`, *optional*, defaults to `2`):
            The run's `prune_solved_after`.

    Returns:
        `pandas.DataFrame`: one row per exploration: `prompt_key`, `step`, `batch`, `pass_rate`, `streak_before` and
        `outcome`.
    """
    import pandas as pd

    log = _sorted_log(selection_log)
    log = log[np.isfinite(log["pass_rate"].to_numpy(dtype=np.float64))]
    columns = ["prompt_key", "step", "batch", "pass_rate", "streak_before", "outcome"]
    if log.empty:
        return pd.DataFrame({c: [] for c in columns})
    solved = (log["pass_rate"] >= 1).astype(int)
    # Length of the run of consecutive solved observations ending at each row, per prompt.
    run_id = (solved == 0).groupby(log["prompt_key"]).cumsum()
    streak = solved.groupby([log["prompt_key"], run_id]).cumsum()
    streak_before = streak.groupby(log["prompt_key"]).shift(1).fillna(0).astype(int)
    revisits = log[streak_before.to_numpy() >= solved_after].copy()
    revisits["streak_before"] = streak_before[revisits.index]
    revisits["outcome"] = np.where(revisits["pass_rate"] >= 1, "still_solved", "forgotten")
    if "batch" not in revisits.columns:
        revisits["batch"] = revisits["step"]
    return revisits[columns].reset_index(drop=True)


def selection_histograms(selection_log: pd.DataFrame, bins: int = 20) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """
    Histograms of the groups in `selection_log`, as `(counts, edges)` pairs (`np.histogram`'s output).

    Args:
        selection_log (`pandas.DataFrame`):
            The rows to count (e.g. the generation batches since the last log).
        bins (`int`, *optional*, defaults to `20`):
            Number of bins.

    Returns:
        `dict[str, tuple[np.ndarray, np.ndarray]]`: `"pass_rate"` (all groups, bins over [0, 1]),
        `"selected_pass_rate"` (selected groups), `"energy"` (all groups, bins over [0, max energy]). Histograms
        with no data are left out.
    """
    p = selection_log["pass_rate"].to_numpy(dtype=np.float64)
    e = selection_log["energy"].to_numpy(dtype=np.float64)
    selected = selection_log["weight"].to_numpy(dtype=np.float64) > 0
    finite_p, finite_e = np.isfinite(p), np.isfinite(e)
    out = {}
    edges = np.linspace(0.0, 1.0, bins + 1)
    if finite_p.any():
        out["pass_rate"] = np.histogram(p[finite_p], bins=edges)
    if (finite_p & selected).any():
        out["selected_pass_rate"] = np.histogram(p[finite_p & selected], bins=edges)
    if finite_e.any():
        top = max(float(e[finite_e].max()), 1e-6)
        out["energy"] = np.histogram(e[finite_e], bins=np.linspace(0.0, top, bins + 1))
    return out
