import itertools

import numpy as np
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
