"""Rollout-side selection in the trainer: fewer dead groups generated, with refill and pruning."""

import zlib

import numpy as np
import pytest
from testing_utils import make_trainer, prompt_dataset, prompt_number


pytestmark = pytest.mark.slow


def three_quarters_solved(prompts, completions, **kwargs):
    """Prompts with i % 4 != 0 are always solved (dead groups); the others pass on half the completion buckets."""
    return [
        1.0 if prompt_number(p) % 4 else float(zlib.crc32(c.encode()) % 2 == 0) for p, c in zip(prompts, completions)
    ]


def dead_share_after_first_epoch(trainer, steps_per_epoch):
    log = trainer.selection_log.to_pandas()
    later = log[log["generation"] >= steps_per_epoch]
    rates = later["pass_rate"].to_numpy()
    assert len(rates) > 0
    return float(((rates <= 0) | (rates >= 1)).mean())


def train(tmp_path, max_steps=14, dataset=None, **overrides):
    # 32 prompts, 4 per generation batch: 8 steps per unfiltered epoch
    trainer = make_trainer(
        tmp_path,
        reward=three_quarters_solved,
        dataset=prompt_dataset(32) if dataset is None else dataset,
        per_device_train_batch_size=16,
        max_steps=max_steps,
        **overrides,
    )
    trainer.train()
    return trainer


@pytest.mark.parametrize("granularity", ["batch", "epoch"])
def test_rollout_filter_generates_fewer_dead_groups(tmp_path, granularity):
    plain = train(tmp_path / "plain", selector="lze", selection_ratio=1.0)
    filtered = train(
        tmp_path / "filtered",
        selector="lze",
        selection_ratio=1.0,
        rollout_filter="lze",
        rollout_filter_granularity=granularity,
    )
    assert getattr(plain, "rollout_filter", None) is None
    dead_plain = dead_share_after_first_epoch(plain, 8)
    dead_filtered = dead_share_after_first_epoch(filtered, 8)
    assert dead_plain > 0.6  # three quarters of the prompts are always solved
    assert dead_filtered < 0.35 and dead_filtered < dead_plain - 0.3
    # the always-solved prompts were predicted dead and skipped; the metrics say so
    f = filtered.rollout_filter
    assert f.totals["skipped"] > 0
    logs = [e for e in filtered.state.log_history if "lze/rollout_filter/brier" in e]
    assert logs and logs[-1]["lze/rollout_filter/skipped_total"] > 0
    late = [e for e in logs if e["step"] > 8]
    assert np.mean([e["lze/rollout_filter/predicted_dead_frac"] for e in late]) < 0.5
    if granularity == "epoch":
        # the epoch's pool excludes most always-solved prompts (a few may be audited or put back by the cap) and keeps
        # most of the others (an alive prompt whose last group came back dead is predicted dead: mu = 1)
        keep = np.zeros(32, dtype=bool)
        keep[filtered.lze.position.rows] = True
        assert keep[0::4].sum() >= 4 and keep.sum() - keep[0::4].sum() <= 4
    else:
        # decided per batch: the epoch's order is every prompt, and its batches hold mostly unsolved prompts
        assert len(filtered.lze.position.rows) == 32
        generated = np.concatenate(filtered.train_sampler.record.batches)
        assert np.mean(generated % 4 == 0) >= 0.75
        # without a prior column, prompts never seen are never skipped: the first 8 batches are plain GRPO's
        log = filtered.selection_log.to_pandas()
        first = log[log["generation"] < 8]
        assert first["prompt_id"].nunique() == 32
        # with a column grouping the prompts (here: which quarter is unsolved), the first epoch already skips: the
        # prior of each group is learned from its first observations, batch after batch
        grouped = prompt_dataset(32).add_column("group", [int(i % 4 == 0) for i in range(32)])
        column = train(
            tmp_path / "column",
            dataset=grouped,
            selector="lze",
            selection_ratio=1.0,
            rollout_filter="lze",
            rollout_filter_prior_column="group",
        )
        log = column.selection_log.to_pandas()
        first = log[log["generation"] < 8]["pass_rate"].to_numpy()
        assert float(((first <= 0) | (first >= 1)).mean()) < 0.6 < dead_share_after_first_epoch(plain, 0)


@pytest.mark.parametrize("granularity", ["batch", "epoch"])
def test_calibrated_rollout_filter_learns_its_map_and_resumes_exactly(tmp_path, granularity):
    overrides = dict(
        selection_ratio=1.0,
        rollout_filter="lze",
        rollout_filter_granularity=granularity,
        rollout_filter_calibration=True,
        # audits draw random numbers: resume must replay them too (per batch: a share of each batch's 4 slots)
        rollout_filter_audit=0.25 if granularity == "batch" else 0.5,
        save_strategy="steps",
        save_steps=1,
    )
    full = train(tmp_path / "full", **overrides)
    f = full.rollout_filter
    assert f.calibration is not None and f.calibration.count.sum() > 0
    # plain GRPO: > 0.6 (first test); per batch a quarter of the slots are audits of skipped (mostly dead) prompts
    assert dead_share_after_first_epoch(full, 8) < (0.5 if granularity == "batch" else 0.35)
    logs = [e for e in full.state.log_history if "lze/rollout_filter/brier_raw" in e]
    assert len(logs) == 14 and logs[-1]["lze/rollout_filter/brier_raw_total"] > 0
    # the map's statistics are part of the checkpointed state: a resumed run ends in the same state
    full_arrays, full_counters = full.lze_state()
    assert "rollout_filter.calibration.count" in full_arrays
    resumed = make_trainer(
        tmp_path / "full",
        reward=three_quarters_solved,
        dataset=prompt_dataset(32),
        per_device_train_batch_size=16,
        max_steps=14,
        **overrides,
    )
    resumed.args.output_dir = str(tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "out" / "checkpoint-10"))
    arrays, counters = resumed.lze_state()
    assert counters == full_counters
    for key in full_arrays:
        np.testing.assert_array_equal(arrays[key], full_arrays[key], err_msg=key)


