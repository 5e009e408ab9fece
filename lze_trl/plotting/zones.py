"""Figures of the learning zone: pass rate vs energy, zone histograms and flow, selected fraction by a column."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..method.selection import in_learning_zone
from .base import OTHER_COLOR, SELECTED_COLOR, ZONE_COLORS, PathLike, _finish, _last_steps, _no_data, new_figure
from .tables import _sorted_log, learning_zone_events, zone_state


if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def pass_rate_energy_scatter(
    selection_log: pd.DataFrame,
    last_steps: int | None = None,
    jitter: float = 0.01,
    save_path: PathLike | None = None,
    seed: int = 0,
) -> Figure:
    """
    Scatter of each prompt group's pass rate against its energy, selected groups highlighted.

    The dashed curve is the uncertainty term alone, `4 p (1 - p)`: the energy of a prompt that started unsolved and
    whose pass rate did not move. Groups above it got a momentum bonus; below it, a lower difficulty anchor.

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log.
        last_steps (`int`, *optional*):
            Only plot the groups of the last `last_steps` steps; all by default.
        jitter (`float`, *optional*, defaults to `0.01`):
            Horizontal noise added to the pass rates (they take only `G + 1` values) so that points stay visible.
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the jitter.

    Returns:
        `Figure`: the figure.
    """
    fig = new_figure()
    ax = fig.axes[0]
    log = _last_steps(_sorted_log(selection_log), last_steps)
    log = log[np.isfinite(log["pass_rate"].to_numpy(dtype=np.float64))]
    ax.axvspan(0, 1, color=ZONE_COLORS["learning zone"], alpha=0.06, lw=0)
    grid = np.linspace(0, 1, 101)
    ax.plot(grid, 4 * grid * (1 - grid), ls="--", color="black", lw=1, label="4p(1-p)")
    if log.empty:
        _no_data(ax)
    else:
        rng = np.random.default_rng(seed)
        x = log["pass_rate"].to_numpy(dtype=np.float64) + rng.uniform(-jitter, jitter, len(log))
        y = log["energy"].to_numpy(dtype=np.float64)
        selected = log["selected"].to_numpy(dtype=bool)
        ax.scatter(x[~selected], y[~selected], s=12, alpha=0.5, color=OTHER_COLOR, label="not selected", lw=0)
        ax.scatter(x[selected], y[selected], s=14, alpha=0.8, color=SELECTED_COLOR, label="selected", lw=0)
        steps = log["step"]
        ax.set_title(
            f"Pass rate vs energy: {len(log)} groups, {int(selected.sum())} selected "
            f"(steps {int(steps.min())}-{int(steps.max())})",
            fontsize=10,
        )
    ax.set_xlabel("pass rate p (learning zone: 0 < p < 1)")
    ax.set_ylabel("energy E")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize=8)
    return _finish(fig, save_path)


def _step_windows(steps: np.ndarray, max_columns: int) -> tuple[np.ndarray, np.ndarray]:
    """Groups sorted unique `steps` into at most `max_columns` windows: (window of each step, window start steps)."""
    unique = np.unique(steps)
    windows = np.array_split(np.arange(len(unique)), min(len(unique), max_columns))
    window_of_unique = np.empty(len(unique), dtype=np.int64)
    for i, w in enumerate(windows):
        window_of_unique[w] = i
    starts = np.array([unique[w[0]] for w in windows])
    return window_of_unique[np.searchsorted(unique, steps)], starts


def zone_bin_row(pass_rates: np.ndarray, bins: int) -> np.ndarray:
    """
    Row of each pass rate in [`learning_zone_histogram`]: 0 for `p = 0`, `bins + 1` for `p = 1`, and `1 + i` for
    `p` in the learning-zone bin `[i / bins, (i + 1) / bins)` (the last bin closed below 1).
    """
    p = np.asarray(pass_rates, dtype=np.float64)
    return np.where(p <= 0, 0, np.where(p >= 1, bins + 1, 1 + np.minimum((p * bins).astype(int), bins - 1)))


def zone_bin_labels(bins: int) -> list[str]:
    """The y-axis label of each row of [`zone_bin_row`]: `"0"`, the interval of each bin, `"1"`."""
    edges = [i / bins for i in range(bins + 1)]
    inner = [f"{'(' if i == 0 else '['}{edges[i]:.4g}, {edges[i + 1]:.4g})" for i in range(bins)]
    return ["0", *inner, "1"]


def learning_zone_histogram(
    selection_log: pd.DataFrame,
    bins: int = 8,
    max_columns: int = 200,
    save_path: PathLike | None = None,
) -> Figure:
    """
    The pass-rate distribution of the prompt groups at every step, and the share of the learning zone over time.

    Top: a heat map whose columns are steps and whose rows are pass-rate bins: `p = 0` and `p = 1` each get their own
    row, and `bins` equal bins split the learning zone (0, 1) between them; the colour is the fraction of the step's
    groups in the bin. Bottom: the fraction of groups unsolved, in the learning zone, and solved, and the fraction
    selected for the update.

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log.
        bins (`int`, *optional*, defaults to `8`):
            Bins inside the learning zone.
        max_columns (`int`, *optional*, defaults to `200`):
            On longer runs, consecutive steps are pooled into this many columns.
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.

    Returns:
        `Figure`: the figure.
    """
    fig = new_figure(2, 1, figsize=(7.0, 5.6), sharex=True, height_ratios=(3, 2))
    ax, ax_frac = fig.axes
    log = _sorted_log(selection_log)
    log = log[np.isfinite(log["pass_rate"].to_numpy(dtype=np.float64))]
    ax.set_ylabel("pass rate")
    ax_frac.set_xlabel("step")
    ax_frac.set_ylabel("fraction of groups")
    if log.empty:
        _no_data(ax)
        _no_data(ax_frac)
        return _finish(fig, save_path)

    p = log["pass_rate"].to_numpy(dtype=np.float64)
    row = zone_bin_row(p, bins)
    column, starts = _step_windows(log["step"].to_numpy(), max_columns)
    counts = np.zeros((bins + 2, len(starts)))
    np.add.at(counts, (row, column), 1.0)
    totals = counts.sum(axis=0, keepdims=True)
    fractions = counts / np.maximum(totals, 1)

    # Column edges halfway between window starts, so irregular step spacing is drawn to scale.
    if len(starts) > 1:
        mids = (starts[1:] + starts[:-1]) / 2
        x_edges = np.concatenate([[starts[0] - (mids[0] - starts[0])], mids, [starts[-1] + (starts[-1] - mids[-1])]])
    else:
        x_edges = np.array([starts[0] - 0.5, starts[0] + 0.5])
    y_edges = np.arange(bins + 3) - 0.5
    mesh = ax.pcolormesh(x_edges, y_edges, fractions, cmap="viridis", vmin=0, vmax=max(fractions.max(), 1e-6))
    fig.colorbar(mesh, ax=ax, label="fraction of the step's groups")
    for y in (0.5, bins + 0.5):
        ax.axhline(y, color="white", lw=1.2, ls="--")
    labels = zone_bin_labels(bins)
    ticks = np.arange(bins + 2)
    stride = 1 if bins <= 10 else max(1, (bins + 2) // 8)
    shown = sorted({0, bins + 1, *range(0, bins + 2, stride)})
    ax.set_yticks(ticks[shown], [labels[i] for i in shown], fontsize=8 if bins > 6 else None)
    ax.set_title("Learning zone over time (dashed lines: 0 < p < 1)", fontsize=10)

    zone = zone_state(p)
    selected = log["selected"].to_numpy(dtype=bool)
    n = np.bincount(column, minlength=len(starts)).astype(np.float64)
    for name, color in ZONE_COLORS.items():
        frac = np.bincount(column, weights=(zone == name), minlength=len(starts)) / np.maximum(n, 1)
        ax_frac.plot(starts, frac, color=color, label=name, marker="." if len(starts) < 30 else None)
    frac_sel = np.bincount(column, weights=selected, minlength=len(starts)) / np.maximum(n, 1)
    ax_frac.plot(starts, frac_sel, color=SELECTED_COLOR, ls="--", label="selected")
    ax_frac.set_ylim(-0.02, 1.02)
    ax_frac.legend(fontsize=8, ncols=4, loc="upper center")
    return _finish(fig, save_path)


def _category(values: pd.Series, max_categories: int) -> pd.Series:
    """Bins a numeric column with many values into quantiles; keeps the most frequent values of another column."""
    import pandas as pd

    if values.nunique(dropna=True) <= max_categories:
        return values
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return pd.qcut(values, q=max_categories, duplicates="drop")
    top = values.value_counts().index[: max_categories - 1]
    return values.where(values.isin(top), other="other")


def selected_fraction_by(
    prompts: pd.DataFrame,
    by: str = "difficulty",
    selection_log: pd.DataFrame | None = None,
    max_categories: int = 12,
    save_path: PathLike | None = None,
) -> Figure:
    """
    How often the prompts of each category (difficulty level, source, ...) were selected when rolled out.

    Bars: per category, the selected fraction of its rollout groups (`num_selected / num_observations` of the prompt
    table); with `selection_log`, also the fraction of its groups that were in the learning zone. The number of
    prompts of each category is written above it.

    Args:
        prompts (`pandas.DataFrame`):
            The prompt table (columns `prompt_key`, `num_observations`, `num_selected` and `by`).
        by (`str`, *optional*, defaults to `"difficulty"`):
            Column of the prompt table to group by; a numeric column with more than `max_categories` values is cut
            into quantile bins.
        selection_log (`pandas.DataFrame`, *optional*):
            The selection log, to add the learning-zone fraction.
        max_categories (`int`, *optional*, defaults to `12`):
            Most categories shown.
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.

    Returns:
        `Figure`: the figure.
    """
    if by not in prompts.columns:
        raise ValueError(
            f"The prompt table has no column {by!r}; available: {sorted(map(str, prompts.columns))}. Pass one of "
            "them as `by` (dataset columns such as `difficulty` are joined into the prompt table)."
        )
    fig = new_figure(figsize=(6.4, 4.0))
    ax = fig.axes[0]
    table = prompts.assign(_category=_category(prompts[by], max_categories))
    grouped = table.groupby("_category", observed=True, sort=True)
    stats = grouped.agg(
        prompts=("prompt_key", "size"), observed=("num_observations", "sum"), selected=("num_selected", "sum")
    )
    stats = stats[stats["observed"] > 0]
    if stats.empty:
        _no_data(ax)
        return _finish(fig, save_path)
    stats["selected_frac"] = stats["selected"] / stats["observed"]
    x = np.arange(len(stats))
    width = 0.4 if selection_log is not None else 0.7
    offset = width / 2 if selection_log is not None else 0.0
    ax.bar(x - offset, stats["selected_frac"], width, color=SELECTED_COLOR, label="selected / rolled out")
    if selection_log is not None:
        log = selection_log.merge(table[["prompt_key", "_category"]], on="prompt_key", how="inner")
        zone = log.assign(z=in_learning_zone(log["pass_rate"])).groupby("_category", observed=True)["z"].mean()
        ax.bar(
            x + offset,
            zone.reindex(stats.index).fillna(0).to_numpy(),
            width,
            color=ZONE_COLORS["learning zone"],
            label="in learning zone",
        )
    ax.set_xticks(x, [f"{c}\n{n} prompts" for c, n in zip(stats.index, stats["prompts"])], fontsize=8)
    ax.set_xlabel(by)
    ax.set_ylabel("fraction of rollout groups")
    ax.set_ylim(0, 1.15)
    ax.set_title(f"Selected fraction by {by}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", ncols=2)
    return _finish(fig, save_path)


def learning_zone_flow(selection_log: pd.DataFrame, save_path: PathLike | None = None) -> Figure:
    """
    Cumulative number of prompts entering and leaving the learning zone (see [`learning_zone_events`]) over steps.

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log.
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.

    Returns:
        `Figure`: the figure.
    """
    fig = new_figure(figsize=(6.4, 3.6))
    ax = fig.axes[0]
    events = learning_zone_events(selection_log)
    ax.set_xlabel("step")
    ax.set_ylabel("cumulative events")
    if events.empty:
        _no_data(ax, "no prompt entered the learning zone")
        return _finish(fig, save_path)
    steps = np.unique(selection_log["step"])
    colors = {"entered": ZONE_COLORS["learning zone"], "left_solved": "tab:gray", "left_unsolved": "tab:red"}
    for name, color in colors.items():
        at = np.sort(events.loc[events["event"] == name, "step"].to_numpy())
        ax.step(steps, np.searchsorted(at, steps, side="right"), where="post", color=color, label=name)
    ax.legend(fontsize=8)
    ax.set_title("Prompts entering and leaving the learning zone", fontsize=10)
    return _finish(fig, save_path)
