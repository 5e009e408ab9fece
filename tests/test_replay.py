"""Rollout replay (experimental): the buffer, its guard, the trainer."""

import numpy as np
import pytest
import torch
from testing_utils import logged, make_trainer, mixed_reward, prompt_dataset

from benchmarks.experimental.replay import ReplayBuffer, load_rows, trim_group
from benchmarks.experimental.replay_plan import fit_owners
from lze_trl.guards import LZEWarning
from lze_trl.state import LZEStateError


def rows(n=4, prompt=5, completion=6, used=3):
    """A group of `n` rows: left-padded prompts of 2 tokens, completions of `used` tokens, per-token tensors."""
    mask = torch.zeros(n, completion, dtype=torch.long)
    mask[:, :used] = 1
    prompt_mask = torch.zeros(n, prompt, dtype=torch.long)
    prompt_mask[:, -2:] = 1
    return {
        "prompt_ids": torch.arange(n * prompt).reshape(n, prompt),
        "prompt_mask": prompt_mask,
        "completion_ids": torch.arange(n * completion).reshape(n, completion),
        "completion_mask": mask,
        "old_per_token_logps": -torch.rand(n, completion),
        "advantages": torch.linspace(-1, 1, n),
        "num_items_in_batch": torch.tensor(n * used),
    }


def insert(buffer, keys, generation, owners=None, uses=None, energies=None):
    n = len(keys)
    owners = np.zeros(n, dtype=int) if owners is None else np.asarray(owners)
    buffer.insert(
        np.asarray(keys),
        np.asarray(keys) + 100,
        owners,
        generation,
        np.full(n, 0.5),
        np.linspace(0.9, 0.1, n) if energies is None else np.asarray(energies),
        np.zeros(n, dtype=int) if uses is None else np.asarray(uses),
        [rows() if o == buffer.process_index else None for o in owners],
    )


# ----------------------------------------------------------------------------------------------- the buffer
def test_trim_group_drops_the_padding_no_row_uses():
    trimmed = trim_group(rows())
    assert trimmed["prompt_ids"].shape == (4, 2) and trimmed["prompt_ids"][0].tolist() == [3, 4]  # left padding
    assert trimmed["completion_ids"].shape == (4, 3) and trimmed["old_per_token_logps"].shape == (4, 3)
    assert trimmed["advantages"].shape == (4,) and trimmed["completion_mask"].all()


def test_eligibility_by_staleness_and_uses_and_eviction_oldest_first():
    buffer = ReplayBuffer(capacity=3, max_staleness=2, max_uses=2)
    insert(buffer, [1, 2], generation=0)
    insert(buffer, [3], generation=1, uses=[1])
    assert list(buffer.meta["key"]) == [1, 2, 3]
    assert buffer.eligible(generation=2).tolist() == [True, True, True]
    assert buffer.eligible(generation=3).tolist() == [False, False, True]  # groups of generation 0 are 3 old
    insert(buffer, [4, 5], generation=2)  # 5 groups for 3 places: the oldest go
    assert list(buffer.meta["key"]) == [3, 4, 5] and buffer.stats["evicted_full"] == 2
    assert set(buffer.rows) == {3, 4, 5}  # their rows went with them
    taken = buffer.take(np.array([0]))  # one use more: group 3 reaches max_uses
    assert len(taken) == 1 and taken[0]["completion_ids"].shape == (4, 3)
    insert(buffer, [6], generation=3)
    assert 3 not in buffer.meta["key"] and buffer.stats["evicted_used"] == 1


def test_rows_stay_with_their_owner_and_the_metadata_is_everywhere():
    mine, other = ReplayBuffer(8, 4, 2, process_index=0), ReplayBuffer(8, 4, 2, process_index=1)
    for buffer in (mine, other):
        insert(buffer, [1, 2, 3], generation=0, owners=[0, 1, 0])
    assert set(mine.rows) == {1, 3} and set(other.rows) == {2}
    assert np.array_equal(mine.meta["key"], other.meta["key"])
    assert len(mine.take(np.array([0, 1, 2]))) == 2 and len(other.take(np.array([0, 1, 2]))) == 1
    np.testing.assert_array_equal(mine.meta["uses"], other.meta["uses"])


def test_state_round_trip_and_rows_that_do_not_fit_are_refused():
    buffer = ReplayBuffer(8, 4, 2)
    insert(buffer, [1, 2], generation=0)
    restored = ReplayBuffer(8, 4, 2)
    restored.load_state_dict({k: np.array(v) for k, v in buffer.state_dict().items()})
    restored.load_rows_state(buffer.rows_state())
    np.testing.assert_array_equal(restored.meta["key"], buffer.meta["key"])
    assert restored.stats == buffer.stats and set(restored.rows) == {1, 2}
    with pytest.raises(LZEStateError, match="same number of processes"):
        restored.load_rows_state({1: rows()})


def test_fit_owners_keeps_each_process_within_a_plain_batch():
    weights = fit_owners(np.ones(5), np.array([0, 0, 0, 1, 1]), np.array([0.1, 0.9, 0.5, 0.2, 0.3]), capacity=2)
    np.testing.assert_array_equal(weights, [0, 1, 1, 1, 1])  # process 0's lowest-energy group goes


