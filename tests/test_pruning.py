import numpy as np

from lze_trl import PromptPruner


def test_prompt_pruned_after_consecutive_solved_observations():
    pruner = PromptPruner(5, solved_after=2, replay_fraction=0.0)
    pruner.observe([0, 1, 2], [1.0, 1.0, 0.5])
    assert pruner.num_pruned == 0
    pruner.observe([0, 1, 2], [1.0, 0.75, 1.0])
    assert list(np.flatnonzero(pruner.pruned)) == [0]  # 1's streak broke, 2's has just started
    pruner.observe([1, 2], [1.0, 1.0])
    assert list(np.flatnonzero(pruner.pruned)) == [0, 2]
    assert not pruner.plan_epoch(1)[[0, 2]].any()


def test_nan_observation_leaves_streak():
    pruner = PromptPruner(2, solved_after=2)
    pruner.observe([0], [1.0])
    pruner.observe([0], [np.nan])
    pruner.observe([0], [1.0])
    assert pruner.pruned[0]


def test_replay_returns_forgotten_prompts_and_keeps_solved_ones():
    pruner = PromptPruner(100, solved_after=1, replay_fraction=0.1, seed=3)
    pruner.observe(np.arange(50), np.ones(50))
    assert pruner.num_pruned == 50
    active = pruner.plan_epoch(1)
    replayed = np.flatnonzero(pruner.replayed)
    assert len(replayed) == 5  # 10% of the pool
    assert active[replayed].all() and active[50:].all() and active.sum() == 55
    # first replayed prompt forgotten, the others still solved
    pruner.observe(replayed, [0.5] + [1.0] * 4)
    assert not pruner.pruned[replayed[0]] and pruner.pruned[replayed[1:]].all()
    assert pruner.returned_total == 1


def test_replay_at_least_one_and_deterministic():
    a, b = PromptPruner(10, solved_after=1, seed=7), PromptPruner(10, solved_after=1, seed=7)
    for p in (a, b):
        p.observe([4, 5], [1.0, 1.0])
    np.testing.assert_array_equal(a.plan_epoch(2), b.plan_epoch(2))
    assert a.num_replayed == 1


def test_state_roundtrip():
    a = PromptPruner(10, solved_after=1)
    a.observe([1, 2], [1.0, 0.5])
    b = PromptPruner(10, solved_after=1)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.pruned, b.pruned)
    np.testing.assert_array_equal(a.solved_streak, b.solved_streak)
