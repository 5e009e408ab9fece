import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lze_trl import group_pass_rates, live_groups, select_top_k
from lze_trl.method.selection import SPREAD_ENERGY_MAX, num_to_select, spread_energies, total_rewards


def test_group_pass_rates_threshold_and_nan():
    rewards = torch.tensor(
        [1.0, 0.0, 0.6, 0.4, float("nan"), 1.0, float("nan"), 0.0, float("nan")] + [float("nan")] * 3
    )
    p = group_pass_rates(rewards, num_generations=3, pass_threshold=0.5)
    assert p[0] == pytest.approx(2 / 3)  # 1.0 and 0.6 pass
    assert p[1] == pytest.approx(1 / 2)  # 0.4 fails, nan left out, 1.0 passes
    assert p[2] == pytest.approx(0.0)
    assert np.isnan(p[3])  # no scorable rollout


def test_quota_formula():
    assert num_to_select(10, 10, 0.4) == 4
    assert num_to_select(10, 2, 0.4) == 2  # capped by active groups
    assert num_to_select(10, 0, 0.4) == 0
    assert num_to_select(2, 2, 0.4) == 1  # at least one
    assert num_to_select(10, 10, 0.2) == 2


def test_top_k_without_noise_is_exact_ranking():
    energies = np.array([0.1, 0.9, 0.0, 0.5, 0.7, 0.0, 0.3, 0.2, 0.8, 0.05])
    mask = select_top_k(energies, energies > 0, selection_ratio=0.4, selection_noise=0.0)
    assert set(np.flatnonzero(mask)) == {1, 8, 4, 3}


def test_dead_groups_never_selected_and_do_not_take_quota():
    energies = np.array([0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1])
    mask = select_top_k(
        energies, energies > 0, selection_ratio=0.4, selection_noise=0.05, rng=np.random.default_rng(0)
    )
    assert set(np.flatnonzero(mask)) == {3, 9}
    assert not select_top_k(np.zeros(8), np.zeros(8, bool), selection_noise=0.05, rng=np.random.default_rng(0)).any()
    # liveness decides, not the energy: a dead group with energy (an ablation without the uncertainty term) is not
    # selected, and a live one with energy 0 can be
    live = np.array([False, True, True])
    assert list(select_top_k(np.array([0.9, 0.0, 0.5]), live, selection_ratio=1.0, selection_noise=0.0)) == [
        False,
        True,
        True,
    ]


def test_same_seed_same_decision_and_noise_explores():
    energies = np.linspace(0.1, 0.2, 50)
    live = energies > 0
    a = select_top_k(energies, live, selection_noise=0.05, rng=np.random.default_rng([1, 2]))
    b = select_top_k(energies, live, selection_noise=0.05, rng=np.random.default_rng([1, 2]))
    np.testing.assert_array_equal(a, b)
    picks = [select_top_k(energies, live, selection_noise=1.0, rng=np.random.default_rng(s)) for s in range(20)]
    assert len({tuple(np.flatnonzero(m)) for m in picks}) > 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.just(0.0), st.floats(0.001, 1.3)), min_size=1, max_size=64),
    st.floats(0.05, 1.0),
    st.floats(0.0, 0.5),
    st.integers(0, 2**32 - 1),
)
def test_selection_invariants(energies, ratio, noise, seed):
    energies = np.array(energies)
    mask = select_top_k(energies, energies > 0, ratio, noise, np.random.default_rng(seed))
    n, active = len(energies), int((energies > 0).sum())
    assert mask.sum() == num_to_select(n, active, ratio) == min(max(int(n * ratio), 1), active)
    assert not mask[energies == 0].any()
    if noise == 0 and mask.any():
        assert energies[mask].min() >= energies[(energies > 0) & ~mask].max(initial=0)


def test_one_zone_helper_for_the_learning_zone():
    from lze_trl.method.selection import in_learning_zone
    from lze_trl.plotting import in_learning_zone as plotting_zone
    from lze_trl.plotting.tables import ZONES, zone_state

    p = np.array([0.0, 0.125, 0.5, 1.0, np.nan])
    np.testing.assert_array_equal(in_learning_zone(p), [False, True, True, False, False])
    assert zone_state(p).tolist() == ["unsolved", "learning zone", "learning zone", "solved", "unknown"]
    assert set(zone_state(p)) - {"unknown"} == set(ZONES)
    assert plotting_zone is in_learning_zone  # the analysis module uses the method layer's helper, not a copy


def test_live_groups_binary_rewards_follow_the_pass_rate():
    correctness = np.array([[1, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [np.nan] * 4])
    p = group_pass_rates(correctness.ravel(), 4, 0.5)
    assert list(live_groups(p, correctness, correctness)) == [True, False, False, False]


def test_live_groups_non_binary_rewards_count_the_spread_of_total_rewards():
    # a score always >= pass_threshold (pass rate 1) but varying: live; constant: dead; one scorable rollout: dead
    correctness = np.array([[0.6, 0.9, 0.7, 0.8], [0.7] * 4, [0.9, np.nan, np.nan, np.nan]])
    p = group_pass_rates(correctness.ravel(), 4, 0.5)
    assert list(p) == [1.0, 1.0, 1.0]
    assert list(live_groups(p, correctness, correctness)) == [True, False, False]
    # binary correctness at its ends stays dead whatever another reward adds (the paper's rule)
    binary = np.array([[1.0, 1.0, 1.0, 1.0]])
    assert not live_groups([1.0], binary, binary + np.array([[0.0, 0.1, 0.2, 0.3]]))[0]


def test_spread_energies_rank_after_every_learning_zone_group():
    p = np.array([0.5, 1.0, 1.0, 0.0])
    live = np.array([True, True, True, False])
    totals = np.array([[0, 1, 0, 1], [0.6, 0.9, 0.7, 0.8], [0.7, 0.71, 0.7, 0.71], [0, 0, 0, 0]], dtype=float)
    energies = spread_energies(np.array([0.9, 0.0, 0.0, 0.0]), p, live, totals)
    assert energies[0] == 0.9 and energies[3] == 0.0
    assert energies[1] == pytest.approx(SPREAD_ENERGY_MAX) and 0 < energies[2] < energies[1]


def test_total_rewards_weigh_the_functions_and_leave_an_unscored_rollout_nan():
    # rollouts x reward functions; NaN where a function did not score the rollout
    rewards = np.array([[1.0, 0.5], [np.nan, 2.0], [np.nan, np.nan], [0.0, 0.0]])
    np.testing.assert_array_equal(total_rewards(rewards), [1.5, 2.0, np.nan, 0.0])  # TRL's async worker: weight 1
    np.testing.assert_array_equal(total_rewards(rewards, np.array([2.0, -1.0])), [1.5, -2.0, np.nan, 0.0])
    assert total_rewards(rewards.reshape(2, 2, 2)).shape == (2, 2)  # over the last axis, any leading shape
