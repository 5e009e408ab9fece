import itertools
import warnings

import numpy as np
import pytest
from trl.trainer.utils import RepeatSampler

from lze_trl import LZERepeatSampler, PromptPruner


def epochs(sampler, n):
    out = []
    for e in range(n):
        sampler.set_epoch(e)
        out.append(list(sampler))
    return out


def test_matches_trl_repeat_sampler_over_epochs():
    kwargs = dict(mini_repeat_count=3, batch_size=4, repeat_count=2, shuffle=True, seed=11)
    trl_sampler = RepeatSampler(list(range(19)), **kwargs)
    ours = LZERepeatSampler(19, **kwargs)
    assert len(ours) == len(trl_sampler)
    assert epochs(ours, 3) == [list(trl_sampler) for _ in range(3)]


def test_epoch_order_is_a_function_of_seed_and_epoch():
    a = LZERepeatSampler(30, mini_repeat_count=2, batch_size=5, seed=1)
    b = LZERepeatSampler(30, mini_repeat_count=2, batch_size=5, seed=1)
    epochs(a, 3)
    b.set_epoch(2)
    a.set_epoch(2)
    assert list(a) == list(b)  # b never drew epochs 0 and 1
    a.set_epoch(0)
    b.set_epoch(1)
    assert list(a) != list(b)


def test_resume_skips_batches_and_offsets_epochs():
    full = LZERepeatSampler(24, mini_repeat_count=2, batch_size=4, repeat_count=3, seed=5)
    full.set_epoch(2)
    reference = list(full)
    resumed = LZERepeatSampler(24, mini_repeat_count=2, batch_size=4, repeat_count=3, seed=5)
    resumed.resume(epoch=2, batches_done=4)  # 4 dataloader batches = 1 generation batch x 3 repeats + 1
    resumed.set_epoch(0)  # the Trainer's own count may differ: the sampler keeps its own
    assert resumed.epoch == 2
    assert list(resumed) == reference[4 * 8 :]
    resumed.set_epoch(1)
    assert resumed.epoch == 3


def test_pruned_prompts_are_skipped_except_replays():
    pruner = PromptPruner(20, solved_after=1, replay_fraction=0.25, seed=0)
    pruner.observe(np.arange(8), np.ones(8))
    sampler = LZERepeatSampler(20, mini_repeat_count=2, batch_size=2, seed=0, pruner=pruner)
    sampler.set_epoch(1)
    seen = set(sampler)
    replayed = set(np.flatnonzero(pruner.replayed).tolist())
    assert len(replayed) == 2
    assert seen == (set(range(8, 20)) | replayed)
    assert sampler.epoch_stats == {"pool_prompts": 14, "replayed_prompts": 2, "skipped_prompts": 6}
    # order among kept prompts is the unpruned permutation's order
    unpruned = LZERepeatSampler(20, mini_repeat_count=2, batch_size=2, seed=0)
    unpruned.set_epoch(1)
    kept_order = [i for i, _ in itertools.groupby(unpruned) if i in seen]
    assert [i for i, _ in itertools.groupby(sampler)] == kept_order


def _counts_of(sampler, mini_repeat_count):
    flat = list(sampler)
    assert all(flat[i] == flat[i - i % mini_repeat_count] for i in range(len(flat)))  # whole groups
    return np.bincount(flat[::mini_repeat_count], minlength=sampler.num_samples)


def test_rollout_counts_repeat_prompts_and_keep_the_epoch_length():
    counts = np.array([0, 3, 1, 1, 0, 2, 1, 1, 1, 2])  # 12 groups over 10 prompts: 12 // 4 = 3 batches
    sampler = LZERepeatSampler(10, mini_repeat_count=2, batch_size=4, seed=3, rollout_counts=lambda n, e: counts)
    sampler.set_epoch(1)
    np.testing.assert_array_equal(_counts_of(sampler, 2), counts)
    batches = sampler.epoch_batches(1)
    # Order: the permutation's pass over prompts with >= 1 group, then >= 2, then 3.
    perm = [i for i in LZERepeatSampler(10, mini_repeat_count=1, seed=3).permutation(1)]
    expected = [i for c in range(3) for i in perm if counts[i] > c]
    assert [i for b in batches for i in b] == expected
    assert sampler.epoch_stats == {"pool_prompts": 8, "replayed_prompts": 0, "skipped_prompts": 2}
    np.testing.assert_array_equal(sampler.epoch_counts, counts)


def test_rollout_counts_respect_pruning_and_resume_from_saved_counts():
    pruner = PromptPruner(12, solved_after=1, replay_fraction=0.0, seed=0)
    pruner.observe(np.arange(3), np.ones(3))  # prompts 0-2 pruned from epoch 1 on
    calls = []

    def counts_fn(n, epoch):
        calls.append(epoch)
        return np.full(n, 2)

    kwargs = dict(mini_repeat_count=2, batch_size=3, seed=1, pruner=pruner)
    sampler = LZERepeatSampler(12, rollout_counts=counts_fn, **kwargs)
    sampler.set_epoch(1)
    reference = list(sampler)
    assert set(reference) == set(range(3, 12)) and len(reference) == 18 * 2
    # A resumed sampler takes the saved pool and counts and does not ask again, even if they would now differ.
    resumed = LZERepeatSampler(12, rollout_counts=lambda n, e: np.ones(n, dtype=int), **kwargs)
    resumed.resume(epoch=1, batches_done=2, epoch_keep=sampler.epoch_keep, epoch_counts=sampler.epoch_counts)
    resumed.set_epoch(0)
    assert list(resumed) == reference[2 * 6 :]
    assert calls == [1]


