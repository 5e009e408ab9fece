"""Plots and tables of `lze_trl.plotting`: right numbers, non-empty figures and PNG files, and a real run's tables."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from lze_trl import plotting
from lze_trl.plotting import (
    compare_runs,
    exploration_events,
    figure_to_png,
    in_learning_zone,
    learning_zone_events,
    learning_zone_flow,
    learning_zone_histogram,
    learning_zone_summary,
    load_run,
    pass_rate_energy_scatter,
    pass_rate_trajectories,
    plot_run,
    selected_fraction_by,
    selection_histograms,
    selection_raster,
)


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def synthetic_run(num_prompts: int = 30, steps: int = 20, per_step: int = 10, seed: int = 0):
    """A selection log and prompt table shaped like the trainer's, with pass rates rising with the step."""
    rng = np.random.default_rng(seed)
    difficulty = rng.integers(0, 4, num_prompts)
    rows = []
    for step in range(steps):
        for pid in rng.choice(num_prompts, per_step, replace=False):
            p = rng.binomial(8, np.clip(1 - difficulty[pid] / 3 + step / steps - 0.3, 0, 1)) / 8
            rows.append((step, step, pid, p, 4 * p * (1 - p) * max(difficulty[pid] / 3, 0.05)))
    log = pd.DataFrame(rows, columns=["step", "batch", "prompt_key", "pass_rate", "energy"])
    log["weight"] = 0.0
    for _, group in log.groupby("step"):
        log.loc[group[group["energy"] > 0]["energy"].nlargest(4).index, "weight"] = 1.0
    log["selected"] = log["weight"] > 0
    prompts = (
        log.groupby("prompt_key")
        .agg(num_observations=("step", "size"), num_selected=("selected", "sum"), last_pass_rate=("pass_rate", "last"))
        .reset_index()
    )
    prompts["difficulty"] = difficulty[prompts["prompt_key"]]
    prompts["prompt"] = [f"{i}+1=" for i in prompts["prompt_key"]]
    return prompts, log


def handmade_log(pass_rates: dict[int, list[float]]) -> pd.DataFrame:
    """One observation per step for each prompt: `{prompt_id: [p at step 0, p at step 1, ...]}`."""
    rows = [
        (step, step, pid, p, 4 * p * (1 - p), float(0 < p < 1))
        for pid, series in pass_rates.items()
        for step, p in enumerate(series)
    ]
    return pd.DataFrame(rows, columns=["step", "batch", "prompt_key", "pass_rate", "energy", "weight"])


def artists_with_data(fig) -> int:
    """Number of data-carrying artists (points, lines with points, meshes, bars) over the figure's axes."""
    count = 0
    for ax in fig.axes:
        count += sum(len(c.get_offsets()) > 0 or c.get_array() is not None for c in ax.collections)
        count += sum(len(line.get_xdata()) > 0 for line in ax.lines)
        count += len(ax.patches)
    return count


def assert_png(path_or_bytes, min_bytes: int = 8_000) -> None:
    data = open(path_or_bytes, "rb").read() if isinstance(path_or_bytes, (str, os.PathLike)) else path_or_bytes
    assert data[:8] == PNG_MAGIC
    assert len(data) > min_bytes, f"PNG of {len(data)} bytes: suspiciously small for a plot with data"


# ------------------------------------------------------------------------------------------------------- tables
def test_learning_zone_is_strictly_between_0_and_1():
    zone = in_learning_zone([0.0, 1e-9, 0.5, 1 - 1e-9, 1.0, np.nan])
    assert zone.tolist() == [False, True, True, True, False, False]


def test_learning_zone_events_and_summary():
    log = handmade_log({7: [0.0, 0.5, 1.0, 0.25, 0.0], 8: [0.5, 0.5, 0.75], 9: [1.0, 1.0]})
    events = learning_zone_events(log)
    by_prompt = {pid: list(zip(g["step"], g["event"])) for pid, g in events.groupby("prompt_key")}
    assert by_prompt[7] == [(1, "entered"), (2, "left_solved"), (3, "entered"), (4, "left_unsolved")]
    assert by_prompt[8] == [(0, "entered")]  # a first observation in the zone enters it
    assert 9 not in by_prompt

    summary = learning_zone_summary(log).set_index("prompt_key")
    assert summary.loc[7, ["entered_step", "left_step", "zone_entries", "in_zone", "observations"]].tolist() == [
        1,
        4,
        2,
        2,
        5,
    ]
    assert summary.loc[7, "final_state"] == "unsolved"
    assert summary.loc[8, "final_state"] == "learning zone" and np.isnan(summary.loc[8, "left_step"])
    assert summary.loc[9, "final_state"] == "solved" and np.isnan(summary.loc[9, "entered_step"])