@pytest.mark.parametrize("granularity", ["batch", "epoch"])
def test_greso_mode_and_refill_and_pruning_work_together(tmp_path, granularity):
    trainer = make_trainer(
        tmp_path,
        reward=three_quarters_solved,
        dataset=prompt_dataset(32),
        per_device_train_batch_size=16,
        max_steps=14,
        selector="dapo",
        dapo_max_resample=1,
        prune_solved=True,
        prune_solved_after=1,
        rollout_filter="greso",
        rollout_filter_granularity=granularity,
    )
    plans = []
    f = trainer.rollout_filter
    plan_epoch, plan_batch = f.plan_epoch, f.plan_batch

    def mask(rows):
        out = np.zeros(f.num_prompts, dtype=bool)
        out[np.asarray(rows, dtype=np.int64)] = True
        return out

    def recording_plan(epoch, order, exempt=None):
        kept = plan_epoch(epoch, order, exempt=exempt)
        plans.append((mask(order), None if exempt is None else mask(exempt), mask(kept)))
        return kept

    def recording_batch(epoch, batch, order, cursor, size, exempt=None):
        chosen, new_cursor = plan_batch(epoch, batch, order, cursor, size, exempt=exempt)
        keep = mask([] if chosen is None else chosen)
        if chosen is not None:
            # the batch is full, of distinct prompts, taken from the candidates it walked
            assert len(set(chosen)) == size and set(chosen) <= set(np.asarray(order)[cursor:new_cursor].tolist())
        walked = mask(np.asarray(order, dtype=np.int64)[cursor:new_cursor])
        plans.append((mask(order), None if exempt is None else mask(exempt) & walked, keep))
        return chosen, new_cursor

    f.plan_epoch, f.plan_batch = recording_plan, recording_batch
    trainer.train()
    assert trainer.state.global_step == 14
    logs = [e for e in trainer.state.log_history if "lze/refill_rounds" in e]
    assert any(e["lze/refill_rounds"] > 0 for e in logs)
    # the filter sees the pool left by forward pruning, keeps a subset of it and never skips a replay
    assert trainer.lze.pruner.num_pruned(trainer.lze.state) > 0 and len(plans) >= 2
    for available, exempt, keep in plans:
        assert not (keep & ~available).any()
        if exempt is not None and keep.any():
            assert keep[exempt & available].all()
    assert any(not available.all() for available, _, _ in plans)
    assert trainer.rollout_filter.totals["observed"] > 0


def test_rollout_filter_needs_a_map_style_dataset(tmp_path):
    from datasets import IterableDataset

    stream = IterableDataset.from_generator(lambda: ({"prompt": f"{i}+1="} for i in range(8)))
    with pytest.raises(ValueError, match="rollout_filter='lze' needs a map-style train dataset"):
        make_trainer(tmp_path, dataset=stream, rollout_filter="lze", max_steps=2)


def test_prior_column_must_exist(tmp_path):
    with pytest.raises(ValueError, match="rollout_filter_prior_column='difficulty' is not a column"):
        make_trainer(tmp_path, rollout_filter="lze", rollout_filter_prior_column="difficulty")


def test_rollout_filter_figure_plots_the_logged_predictions(tmp_path):
    from benchmarks.experimental.plotting import load_log_history, rollout_filter_figure

    train(tmp_path, max_steps=10, save_strategy="steps", save_steps=10, selection_ratio=1.0, rollout_filter="lze")
    history = load_log_history(tmp_path / "out")  # read back from the checkpoint's trainer_state.json
    rows = [r for r in history if "lze/rollout_filter/brier" in r]
    assert len(rows) == 10
    fig = rollout_filter_figure(history, save_path=tmp_path / "rf.png")
    ax_dead, ax_brier, ax_skips = fig.axes
    predicted, observed = (line.get_ydata().tolist() for line in ax_dead.get_lines())
    assert predicted == [r["lze/rollout_filter/predicted_dead_frac"] for r in rows]
    assert observed == [r["lze/rollout_filter/observed_dead_frac"] for r in rows]
    skipped = ax_skips.get_lines()[0].get_ydata().tolist()
    assert skipped[-1] == rows[-1]["lze/rollout_filter/skipped_total"] > 0
    assert (tmp_path / "rf.png").stat().st_size > 0
    empty = rollout_filter_figure([{"step": 1, "loss": 0.0}])
    assert all(not ax.get_lines() for ax in empty.axes)