def test_bad_rollout_counts_are_rejected():
    import pytest

    sampler = LZERepeatSampler(4, mini_repeat_count=2, rollout_counts=lambda n, e: np.array([1, -1, 1, 1]))
    with pytest.raises(ValueError, match="non-negative"):
        list(sampler)


class ShiftingPlanner:
    """A batch planner whose decision depends on state that changes while the epoch runs (like observed groups):
    it takes the next candidates whose index is not divisible by `self.modulus`."""

    def __init__(self):
        self.modulus = 2
        self.calls = []

    def __call__(self, epoch, batch, order, cursor, size, exempt=None):
        self.calls.append((epoch, batch, cursor))
        taken = []
        position = cursor
        while position < len(order) and len(taken) < size:
            if order[position] % self.modulus:
                taken.append(order[position])
            position += 1
        return (taken, position) if len(taken) == size else (None, len(order))


def chunks(indices, mini_repeat_count):
    return indices[::mini_repeat_count]


def test_batch_planner_decides_each_batch_when_it_is_drawn():
    planner = ShiftingPlanner()
    sampler = LZERepeatSampler(40, mini_repeat_count=2, batch_size=4, repeat_count=2, seed=3, batch_planner=planner)
    sampler.set_epoch(0)
    stream = iter(sampler)
    first = [next(stream) for _ in range(2 * 4 * 2)]  # one generation batch, repeated twice
    assert len(planner.calls) == 1  # lazily: nothing decided beyond the batch being read
    planner.modulus = 3  # the state moves on: the next batch is decided with it
    rest = list(stream)
    first_batch = chunks(first, 2)[:4]
    assert all(i % 2 for i in first_batch) and all(i % 3 for i in chunks(rest, 2))
    assert first[:8] == first[8:]  # the repeat_count copies of a generation batch are the same batch
    assert sampler.epoch_exhausted and sampler.epoch_record[0] == first_batch
    assert [len(c) for c in sampler.epoch_record] == [4] * len(sampler.epoch_record)


def test_batch_planner_resume_replays_the_recorded_batches_then_decides_on():
    def run(resume_at=None, saved=None):
        planner = ShiftingPlanner()
        sampler = LZERepeatSampler(40, mini_repeat_count=1, batch_size=4, seed=3, batch_planner=planner)
        if saved is not None:
            sampler.resume(1, resume_at, stream=saved)
            planner.modulus = 3
        sampler.set_epoch(1)
        out = []
        for i, index in enumerate(sampler):
            out.append(index)
            if (i + 1) % 4 == 0 and len(out) // 4 == 2:
                planner.modulus = 3  # changed after the second batch was read (with one batch read ahead: third)
        return out, sampler, planner

    full, sampler, _ = run()
    # save as a checkpoint after 2 batches consumed, 3 recorded (the data loader had read one batch ahead)
    saved = ([list(c) for c in sampler.epoch_record[:3]], None, False)
    # the cursor after the third batch: replay the planner's walk
    walk = ShiftingPlanner()
    order = sampler.permutation(1)
    cursor = 0
    for b in range(3):
        walk.modulus = 2 if b < 2 else 3
        _, cursor = walk(1, b, order, cursor, 4)
    saved = (saved[0], cursor, False)
    resumed, _, planner = run(resume_at=2, saved=saved)
    assert resumed == full[8:]
    assert planner.calls[0][1] == 3  # decisions resume with the epoch's fourth batch


def test_an_epoch_pruned_below_one_batch_says_why_it_yields_nothing():
    pruner = PromptPruner(12, solved_after=1, replay_fraction=0.0, seed=0)
    pruner.observe(np.arange(9), np.ones(9))  # 3 prompts left: fewer than a batch of 4
    for planner in (None, ShiftingPlanner()):
        sampler = LZERepeatSampler(12, mini_repeat_count=2, batch_size=4, seed=0, pruner=pruner, batch_planner=planner)
        sampler.set_epoch(1)
        with pytest.warns(UserWarning, match=r"Epoch 1 has no generation batch.*3 of 12 prompts.*prune_solved_after"):
            assert list(sampler) == []
    # a pool of one batch or more does not warn
    pruner = PromptPruner(12, solved_after=1, replay_fraction=0.0, seed=0)
    pruner.observe(np.arange(8), np.ones(8))
    sampler = LZERepeatSampler(12, mini_repeat_count=2, batch_size=4, seed=0, pruner=pruner)
    sampler.set_epoch(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(set(sampler)) == [8, 9, 10, 11]