def test_exploration_events_follow_solved_streaks():
    log = handmade_log({3: [1.0, 1.0, 1.0, 0.5, 1.0], 4: [1.0, 0.5, 1.0]})
    revisits = exploration_events(log, solved_after=2)
    assert list(zip(revisits["prompt_key"], revisits["step"], revisits["outcome"])) == [
        (3, 2, "still_solved"),
        (3, 3, "forgotten"),
    ]
    assert revisits["streak_before"].tolist() == [2, 3]
    assert exploration_events(log, solved_after=3)["step"].tolist() == [3]


def test_selection_histograms_count_every_group():
    prompts, log = synthetic_run()
    hist = selection_histograms(log, bins=10)
    assert hist["pass_rate"][0].sum() == len(log)
    assert hist["selected_pass_rate"][0].sum() == log["selected"].sum()
    assert hist["energy"][0].sum() == len(log)
    assert hist["pass_rate"][1][0] == 0 and hist["pass_rate"][1][-1] == 1
    assert "selected_pass_rate" not in selection_histograms(log.assign(weight=0.0))


# ------------------------------------------------------------------------------------------------------- figures
def test_learning_zone_histogram_fractions(tmp_path):
    # Step 0: p = 0, 0.5, 1, 1; step 1: p = 0.25, 0.25. Rows: [p=0, 4 zone bins, p=1].
    log = pd.DataFrame(
        {
            "step": [0, 0, 0, 0, 1, 1],
            "batch": [0, 0, 0, 0, 1, 1],
            "prompt_key": [1, 2, 3, 4, 1, 2],
            "pass_rate": [0.0, 0.5, 1.0, 1.0, 0.25, 0.25],
            "energy": [0.0, 1.0, 0.0, 0.0, 0.75, 0.75],
            "weight": [0.0, 1.0, 0.0, 0.0, 1.0, 0.0],
        }
    )
    fig = learning_zone_histogram(log, bins=4, save_path=tmp_path / "zone.png")
    heat = fig.axes[0].collections[0].get_array().reshape(6, 2)
    np.testing.assert_allclose(heat[:, 0], [0.25, 0, 0, 0.25, 0, 0.5])
    np.testing.assert_allclose(heat[:, 1], [0, 0, 1.0, 0, 0, 0])
    lines = {line.get_label(): line.get_ydata() for line in fig.axes[1].lines}
    np.testing.assert_allclose(lines["learning zone"], [0.25, 1.0])
    np.testing.assert_allclose(lines["selected"], [0.25, 0.5])
    assert_png(tmp_path / "zone.png")


def test_learning_zone_histogram_pools_long_runs():
    prompts, log = synthetic_run(steps=300, per_step=4)
    heat = learning_zone_histogram(log, bins=4, max_columns=50).axes[0].collections[0].get_array()
    assert heat.shape == (6, 50)
    np.testing.assert_allclose(heat.sum(axis=0), 1.0)  # every column is a distribution over the pass-rate rows


def test_scatter_highlights_the_selected_groups(tmp_path):
    prompts, log = synthetic_run()
    fig = pass_rate_energy_scatter(log, save_path=tmp_path / "scatter.png")
    points = {c.get_label(): c.get_offsets() for c in fig.axes[0].collections}
    assert len(points["selected"]) == log["selected"].sum() > 0
    assert len(points["not selected"]) == (~log["selected"]).sum()
    np.testing.assert_allclose(np.sort(points["selected"][:, 1]), np.sort(log.loc[log["selected"], "energy"]))
    assert_png(tmp_path / "scatter.png")
    assert len(pass_rate_energy_scatter(log, last_steps=2).axes[0].collections[0].get_offsets()) < len(log)


def test_selected_fraction_by_difficulty_and_any_column(tmp_path):
    prompts, log = synthetic_run()
    fig = selected_fraction_by(prompts, "difficulty", selection_log=log, save_path=tmp_path / "by.png")
    bars = [p.get_height() for p in fig.axes[0].patches]
    stats = prompts.groupby("difficulty")[["num_selected", "num_observations"]].sum()
    expected = (stats["num_selected"] / stats["num_observations"]).to_numpy()
    np.testing.assert_allclose(bars[: len(stats)], expected)
    assert len(bars) == 2 * len(stats)  # selected and learning-zone bars
    assert_png(tmp_path / "by.png")

    many = prompts.assign(length=np.arange(len(prompts)) * 1.5)
    fig = selected_fraction_by(many, "length", max_categories=5)
    assert 1 < len(fig.axes[0].patches) <= 5  # a numeric column with many values is cut into bins
    with pytest.raises(ValueError, match="no column 'level'"):
        selected_fraction_by(prompts, "level")


