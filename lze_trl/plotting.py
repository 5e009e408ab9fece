"""Plots and tables of what LZE selects, from a run's prompt table and selection log.

Every plotting function takes the two tables the [`LZEGRPOTrainer`] writes (`trainer.prompt_table()` /
`lze_prompts.parquet`, and `trainer.selection_log.to_pandas()` / `lze_selection_log.parquet`; see [`load_run`]),
returns a new `matplotlib.figure.Figure` and, given `save_path`, also writes it as a PNG. Figures are built without
`pyplot` and rendered with the Agg canvas: nothing needs a display, no global figure state is kept (a training
callback can draw thousands of them), and in Jupyter `display(fig)` shows them inline.

A prompt group is *in the learning zone* when its pass rate is strictly between 0 and 1: only those groups have a
non-zero energy and can be selected.

Example:

```python
from lze_trl.plotting import load_run, plot_run

prompts, log = load_run("outputs/my-run")  # output_dir or a checkpoint folder
figures = plot_run(prompts, log, by="difficulty", output_dir="outputs/my-run/plots")
```
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .selection import in_learning_zone, zone_state
from .state import PROMPTS_PARQUET, SELECTION_LOG_PARQUET


if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


SELECTED_COLOR = "tab:orange"
OTHER_COLOR = "tab:blue"
ZONE_COLORS = {"unsolved": "tab:red", "learning zone": "tab:green", "solved": "tab:gray"}
PathLike = str | os.PathLike


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


def _sorted_log(selection_log: pd.DataFrame) -> pd.DataFrame:
    """The log ordered by generation (then step), with a `selected` column."""
    log = selection_log
    if "selected" not in log.columns:
        log = log.assign(selected=log["weight"] > 0)
    order = ["generation", "step"] if "generation" in log.columns else ["step"]
    return log.sort_values(order, kind="stable").reset_index(drop=True)


def learning_zone_events(selection_log: pd.DataFrame) -> pd.DataFrame:
    """
    When each prompt entered and left the learning zone, from the selection log.

    A prompt *enters* the learning zone at an observation in the zone that follows one outside it (or that is its
    first observation), and *leaves* it at an observation outside the zone that follows one inside it: as `"solved"`
    (pass rate 1) or `"unsolved"` (pass rate 0). Observations with a NaN pass rate are ignored.

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log (columns `step`, `generation`, `prompt_id`, `pass_rate`, `weight`).

    Returns:
        `pandas.DataFrame`: one row per event, ordered by step: `prompt_id`, `step`, `generation`, `event`
        (`"entered"`, `"left_solved"` or `"left_unsolved"`), `pass_rate` and `previous_pass_rate`.
    """
    import pandas as pd

    log = _sorted_log(selection_log)
    log = log[np.isfinite(log["pass_rate"].to_numpy(dtype=np.float64))]
    columns = ["prompt_id", "step", "generation", "event", "pass_rate", "previous_pass_rate"]
    if log.empty:
        return pd.DataFrame({c: [] for c in columns})
    zone = in_learning_zone(log["pass_rate"])
    previous = log.groupby("prompt_id", sort=False)["pass_rate"].shift(1)
    was_zone = in_learning_zone(previous)
    first = previous.isna().to_numpy()
    entered = zone & (first | ~was_zone)
    left = ~zone & was_zone
    p = log["pass_rate"].to_numpy()
    event = np.where(entered, "entered", np.where(p >= 1, "left_solved", "left_unsolved"))
    keep = entered | left
    events = log.loc[keep, ["prompt_id", "step"]].copy()
    events["generation"] = log.loc[keep, "generation"] if "generation" in log.columns else events["step"]
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
            The prompt table; its columns (prompt text, difficulty, ...) are joined on `prompt_id`.

    Returns:
        `pandas.DataFrame`: one row per prompt of the log: `prompt_id`, `observations`, `in_zone`, `selected`,
        `first_step`, `last_step`, `entered_step` (first entry into the zone, NaN if never), `left_step` (the last
        exit, NaN if it never left or is back in the zone at its last observation), `zone_entries` and `final_state`
        (`"unsolved"`, `"learning zone"` or `"solved"` at its last observation), then the prompt table's columns.
    """
    log = _sorted_log(selection_log)
    log = log.assign(in_zone=in_learning_zone(log["pass_rate"]))
    grouped = log.groupby("prompt_id", sort=True)
    summary = grouped.agg(
        observations=("pass_rate", "size"),
        in_zone=("in_zone", "sum"),
        selected=("selected", "sum"),
        first_step=("step", "min"),
        last_step=("step", "max"),
        last_pass_rate=("pass_rate", "last"),
    )
    events = learning_zone_events(log)
    entries = events[events["event"] == "entered"].groupby("prompt_id")
    exits = events[events["event"] != "entered"].groupby("prompt_id")
    summary["entered_step"] = entries["step"].min()
    summary["zone_entries"] = entries.size()
    summary["zone_entries"] = summary["zone_entries"].fillna(0).astype(int)
    summary["left_step"] = exits["step"].max()
    summary["final_state"] = zone_state(summary["last_pass_rate"])
    summary.loc[summary["final_state"] == "learning zone", "left_step"] = np.nan
    summary = summary.drop(columns="last_pass_rate").reset_index()
    if prompts is not None:
        extra = [c for c in prompts.columns if c not in summary.columns or c == "prompt_id"]
        summary = summary.merge(prompts[extra], on="prompt_id", how="left")
    return summary


