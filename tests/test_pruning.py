import numpy as np
import pytest

from lze_trl import PromptPruner, PromptState


def record_pass_rates(state, ids, rates):
    state.record_pass_rates(ids, rates, batch_index=0)


def test_prompt_pruned_after_consecutive_solved_observations():
    state, pruner = PromptState(), PromptPruner(solved_after=2, revisit_fraction=0.0)
    rows = np.arange(5)
    record_pass_rates(state, [0, 1, 2], [1.0, 1.0, 0.5])
    assert pruner.num_pruned(state) == 0
    record_pass_rates(state, [0, 1, 2], [1.0, 0.75, 1.0])
    assert list(np.flatnonzero(pruner.pruned(rows, state))) == [0]  # 1's streak broke, 2's has just started
    record_pass_rates(state, [1, 2], [1.0, 1.0])
    assert list(np.flatnonzero(pruner.pruned(rows, state))) == [0, 2]
    assert list(pruner.plan_epoch(1, rows[::-1], rows[::-1], state)) == [4, 3, 1]  # order kept, pruned left out


def test_nan_observation_leaves_streak():
    state, pruner = PromptState(), PromptPruner(solved_after=2)
    for p in (1.0, np.nan, 1.0):
        record_pass_rates(state, [0], [p])
    assert pruner.pruned(np.array([0]), state)[0]


def test_revisit_returns_forgotten_prompts_and_keeps_solved_ones():
    state, pruner = PromptState(), PromptPruner(solved_after=1, revisit_fraction=0.1, seed=3)
    rows = np.arange(100)
    record_pass_rates(state, np.arange(50), np.ones(50))
    assert pruner.num_pruned(state) == 50
    planned = pruner.plan_epoch(1, rows, rows, state)
    revisited = pruner.revisited_keys
    assert len(revisited) == 5  # 10% of the pool
    assert set(planned) == set(revisited) | set(range(50, 100))
    # first revisited prompt forgotten, the others still solved
    record_pass_rates(state, revisited, [0.5] + [1.0] * 4)
    pruned = pruner.pruned(revisited, state)
    assert not pruned[0] and pruned[1:].all()


def test_duplicate_rows_follow_their_prompt():
    state, pruner = PromptState(), PromptPruner(solved_after=1, revisit_fraction=0.0)
    record_pass_rates(state, [0], [1.0])
    rows, ids = np.array([0, 1, 2, 3]), np.array([0, 1, 0, 3])  # row 2 repeats row 0's prompt
    assert list(pruner.plan_epoch(0, rows, ids, state)) == [1, 3]


def test_revisit_at_least_one_and_deterministic():
    plans = []
    for _ in range(2):
        state, pruner = PromptState(), PromptPruner(solved_after=1, seed=7)
        record_pass_rates(state, [4, 5], [1.0, 1.0])
        plans.append(pruner.plan_epoch(2, np.arange(10), np.arange(10), state))
        assert pruner.num_revisited == 1
    np.testing.assert_array_equal(*plans)


def test_state_roundtrip():
    state, a = PromptState(), PromptPruner(solved_after=1, revisit_fraction=0.5)
    record_pass_rates(state, [1, 2], [1.0, 1.0])
    a.plan_epoch(0, np.arange(10), np.arange(10), state)
    b = PromptPruner(solved_after=1)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.revisited_keys, b.revisited_keys)


@pytest.mark.parametrize("settings", [dict(solved_after=0), dict(revisit_fraction=1.5), dict(revisit_fraction=-0.1)])
def test_bad_settings_are_refused_by_the_pruner_itself(settings):
    with pytest.raises(ValueError, match="PromptPruner needs solved_after >= 1 and revisit_fraction in"):
        PromptPruner(**settings)