def test_every_figure_has_data_and_saves_a_png(tmp_path):
    prompts, log = synthetic_run()
    figures = plot_run(prompts, log, by="difficulty", output_dir=tmp_path / "plots")
    assert set(figures) == {"pass_rate_vs_energy", "learning_zone", "selected_by"}
    figures["trajectories"] = pass_rate_trajectories(log, prompts, by="difficulty")
    figures["raster"] = selection_raster(log, prompts, max_prompts=12)
    figures["flow"] = learning_zone_flow(log)
    history = [{"step": s, "reward": s / 10, "lze/update_tokens": 100.0} for s in range(1, 6)]
    figures["compare"] = compare_runs({"LZE": history, "GRPO": history})
    for name, fig in figures.items():
        assert artists_with_data(fig) > 0, name
        assert_png(figure_to_png(fig), min_bytes=5_000)
    for name in ("pass_rate_vs_energy", "learning_zone", "selected_by"):
        assert_png(tmp_path / "plots" / f"{name}.png")
    # One line per difficulty in the trajectories, one row per selected prompt in the raster.
    assert len(figures["trajectories"].axes[0].lines) == prompts["difficulty"].nunique()
    assert figures["raster"].axes[0].collections[0].get_array().shape[0] == 12


def test_empty_tables_give_empty_figures_not_errors():
    prompts, log = synthetic_run()
    empty_log, empty_prompts = log.iloc[:0], prompts.iloc[:0]
    figures = plot_run(empty_prompts, empty_log)
    figures["trajectories"] = pass_rate_trajectories(empty_log, empty_prompts)
    figures["raster"] = selection_raster(empty_log)
    figures["flow"] = learning_zone_flow(empty_log)
    for fig in figures.values():
        assert any(text.get_text() for ax in fig.axes for text in ax.texts)  # the "no data" note
        assert figure_to_png(fig)[:8] == PNG_MAGIC
    assert learning_zone_summary(empty_log).empty and exploration_events(empty_log).empty


def test_load_run_reads_output_dir_or_latest_checkpoint(tmp_path):
    prompts, log = synthetic_run()
    checkpoint = tmp_path / "run" / "checkpoint-20"
    checkpoint.mkdir(parents=True)
    prompts.to_parquet(checkpoint / plotting.PROMPTS_PARQUET)
    log.drop(columns="selected").to_parquet(checkpoint / plotting.SELECTION_LOG_PARQUET)
    loaded_prompts, loaded_log = load_run(tmp_path / "run")
    pd.testing.assert_frame_equal(loaded_prompts, prompts)
    assert loaded_log["selected"].tolist() == log["selected"].tolist()
    with pytest.raises(FileNotFoundError, match="lze_prompts.parquet"):
        load_run(tmp_path / "nothing")


@pytest.mark.slow
def test_real_run_tables_and_callback_pngs(tmp_path, tiny):
    """A short LZE run: its saved tables load and plot; the callback writes PNGs without any tracker."""
    from testing_utils import make_trainer, prompt_dataset

    from lze_trl.plotting.callback import LZEPlotCallback

    model, tokenizer = tiny
    trainer = make_trainer(tmp_path, dataset=prompt_dataset(32, difficulty=True), model=model, tokenizer=tokenizer)
    callback = LZEPlotCallback(trainer, plot_steps=2, save_dir=str(tmp_path / "pngs"))
    trainer.add_callback(callback)
    trainer.train()

    prompts, log = load_run(trainer.args.output_dir)
    assert len(log) == 4 * 2  # 4 steps x 2 prompt groups of 4 rollouts
    assert log["selected"].any() and (log["pass_rate"].between(0, 1, inclusive="neither")).any()
    assert set(prompts["difficulty"]) <= {0, 1, 2}
    for name, fig in plot_run(prompts, log, output_dir=tmp_path / "plots").items():
        assert artists_with_data(fig) > 0, name
        assert_png(tmp_path / "plots" / f"{name}.png")
    for step in (2, 4):
        for name in ("pass_rate_vs_energy", "learning_zone", "selected_by"):
            assert_png(tmp_path / "pngs" / f"step-{step}" / f"{name}.png")
    assert not (tmp_path / "pngs" / "step-1").exists() and not (tmp_path / "pngs" / "step-3").exists()


@pytest.mark.parametrize("bins", [4, 8, 16])
def test_learning_zone_histogram_labels_match_its_bins(bins):
    import re

    from lze_trl.plotting import learning_zone_histogram, zone_bin_labels, zone_bin_row

    labels = zone_bin_labels(bins)
    rates = np.array([k / 8 for k in range(9)] + [k / 16 for k in range(17)] + [0.01, 0.33, 0.5, 0.99])
    for p, row in zip(rates, zone_bin_row(rates, bins)):
        label = labels[row]
        if label in ("0", "1"):
            assert p == float(label)
            continue
        lo, hi = map(float, re.findall(r"[\d.]+", label))
        assert lo <= p < hi or (row == bins and p < 1), (p, label)
        assert 0 < p < 1
    log = pd.DataFrame(
        {"step": np.repeat(np.arange(3), 9), "pass_rate": np.tile(rates[:9], 3), "selected": False, "weight": 0.0}
    )
    fig = learning_zone_histogram(log, bins=bins)
    shown = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    positions = fig.axes[0].get_yticks()
    assert all(labels[int(round(y))] == text for y, text in zip(positions, shown))