def replay_events(selection_log: pd.DataFrame, solved_after: int = 2) -> pd.DataFrame:
    """
    The observations of pruned prompts (forward pruning's replays), reconstructed from the selection log.

    With `prune_solved=True` a prompt whose pass rate is 1 on `solved_after` consecutive observations is pruned: it is
    only rolled out again when it is drawn for replay. So an observation that follows `solved_after` (or more)
    consecutive fully-solved ones is a replay: it is `"forgotten"` (the prompt returns to the active pool) when its
    pass rate is below 1, `"still_solved"` otherwise. Needs the log from the prompt's first observations on (a log
    truncated by `selection_log_max_rows` can miss a streak).

    Args:
        selection_log (`pandas.DataFrame`):
            The selection log.
        solved_after (`int`, *optional*, defaults to `2`):
            The run's `prune_solved_after`.

    Returns:
        `pandas.DataFrame`: one row per replay: `prompt_id`, `step`, `generation`, `pass_rate`, `streak_before` and
        `outcome`.
    """
    import pandas as pd

    log = _sorted_log(selection_log)
    log = log[np.isfinite(log["pass_rate"].to_numpy(dtype=np.float64))]
    columns = ["prompt_id", "step", "generation", "pass_rate", "streak_before", "outcome"]
    if log.empty:
        return pd.DataFrame({c: [] for c in columns})
    solved = (log["pass_rate"] >= 1).astype(int)
    # Length of the run of consecutive solved observations ending at each row, per prompt.
    run_id = (solved == 0).groupby(log["prompt_id"]).cumsum()
    streak = solved.groupby([log["prompt_id"], run_id]).cumsum()
    streak_before = streak.groupby(log["prompt_id"]).shift(1).fillna(0).astype(int)
    replays = log[streak_before.to_numpy() >= solved_after].copy()
    replays["streak_before"] = streak_before[replays.index]
    replays["outcome"] = np.where(replays["pass_rate"] >= 1, "still_solved", "forgotten")
    if "generation" not in replays.columns:
        replays["generation"] = replays["step"]
    return replays[columns].reset_index(drop=True)


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


# ----------------------------------------------------------------------------------------------------------- figures
def new_figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (6.4, 4.2), **kwargs) -> Figure:
    """A `Figure` on an Agg canvas with a grid of axes (`fig.axes`), independent of `pyplot`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig


def figure_to_png(fig: Figure, dpi: int = 100) -> bytes:
    """Renders `fig` to PNG bytes (Agg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def save_figure(fig: Figure, path: PathLike, dpi: int = 100) -> str:
    """
    Writes `fig` as a PNG file, creating its folder.

    Args:
        fig (`Figure`):
            The figure.
        path (`str` or `os.PathLike`):
            Target file.
        dpi (`int`, *optional*, defaults to `100`):
            Resolution.

    Returns:
        `str`: the path written.
    """
    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "wb") as f:
        f.write(figure_to_png(fig, dpi=dpi))
    return path


def _finish(fig: Figure, save_path: PathLike | None, dpi: int = 100) -> Figure:
    if save_path is not None:
        save_figure(fig, save_path, dpi=dpi)
    return fig


def _no_data(ax: Axes, message: str = "no data yet") -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="gray")