# ----------------------------------------------------------------------------------------------- the trainer
def train(tmp_path, steps=8, **overrides):
    values = dict(
        reward=mixed_reward,
        dataset=prompt_dataset(32),
        max_steps=steps,
        per_device_train_batch_size=32,
        fresh_fraction=0.25,
        selection_ratio=0.5,
    )
    values.update(overrides)
    trainer = make_trainer(tmp_path, **values)
    trainer.train()
    return trainer


@pytest.mark.slow
def test_replay_generates_a_quarter_and_fills_the_update_from_the_buffer(tmp_path):
    seen = []

    def recording_reward(prompts, completions, **kwargs):
        seen.append(len(completions))
        return mixed_reward(prompts, completions)

    trainer = train(tmp_path, reward=recording_reward, steps=10)
    # 8 candidate prompts per step, 2 generated (a quarter): 8 rollouts per step, against GRPO's 32
    assert seen == [8] * 10 and logged(trainer, "lze/fresh_rollouts") == [8] * 10
    replayed = logged(trainer, "lze/replayed_share")
    assert replayed[0] == 0 and max(replayed[3:]) > 0  # the buffer fills, then feeds the update
    assert all(s <= 4 for s in logged(trainer, "lze/replay_staleness_max"))  # replay_max_staleness=4
    # the quota is a share of the candidates: up to 4 groups (16 rows) per update, from 2 fresh ones at most
    assert max(logged(trainer, "lze/update_tokens")) > 2 * 4 * 6 * 0.5
    ratios = logged(trainer, "lze/replay_ratio_mean")
    assert all(0.5 < r < 2.0 for r in ratios) and logged(trainer, "lze/replay_buffer_groups")[-1] > 0
    buffer = trainer.replay
    assert (buffer.meta["uses"] <= 2).all() and buffer.stats["replayed"] > 0


@pytest.mark.slow
def test_replayed_rows_train_against_the_recorded_log_probabilities(tmp_path):
    recorded = []

    trainer = make_trainer(
        tmp_path,
        reward=mixed_reward,
        dataset=prompt_dataset(32),
        max_steps=6,
        per_device_train_batch_size=32,
        fresh_fraction=0.25,
        selection_ratio=0.5,
    )
    compute_loss = trainer.compute_loss

    def recording(model, inputs, *args, **kwargs):
        recorded.append({k: v.clone() for k, v in inputs.items() if k in ("old_per_token_logps", "completion_mask")})
        return compute_loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = recording
    trainer.train()
    assert all("old_per_token_logps" in r for r in recorded)
    # the recorded log-probabilities are those of a policy that generated the tokens: finite, <= 0
    for r in recorded:
        logps = r["old_per_token_logps"][r["completion_mask"].bool()]
        assert torch.isfinite(logps).all() and (logps <= 0).all()


@pytest.mark.slow
def test_resume_with_a_full_buffer_is_exact(tmp_path):
    overrides = dict(save_strategy="steps", save_steps=4)
    full = train(tmp_path / "full", steps=8, **overrides)
    assert len(load_rows(str(tmp_path / "full" / "out" / "checkpoint-4"), 0)) > 0  # resumed with buffered groups
    resumed = make_trainer(
        tmp_path / "full",
        reward=mixed_reward,
        dataset=prompt_dataset(32),
        max_steps=8,
        per_device_train_batch_size=32,
        fresh_fraction=0.25,
        selection_ratio=0.5,
        **overrides,
    )
    resumed.args.output_dir = str(tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "out" / "checkpoint-4"))
    arrays, counters = resumed.lze_state()
    full_arrays, full_counters = full.lze_state()
    assert counters == full_counters
    for key in full_arrays:
        np.testing.assert_array_equal(arrays[key], full_arrays[key], err_msg=key)
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert set(resumed.replay.rows) == set(full.replay.rows)


def test_replay_needs_whole_groups_per_process_and_no_refill(tmp_path):
    from types import SimpleNamespace

    from benchmarks.experimental.config import check_replay

    # 2 processes x 6 rows: TRL accepts groups of 4 straddling the processes, replay does not
    two_processes = SimpleNamespace(fresh_fraction=0.5, steps_per_generation=1, dapo_max_resample=0)
    with pytest.raises(ValueError, match="fresh_fraction=0.5 needs whole prompt groups.*multiple of num_generations"):
        check_replay(two_processes, num_generations=4, rows_per_step=6)
    check_replay(two_processes, num_generations=4, rows_per_step=8)
    with pytest.raises(ValueError, match="dapo_max_resample=2 work against each other"):
        make_trainer(tmp_path, "dapo", fresh_fraction=0.5, dapo_max_resample=2)
    with pytest.raises(ValueError, match="fresh_fraction=1.5 is invalid"):
        make_trainer(tmp_path, fresh_fraction=1.5)


@pytest.mark.slow
def test_replay_that_degenerates_says_so(tmp_path):
    # A buffer fed only with groups that can never be replayed (max_staleness 1, one use, LZE takes every fresh
    # group): no update gets a buffered group, and the run says why
    with pytest.warns(LZEWarning, match="no buffered group was eligible"):
        train(tmp_path, steps=10, replay_max_uses=1, selection_ratio=1.0)
