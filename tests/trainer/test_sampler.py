import itertools
import warnings

import numpy as np
import pytest
from trl.trainer.utils import RepeatSampler

from lze_trl import LZERepeatSampler, LZEWarning, PromptPruner, PromptState
from lze_trl.method.run import DataPosition


def epochs(sampler, n):
    out = []
    for e in range(n):
        sampler.set_epoch(e)
        out.append(list(sampler))
    return out


@pytest.mark.parametrize(
    "size, kwargs",
    [
        (19, dict(mini_repeat_count=3, batch_size=4, repeat_count=2, shuffle=True, seed=11)),  # a dropped last batch
        (24, dict(mini_repeat_count=8, batch_size=6, repeat_count=1, shuffle=True, seed=0)),
        (10, dict(mini_repeat_count=2, batch_size=5, repeat_count=3, shuffle=False, seed=3)),
    ],
)
def test_matches_trl_repeat_sampler_over_epochs(size, kwargs):
    # The copy of TRL's `RepeatSampler.__iter__` and of its randperm stream, pinned against the installed TRL: the same
    # indices epoch after epoch (TRL's draws one permutation per `__iter__` from one generator seeded once).
    trl_sampler = RepeatSampler(list(range(size)), **kwargs)
    ours = LZERepeatSampler(size, **kwargs)
    assert len(ours) == len(trl_sampler)
    assert epochs(ours, 4) == [list(trl_sampler) for _ in range(4)]


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


def resumed_position(sampler_or_position, batches_in_epoch, epoch=None):
    """The position a resumed run restores: a saved one (or a fresh one at `epoch`), `batches_in_epoch` in."""
    position = DataPosition()
    if isinstance(sampler_or_position, LZERepeatSampler):
        position.load_state_dict(sampler_or_position.position.state_dict())
    if epoch is not None:
        position.epoch = epoch
    position.batches_in_epoch = batches_in_epoch
    return position


def test_resume_skips_batches_and_offsets_epochs():
    full = LZERepeatSampler(24, mini_repeat_count=2, batch_size=4, repeat_count=3, seed=5)
    full.set_epoch(2)
    reference = list(full)
    # 4 dataloader batches = 1 generation batch x 3 repeats + 1
    position = resumed_position(None, 4, epoch=2)
    resumed = LZERepeatSampler(24, mini_repeat_count=2, batch_size=4, repeat_count=3, seed=5, position=position,
                               resuming=True)  # fmt: skip
    resumed.set_epoch(0)  # the Trainer's own count may differ: the sampler keeps its own
    assert resumed.epoch == 2
    assert list(resumed) == reference[4 * 8 :]
    resumed.set_epoch(1)
    assert resumed.epoch == 3 and position.batches_in_epoch == 0  # a new epoch starts counting afresh


def test_a_resume_at_the_end_of_an_epoch_goes_on_with_the_next_and_redoes_no_random_state():
    position = resumed_position(None, 6 * 3, epoch=1)  # 24 prompts / 4 = 6 generation batches x 3 repeats: all done
    resumed = LZERepeatSampler(24, mini_repeat_count=2, batch_size=4, repeat_count=3, seed=5, position=position,
                               resuming=True)  # fmt: skip
    assert resumed.redraw_after_resume
    resumed.set_epoch(0)
    full = LZERepeatSampler(24, mini_repeat_count=2, batch_size=4, repeat_count=3, seed=5)
    full.set_epoch(2)
    assert list(resumed) == list(full)
    assert position.epoch == 2 and not resumed.redraw_after_resume  # no RNG state to reload: a new iterator anyway


class Planner:
    """An epoch planner from plain functions of `(epoch, order)`; counts its calls."""

    def __init__(self, plan_epoch=None):
        self.calls = []
        self._plan_epoch = plan_epoch or (lambda epoch, order: order)

    def plan_epoch(self, epoch, order):
        self.calls.append(epoch)
        return self._plan_epoch(epoch, order)


def pruning_planner(pruned_rows, explore_fraction=0.0, num_prompts=20):
    """Forward pruning of `pruned_rows` through the real pruner and table (ids are the rows)."""
    state, pruner = PromptState(), PromptPruner(solved_after=1, explore_fraction=explore_fraction, seed=0)
    state.record_pass_rates(np.asarray(pruned_rows), np.ones(len(pruned_rows)), batch_index=0)
    return Planner(lambda epoch, order: pruner.plan_epoch(epoch, order, order, state)), pruner