def _last_steps(log: pd.DataFrame, last_steps: int | None) -> pd.DataFrame:
    if last_steps is None or log.empty:
        return log
    steps = np.sort(log["step"].unique())[-last_steps:]
    return log[log["step"].isin(steps)]


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
            The prompt table (columns `prompt_id`, `num_observations`, `num_selected` and `by`).
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
        prompts=("prompt_id", "size"), observed=("num_observations", "sum"), selected=("num_selected", "sum")
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
        log = selection_log.merge(table[["prompt_id", "_category"]], on="prompt_id", how="inner")
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
        categories = prompts[["prompt_id"]].assign(_category=_category(prompts[by], max_categories))
        log = log.merge(categories, on="prompt_id", how="inner")
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
            Prompt-table column ordering the rows (then `prompt_id`); ignored when absent.
        max_prompts (`int`, *optional*, defaults to `60`):
            Rows shown: the most often selected prompts (ties: most observed).
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.

    Returns:
        `Figure`: the figure.
    """
    log = _sorted_log(selection_log)
    fig = new_figure(figsize=(8.0, max(3.0, min(10.0, 0.12 * min(max_prompts, log["prompt_id"].nunique()) + 1.5))))
    ax = fig.axes[0]
    ax.set_xlabel("step")
    ax.set_ylabel("prompt")
    if log.empty:
        _no_data(ax)
        return _finish(fig, save_path)
    counts = log.groupby("prompt_id").agg(selected=("selected", "sum"), observed=("pass_rate", "size"))
    chosen = counts.sort_values(["selected", "observed"], ascending=False, kind="stable").index[:max_prompts]
    order = counts.loc[chosen].reset_index()[["prompt_id"]]
    label_col = None
    if prompts is not None and sort_by is not None and sort_by in prompts.columns:
        order = order.merge(prompts[["prompt_id", sort_by]], on="prompt_id", how="left")
        order = order.sort_values([sort_by, "prompt_id"], kind="stable")
        label_col = sort_by
    else:
        order = order.sort_values("prompt_id")
    row_of = {pid: i for i, pid in enumerate(order["prompt_id"])}
    sub = log[log["prompt_id"].isin(row_of)]
    steps = np.unique(sub["step"])
    if steps[-1] - steps[0] < 5000:  # one column per step, so that a cell is one step wide even across gaps
        steps = np.arange(steps[0], steps[-1] + 1)
    col_of = np.searchsorted(steps, sub["step"].to_numpy())
    rows = sub["prompt_id"].map(row_of).to_numpy()
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
            for pid, value in zip(order["prompt_id"], order[label_col] if label_col else order["prompt_id"])
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


# ------------------------------------------------------------------------------------------ rollout-side selection
ROLLOUT_FILTER_PREFIX = "lze/rollout_filter/"


def load_log_history(run_dir: PathLike) -> list[dict[str, Any]]:
    """
    The Trainer's log history of a run: `trainer_state.json` of `run_dir`, or of its latest `checkpoint-*` folder.

    Returns:
        `list[dict]`: the logged rows (`[]` when no `trainer_state.json` is found).
    """
    import json

    folder = os.fspath(run_dir)
    if not os.path.isfile(os.path.join(folder, "trainer_state.json")):
        checkpoints = [d for d in os.listdir(folder) if d.startswith("checkpoint-") and d.split("-")[-1].isdigit()]
        if not checkpoints:
            return []
        folder = os.path.join(folder, max(checkpoints, key=lambda d: int(d.split("-")[-1])))
        if not os.path.isfile(os.path.join(folder, "trainer_state.json")):
            return []
    with open(os.path.join(folder, "trainer_state.json")) as f:
        return json.load(f).get("log_history", [])


def rollout_filter_figure(log_history: Sequence[Mapping[str, Any]], save_path: PathLike | None = None) -> Figure:
    """
    How well rollout-side selection (`rollout_filter`) predicted dead groups, step by step.

    Top: the share of each generation batch's groups predicted dead (before generation) against the share observed
    dead. Middle: the Brier score of the prediction, per batch and over the run. Bottom: cumulative skipped prompts,
    audited skips, and audited skips that came back alive (wrong skips).

    Args:
        log_history (`Sequence[Mapping]`):
            The Trainer's log rows (`trainer.state.log_history` or [`load_log_history`]).
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.
    """
    p = ROLLOUT_FILTER_PREFIX
    rows = [r for r in log_history if f"{p}brier" in r]
    fig = new_figure(3, 1, figsize=(7.0, 7.0), sharex=True)
    ax_dead, ax_brier, ax_skips = fig.axes
    ax_skips.set_xlabel("step")
    ax_dead.set_ylabel("share of groups")
    ax_brier.set_ylabel("Brier score")
    ax_skips.set_ylabel("prompts (cumulative)")
    if not rows:
        for ax in fig.axes:
            _no_data(ax)
        return _finish(fig, save_path)
    steps = [r["step"] for r in rows]
    ax_dead.plot(steps, [r[f"{p}predicted_dead_frac"] for r in rows], label="predicted dead", color="tab:blue")
    ax_dead.plot(steps, [r[f"{p}observed_dead_frac"] for r in rows], label="observed dead", color="tab:red")
    ax_dead.set_ylim(-0.02, 1.02)
    ax_dead.legend(fontsize=8)
    ax_dead.set_title("Rollout-side selection: predicted vs observed dead groups", fontsize=10)
    ax_brier.plot(steps, [r[f"{p}brier"] for r in rows], label="per batch", color="tab:purple")
    ax_brier.plot(steps, [r[f"{p}brier_total"] for r in rows], label="over the run", color="black", ls="--")
    ax_brier.legend(fontsize=8)
    for key, label, color in (
        ("skipped_total", "skipped", "tab:gray"),
        ("audited_total", "audited skips", "tab:orange"),
        ("audited_alive_total", "wrong skips (audited, alive)", "tab:red"),
    ):
        ax_skips.plot(steps, [r[f"{p}{key}"] for r in rows], label=label, color=color)
    ax_skips.legend(fontsize=8)
    return _finish(fig, save_path)
