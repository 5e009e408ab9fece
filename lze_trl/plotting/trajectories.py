"""Figures over prompts and steps (trajectories, selection raster), run comparisons and the standard plot set."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..method.selection import in_learning_zone
from .base import PathLike, _finish, _no_data, new_figure
from .tables import _sorted_log
from .zones import _category, learning_zone_histogram, pass_rate_energy_scatter, selected_fraction_by


if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(values) < 2:
        return values
    import pandas as pd

    return pd.Series(values).rolling(window, min_periods=1, center=True).mean().to_numpy()


def pass_rate_trajectories(
    selection_log: pd.DataFrame,
    prompts: pd.DataFrame | None = None,
    by: str | None = "difficulty",
    window: int | None = None,
    max_categories: int = 12,
    save_path: PathLike | None = None,
) -> Figure:
    """
    Mean pass rate and learning-zone fraction over training, one line per category of prompts.

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log.
        prompts (`pandas.DataFrame`, *optional*):
            The prompt table, for the `by` column.
        by (`str`, *optional*, defaults to `"difficulty"`):
            Column of the prompt table to split by; `None` (or no `prompts`) draws one line for all prompts.
        window (`int`, *optional*):
            Rolling-mean window over steps; by default a tenth of the steps.
        max_categories (`int`, *optional*, defaults to `12`):
            Most categories shown (a numeric column with more values is cut into quantile bins).
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.

    Returns:
        `Figure`: the figure.
    """
    fig = new_figure(1, 2, figsize=(10.0, 3.8), sharex=True)
    ax_p, ax_z = fig.axes
    log = _sorted_log(selection_log)
    log = log[np.isfinite(log["pass_rate"].to_numpy(dtype=np.float64))]
    if prompts is not None and by is not None:
        if by not in prompts.columns:
            raise ValueError(f"The prompt table has no column {by!r}; available: {sorted(map(str, prompts.columns))}.")
        categories = prompts[["prompt_key"]].assign(_category=_category(prompts[by], max_categories))
        log = log.merge(categories, on="prompt_key", how="inner")
    else:
        by = None
        log = log.assign(_category="all prompts")
    ax_p.set_ylabel("mean pass rate")
    ax_z.set_ylabel("fraction in learning zone")
    for ax in (ax_p, ax_z):
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
    if log.empty:
        _no_data(ax_p)
        _no_data(ax_z)
        return _finish(fig, save_path)
    log = log.assign(in_zone=in_learning_zone(log["pass_rate"]))
    per_step = log.groupby(["_category", "step"], observed=True).agg(
        pass_rate=("pass_rate", "mean"), in_zone=("in_zone", "mean")
    )
    if window is None:
        window = max(1, log["step"].nunique() // 10)
    cmap = _colormap(per_step.index.get_level_values(0).nunique())
    for i, (category, frame) in enumerate(per_step.groupby(level=0, observed=True, sort=True)):
        steps = frame.index.get_level_values(1).to_numpy()
        label = f"{by}={category}" if by else str(category)
        ax_p.plot(steps, _smooth(frame["pass_rate"].to_numpy(), window), color=cmap(i), label=label)
        ax_z.plot(steps, _smooth(frame["in_zone"].to_numpy(), window), color=cmap(i), label=label)
    ax_p.legend(fontsize=7, ncols=2)
    title = "Pass-rate trajectories" + (f" by {by}" if by else "")
    fig.suptitle(title + (f" (rolling mean over {window} steps)" if window > 1 else ""), fontsize=10)
    return _finish(fig, save_path)


def _colormap(n: int):
    from matplotlib import colormaps

    return colormaps["viridis"].resampled(max(n, 2)) if n > 10 else colormaps["tab10"]


def selection_raster(
    selection_log: pd.DataFrame,
    prompts: pd.DataFrame | None = None,
    sort_by: str | None = "difficulty",
    max_prompts: int = 60,
    save_path: PathLike | None = None,
) -> Figure:
    """
    Which prompts were rolled out and selected, when: one row per prompt, one column per step.

    Cells are coloured by the pass rate of the prompt's group at that step (blank: not rolled out), and a black dot
    marks a group selected for the update.

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log.
        prompts (`pandas.DataFrame`, *optional*):
            The prompt table, to order rows by `sort_by`.
        sort_by (`str`, *optional*, defaults to `"difficulty"`):
            Prompt-table column ordering the rows (then `prompt_key`); ignored when absent.
        max_prompts (`int`, *optional*, defaults to `60`):
            Rows shown: the most often selected prompts (ties: most observed).
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.

    Returns:
        `Figure`: the figure.
    """
    log = _sorted_log(selection_log)
    fig = new_figure(figsize=(8.0, max(3.0, min(10.0, 0.12 * min(max_prompts, log["prompt_key"].nunique()) + 1.5))))
    ax = fig.axes[0]
    ax.set_xlabel("step")
    ax.set_ylabel("prompt")
    if log.empty:
        _no_data(ax)
        return _finish(fig, save_path)
    counts = log.groupby("prompt_key").agg(selected=("selected", "sum"), observed=("pass_rate", "size"))
    chosen = counts.sort_values(["selected", "observed"], ascending=False, kind="stable").index[:max_prompts]
    order = counts.loc[chosen].reset_index()[["prompt_key"]]
    label_col = None
    if prompts is not None and sort_by is not None and sort_by in prompts.columns:
        order = order.merge(prompts[["prompt_key", sort_by]], on="prompt_key", how="left")
        order = order.sort_values([sort_by, "prompt_key"], kind="stable")
        label_col = sort_by
    else:
        order = order.sort_values("prompt_key")
    row_of = {pid: i for i, pid in enumerate(order["prompt_key"])}
    sub = log[log["prompt_key"].isin(row_of)]
    steps = np.unique(sub["step"])
    if steps[-1] - steps[0] < 5000:  # one column per step, so that a cell is one step wide even across gaps
        steps = np.arange(steps[0], steps[-1] + 1)
    col_of = np.searchsorted(steps, sub["step"].to_numpy())
    rows = sub["prompt_key"].map(row_of).to_numpy()
    grid = np.full((len(row_of), len(steps)), np.nan)
    grid[rows, col_of] = sub["pass_rate"].to_numpy(dtype=np.float64)
    x_edges = np.concatenate([steps - 0.5, [steps[-1] + 0.5]])
    mesh = ax.pcolormesh(x_edges, np.arange(len(row_of) + 1) - 0.5, grid, cmap="RdYlGn", vmin=0, vmax=1)
    fig.colorbar(mesh, ax=ax, label="pass rate")
    sel = sub["selected"].to_numpy(dtype=bool)
    ax.scatter(sub["step"].to_numpy()[sel], rows[sel], s=6, color="black", label="selected")
    ax.set_ylim(len(row_of) - 0.5, -0.5)
    if len(row_of) <= 40:
        labels = [
            f"{pid} ({label_col}={value})" if label_col else str(pid)
            for pid, value in zip(order["prompt_key"], order[label_col] if label_col else order["prompt_key"])
        ]
        ax.set_yticks(np.arange(len(row_of)), labels, fontsize=6)
    elif label_col:
        # Too many prompts to name: separate and label the groups of `sort_by` instead.
        values = order[label_col].astype(str).to_numpy()
        starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
        ends = np.concatenate([starts[1:], [len(values)]])
        for start in starts[1:]:
            ax.axhline(start - 0.5, color="black", lw=0.6)
        ax.set_yticks((starts + ends - 1) / 2, [f"{label_col}={values[i]}" for i in starts], fontsize=7)
    ax.set_title(f"Rollouts and selections of {len(row_of)} prompts (dots: selected)", fontsize=10)
    return _finish(fig, save_path)


def compare_runs(
    histories: Mapping[str, Sequence[Mapping[str, Any]]],
    keys: Sequence[str] = ("reward", "lze/pass_rate_mean", "lze/update_tokens"),
    cumulative: Sequence[str] = ("lze/update_tokens",),
    save_path: PathLike | None = None,
) -> Figure:
    """
    Curves of logged metrics for several runs (e.g. LZE against plain GRPO), one panel per metric.

    Args:
        histories (`Mapping[str, Sequence[Mapping[str, Any]]]`):
            Run name to the Trainer's `state.log_history` (a list of dicts with a `step` key).
        keys (`Sequence[str]`, *optional*):
            Metrics to draw; a metric missing from every run is skipped.
        cumulative (`Sequence[str]`, *optional*, defaults to `("lze/update_tokens",)`):
            Metrics drawn as running sums (e.g. tokens that went through the update).
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.

    Returns:
        `Figure`: the figure.
    """
    present = [k for k in keys if any(k in entry for h in histories.values() for entry in h)]
    fig = new_figure(1, max(len(present), 1), figsize=(4.2 * max(len(present), 1), 3.4))
    if not present:
        _no_data(fig.axes[0], "none of the metrics was logged")
        return _finish(fig, save_path)
    for ax, key in zip(fig.axes, present):
        for name, history in histories.items():
            rows = [(e["step"], e[key]) for e in history if key in e and "step" in e]
            if not rows:
                continue
            steps, values = (np.asarray(v, dtype=np.float64) for v in zip(*rows))
            if key in cumulative:
                values = np.cumsum(values)
            ax.plot(steps, values, marker="." if len(steps) < 30 else None, label=name)
        ax.set_title(("cumulative " if key in cumulative else "") + key, fontsize=10)
        ax.set_xlabel("step")
    fig.axes[0].legend(fontsize=8)
    return _finish(fig, save_path)


STANDARD_PLOTS = ("pass_rate_vs_energy", "learning_zone", "selected_by")


def plot_run(
    prompts: pd.DataFrame,
    selection_log: pd.DataFrame,
    by: str | None = "difficulty",
    output_dir: PathLike | None = None,
    last_steps: int | None = None,
) -> dict[str, Figure]:
    """
    The standard LZE figures of a run: pass rate vs energy, learning zone over time, selected fraction by `by`.

    Args:
        prompts (`pandas.DataFrame`):
            The prompt table.
        selection_log (`pandas.DataFrame`):
            The selection log.
        by (`str`, *optional*, defaults to `"difficulty"`):
            Prompt-table column of the selected-fraction plot; skipped when `None` or absent.
        output_dir (`str` or `os.PathLike`, *optional*):
            Also write each figure as `<name>.png` in this folder.
        last_steps (`int`, *optional*):
            Restrict the scatter to the last `last_steps` steps.

    Returns:
        `dict[str, Figure]`: figures under the keys `"pass_rate_vs_energy"`, `"learning_zone"` and (when the column
        exists) `"selected_by"`.
    """

    def path(name: str) -> str | None:
        return None if output_dir is None else os.path.join(os.fspath(output_dir), f"{name}.png")

    figures = {
        "pass_rate_vs_energy": pass_rate_energy_scatter(
            selection_log, last_steps=last_steps, save_path=path("pass_rate_vs_energy")
        ),
        "learning_zone": learning_zone_histogram(selection_log, save_path=path("learning_zone")),
    }
    if by is not None and by in prompts.columns:
        figures["selected_by"] = selected_fraction_by(
            prompts, by=by, selection_log=selection_log, save_path=path("selected_by")
        )
    return figures