def test_pruned_prompts_are_skipped_except_explored_ones():
    planner, pruner = pruning_planner(np.arange(8), explore_fraction=0.25)
    sampler = LZERepeatSampler(20, mini_repeat_count=2, batch_size=2, seed=0, run=planner)
    sampler.set_epoch(1)
    seen = set(sampler)
    revisited = set(pruner.explored_keys.tolist())
    assert len(revisited) == 2
    assert seen == (set(range(8, 20)) | revisited)
    assert sampler.position.groups_skipped(20) == 6
    # order among kept prompts is the unpruned permutation's order
    unpruned = LZERepeatSampler(20, mini_repeat_count=2, batch_size=2, seed=0)
    unpruned.set_epoch(1)
    kept_order = [i for i, _ in itertools.groupby(unpruned) if i in seen]
    assert [i for i, _ in itertools.groupby(sampler)] == kept_order
    # the skipped groups add up over epochs
    sampler.set_epoch(2)
    list(sampler)
    assert sampler.position.groups_skipped(20) == 6 + 20 - len(sampler.position.plan)


def _counts_of(sampler, mini_repeat_count):
    flat = list(sampler)
    assert all(flat[i] == flat[i - i % mini_repeat_count] for i in range(len(flat)))  # whole groups
    return np.bincount(flat[::mini_repeat_count], minlength=sampler.num_samples)


def repeat_by(counts):
    """A planner that rolls prompt i out counts[i] times: its pass over the order, then over those with 2, ..."""
    return Planner(lambda e, order: np.concatenate([order[counts[order] > c] for c in range(counts.max())]))


def test_a_planner_can_repeat_prompts_and_the_epoch_follows_its_order():
    counts = np.array([0, 3, 1, 1, 0, 2, 1, 1, 1, 2])  # 12 groups over 10 prompts: 12 // 4 = 3 batches
    sampler = LZERepeatSampler(10, mini_repeat_count=2, batch_size=4, seed=3, run=repeat_by(counts))
    sampler.set_epoch(1)
    np.testing.assert_array_equal(_counts_of(sampler, 2), counts)
    perm = LZERepeatSampler(10, mini_repeat_count=1, seed=3).permutation(1)
    expected = [i for c in range(3) for i in perm if counts[i] > c]
    assert sampler.position.plan.tolist() == expected


def test_resume_takes_the_saved_rows_and_does_not_ask_the_planner_again():
    planner = repeat_by(np.full(12, 2))
    sampler = LZERepeatSampler(12, mini_repeat_count=2, batch_size=3, seed=1, run=planner)
    sampler.set_epoch(1)
    reference = list(sampler)
    assert len(reference) == 24 * 2 and planner.calls == [1]
    # A resumed sampler takes the saved rows and does not ask again, even if the answer would now differ.
    other = Planner(lambda e, order: order[:3])
    position = resumed_position(sampler, 2)
    resumed = LZERepeatSampler(12, mini_repeat_count=2, batch_size=3, seed=1, run=other, position=position,
                               resuming=True)  # fmt: skip
    resumed.set_epoch(0)
    assert list(resumed) == reference[2 * 6 :]
    assert other.calls == []


def test_an_epoch_pruned_below_one_batch_says_why_it_yields_nothing():
    planner, _ = pruning_planner(np.arange(9))  # 3 prompts left: fewer than a batch of 4
    sampler = LZERepeatSampler(12, mini_repeat_count=2, batch_size=4, seed=0, run=planner)
    sampler.set_epoch(1)
    with pytest.warns(LZEWarning, match=r"Epoch 1 has no generation batch.*3 of 12 prompts.*prune_solved_after"):
        assert list(sampler) == []
    # a pool of one batch or more does not warn
    planner, _ = pruning_planner(np.arange(8))
    sampler = LZERepeatSampler(12, mini_repeat_count=2, batch_size=4, seed=0, run=planner)
    sampler.set_epoch(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(set(sampler)) == [8, 9, 10, 11]
