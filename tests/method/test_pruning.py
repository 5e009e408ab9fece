import dataclasses

import numpy as np
import pytest

from lze_trl import LZEStateError, PromptPruner, PromptState


def record_pass_rates(state, ids, rates):
    state.record_pass_rates(ids, rates, batch_index=0)


def test_prompt_pruned_after_consecutive_solved_observations():
    state, pruner = PromptState(), PromptPruner(solved_after=2, explore_fraction=0.0)
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


def test_exploration_returns_forgotten_prompts_and_keeps_solved_ones():
    state, pruner = PromptState(), PromptPruner(solved_after=1, explore_fraction=0.1, seed=3)
    rows = np.arange(100)
    record_pass_rates(state, np.arange(50), np.ones(50))
    assert pruner.num_pruned(state) == 50
    planned = pruner.plan_epoch(1, rows, rows, state)
    revisited = pruner.explored_keys
    assert len(revisited) == 5  # 10% of the pool
    assert set(planned) == set(revisited) | set(range(50, 100))
    # first explored prompt forgotten, the others still solved
    record_pass_rates(state, revisited, [0.5] + [1.0] * 4)
    pruned = pruner.pruned(revisited, state)
    assert not pruned[0] and pruned[1:].all()


def test_duplicate_rows_follow_their_prompt():
    state, pruner = PromptState(), PromptPruner(solved_after=1, explore_fraction=0.0)
    record_pass_rates(state, [0], [1.0])
    rows, ids = np.array([0, 1, 2, 3]), np.array([0, 1, 0, 3])  # row 2 repeats row 0's prompt
    assert list(pruner.plan_epoch(0, rows, ids, state)) == [1, 3]


def test_exploration_at_least_one_and_deterministic():
    plans = []
    for _ in range(2):
        state, pruner = PromptState(), PromptPruner(solved_after=1, seed=7)
        record_pass_rates(state, [4, 5], [1.0, 1.0])
        plans.append(pruner.plan_epoch(2, np.arange(10), np.arange(10), state))
        assert pruner.num_explored == 1
    np.testing.assert_array_equal(*plans)


def test_state_roundtrip():
    state, a = PromptState(), PromptPruner(solved_after=1, explore_fraction=0.5)
    record_pass_rates(state, [1, 2], [1.0, 1.0])
    a.plan_epoch(0, np.arange(10), np.arange(10), state)
    b = PromptPruner(solved_after=1)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.explored_keys, b.explored_keys)


@pytest.mark.parametrize(
    "settings",
    [
        dict(solved_after=0),
        dict(explore_fraction=1.5),
        dict(explore_fraction=-0.1),
        dict(solved_after=None),
        dict(unsolved_after=0),
        dict(target_dead_frac=2.0),
        dict(target_dead_frac=-0.1),
    ],
)
def test_bad_settings_are_refused_by_the_pruner_itself(settings):
    with pytest.raises(ValueError, match="PromptPruner needs solved_after or unsolved_after >= 1"):
        PromptPruner(**settings)


def test_unknown_exploration_is_refused():
    with pytest.raises(ValueError, match="exploration must be one of"):
        PromptPruner(exploration="greso")


# ------------------------------------------------------------------------------------------ both sides
def test_unsolved_side_is_pruned_only_when_asked():
    state = PromptState()
    record_pass_rates(state, [0, 1, 2], [0.0, 1.0, 0.5])
    rows = np.arange(4)
    solved_only = PromptPruner(solved_after=1, explore_fraction=0.0)
    both = PromptPruner(solved_after=1, unsolved_after=1, explore_fraction=0.0)
    unsolved_only = PromptPruner(solved_after=None, unsolved_after=1, explore_fraction=0.0)
    assert list(solved_only.plan_epoch(1, rows, rows, state)) == [0, 2, 3]
    assert list(both.plan_epoch(1, rows, rows, state)) == [2, 3]  # 3 never seen: always rolled out
    assert list(unsolved_only.plan_epoch(1, rows, rows, state)) == [1, 2, 3]
    np.testing.assert_array_equal(both.skipped, [1, 1])
    assert both.sides == ("solved", "unsolved") and unsolved_only.sides == ("unsolved",)


def test_unsolved_threshold_counts_consecutive_unsolved_observations():
    state, pruner = PromptState(), PromptPruner(solved_after=None, unsolved_after=2, explore_fraction=0.0)
    record_pass_rates(state, [0, 1], [0.0, 0.0])
    assert pruner.num_pruned(state) == 0
    record_pass_rates(state, [0, 1], [0.0, 1.0])  # 1 turned solved: its unsolved streak ends
    assert list(np.flatnonzero(pruner.pruned(np.arange(2), state))) == [0]


def test_replay_draws_from_each_side():
    state, pruner = PromptState(), PromptPruner(solved_after=1, unsolved_after=1, explore_fraction=0.1, seed=1)
    record_pass_rates(state, np.arange(40), np.r_[np.ones(30), np.zeros(10)])
    planned = pruner.plan_epoch(3, np.arange(50), np.arange(50), state)
    assert sorted(pruner.explored_sides.tolist()) == [0, 0, 0, 1]  # 10% of 30, and at least one of 10
    assert set(planned) == set(pruner.explored_keys) | set(range(40, 50))
    np.testing.assert_array_equal(pruner.skipped, [27, 9])


def test_adaptive_keeps_a_prompt_with_probability_p_to_the_depth():
    state = PromptState()
    keys = np.arange(4000)
    record_pass_rates(state, keys, np.zeros(4000))
    record_pass_rates(state, keys[2000:], np.zeros(2000))  # depth 2 for the second half
    pruner = PromptPruner(solved_after=None, unsolved_after=1, exploration="adaptive", seed=0)
    planned = pruner.plan_epoch(1, keys, keys, state)
    assert abs(np.isin(keys[:2000], planned).mean() - 0.5) < 0.04  # p = 0.5 at depth 1
    assert abs(np.isin(keys[2000:], planned).mean() - 0.25) < 0.04  # p ** 2 at depth 2


def test_adaptive_probability_is_set_when_an_epoch_is_planned_from_the_share_since_the_last_plan():
    state = PromptState()
    record_pass_rates(state, np.arange(4), [1.0, 1.0, 0.0, 0.0])  # two prompts pooled on each side
    pruner = PromptPruner(solved_after=1, unsolved_after=1, exploration="adaptive", target_dead_frac=0.3)
    np.testing.assert_allclose(pruner.targets, [0.1, 0.2])  # GRESO's split: a third, two thirds
    pruner.plan_epoch(0, np.arange(10), np.arange(10), state)
    for _ in range(30):  # an epoch of batches: 2 of 10 solved (0.2 against 0.1), 1 of 10 unsolved (0.1 against 0.2)
        pruner.observe(np.arange(10), np.r_[1.0, 1.0, 0.0, np.full(7, 0.5)])
    np.testing.assert_allclose(pruner.keep_probability, [0.5, 0.5])  # nothing moves before the plan it acts in
    pruner.plan_epoch(1, np.arange(10), np.arange(10), state)
    np.testing.assert_allclose(pruner.keep_probability, [0.25, 0.95])  # 0.5 x 0.1 / 0.2; 0.5 x 0.2 / 0.1, clipped
    assert pruner.dead_since_plan.tolist() == [0, 0] and pruner.scored_since_plan.tolist() == [0]  # a new window
    pruner.plan_epoch(2, np.arange(10), np.arange(10), state)  # nothing recorded since: p stays
    np.testing.assert_allclose(pruner.keep_probability, [0.25, 0.95])
    pruner.observe(np.arange(10), np.full(10, 0.5))
    pruner.plan_epoch(3, np.arange(10), np.arange(10), state)  # no dead group: explore as much as the range allows
    np.testing.assert_allclose(pruner.keep_probability, [0.95, 0.95])


def test_adaptive_probability_stays_on_a_side_with_nothing_pooled_or_not_pruned():
    state = PromptState()
    record_pass_rates(state, np.arange(4), [0.5, 0.5, 0.0, 0.5])
    pruner = PromptPruner(solved_after=1, unsolved_after=1, exploration="adaptive", target_dead_frac=0.3)
    one_side = PromptPruner(solved_after=None, unsolved_after=1, exploration="adaptive", target_dead_frac=0.3)
    assert one_side.targets[1] == 0.3
    for pruner_ in (pruner, one_side):
        pruner_.plan_epoch(0, np.arange(4), np.arange(4), state)
        pruner_.observe(np.arange(4), np.zeros(4))
        pruner_.plan_epoch(1, np.arange(4), np.arange(4), state)
    np.testing.assert_allclose(pruner.keep_probability, [0.5, 0.1])  # the solved pool was empty at the last plan
    np.testing.assert_allclose(one_side.keep_probability, [0.5, 0.15])  # the solved side is not pruned: its p stays


def test_adaptive_probability_settles_at_its_target_without_swinging():
    """A closed loop: 1,000 pooled prompts all wrong again whenever explored, 1,000 others of which 5% are all wrong.
    The unsolved share of an epoch is (50 + 1000 p) / (1000 + 1000 p), which meets the target 0.1 at p = 1/18."""
    state, keys = PromptState(), np.arange(2000)
    record_pass_rates(state, keys[:1000], np.zeros(1000))
    pruner = PromptPruner(solved_after=None, unsolved_after=1, exploration="adaptive", target_dead_frac=0.1)
    probabilities, shares = [], []
    for epoch in range(8):
        planned = pruner.plan_epoch(epoch, keys, keys, state)
        probabilities.append(pruner.keep_probability[1])
        pass_rates = np.where((planned < 1000) | (planned % 20 == 0), 0.0, 0.5)
        for batch in np.array_split(np.arange(len(planned)), 20):
            pruner.observe(planned[batch], pass_rates[batch])
        shares.append((pass_rates == 0).mean())
    assert np.all(np.diff(probabilities) < 0)  # down toward its fixed point, never past it
    assert probabilities[-1] > 1 / 18 - 0.01 and abs(shares[-1] - 0.1) < 0.01


def test_explored_groups_are_scored_once_and_their_liveness_counted():
    state = PromptState()
    record_pass_rates(state, np.arange(6), [0.0, 0.0, 0.0, 1.0, 1.0, 0.5])
    pruner = PromptPruner(solved_after=1, unsolved_after=1, explore_fraction=1.0)
    pruner.plan_epoch(1, np.arange(6), np.arange(6), state)
    assert pruner.num_explored == 5
    pruner.observe([0, 1, 5], [0.0, 0.5, 0.5])  # 1 came back to life; 5 was never pruned
    pruner.observe([0, 3], [0.25, 1.0])  # 0 was scored already this visit: not counted again
    np.testing.assert_array_equal(pruner.explored_scored, [1, 2])
    np.testing.assert_array_equal(pruner.explored_live, [0, 1])
    metrics = pruner.metrics(state)
    assert metrics["prune_precision"] == pytest.approx(2 / 3)
    assert (metrics["explored_live_unsolved"], metrics["explored_prompts_solved"]) == (1.0, 2.0)


def test_an_explored_group_still_in_flight_at_the_next_plan_is_counted_when_it_arrives():
    state = PromptState()
    record_pass_rates(state, [0], [0.0])
    pruner = PromptPruner(solved_after=None, unsolved_after=1, explore_fraction=1.0)
    pruner.plan_epoch(1, np.arange(2), np.arange(2), state)
    pruner.plan_epoch(2, np.arange(2), np.arange(2), state)  # the async window plans ahead of what has arrived
    pruner.observe([0], [0.5])
    pruner.observe([0], [0.5])
    np.testing.assert_array_equal(pruner.explored_live, [0, 2])


@pytest.mark.parametrize("exploration", ["replay", "adaptive"])
def test_both_sided_state_roundtrip_continues_identically(exploration):
    def fresh():
        return PromptPruner(solved_after=1, unsolved_after=1, exploration=exploration, seed=5, explore_fraction=0.3)

    state, a = PromptState(), fresh()
    record_pass_rates(state, np.arange(20), np.r_[np.ones(8), np.zeros(8), np.full(4, 0.5)])
    a.plan_epoch(1, np.arange(20), np.arange(20), state)
    a.observe(np.arange(4), [0.0, 0.5, 1.0, 0.0])
    b = fresh()
    b.load_state_dict(a.state_dict())
    for name, value in a.state_dict().items():
        np.testing.assert_array_equal(value, getattr(b, name))
    np.testing.assert_array_equal(
        a.plan_epoch(2, np.arange(20), np.arange(20), state), b.plan_epoch(2, np.arange(20), np.arange(20), state)
    )
    assert a.metrics(state) == b.metrics(state)


def test_a_state_that_does_not_fit_is_refused():
    with pytest.raises(LZEStateError, match="lacks .*keep_probability"):
        PromptPruner().load_state_dict({"explored_keys": np.array([1])})


def skip_mode_run(**settings):
    """An `LZERun` of 12 prompts (keys 0-11) in skip mode, both sides pruned after one dead group."""
    from lze_trl.method.run import LZERun
    from lze_trl.method.settings import LZESettings

    args = LZESettings(prune_solved=True, prune_solved_after=1, prune_unsolved=True, prune_explore_fraction=0.0,
                       prune_refill=False, **settings)  # fmt: skip
    args.num_generations, args.seed = 4, 0
    return LZERun(args, 4, np.arange(12))


def test_skip_mode_plans_every_prompt_and_skips_alike_on_every_process():
    run = skip_mode_run()
    record_pass_rates(run.prompts, [0, 1, 2, 3, 4], [1.0, 0.0, 1.0, 0.5, 0.0])  # 0, 2 solved; 1, 4 unsolved
    plan = run.plan_epoch(1, np.arange(12))
    assert plan.tolist() == list(range(12))  # the epoch visits every prompt
    assert run.position.skipping.tolist() == [0, 1, 2, 4]
    # two processes, 3 groups each: process 0 would skip 3 (0, 1, 2), process 1 one (4): both skip one, the first
    skip, metrics = run.skip_groups(np.array([0, 1, 2, 3, 4, 5]), processes=2)
    assert skip.tolist() == [True, False, False, False, True, False]
    assert metrics == {"lze/groups_generated": 4.0, "lze/groups_skipped_solved": 1.0,
                       "lze/groups_skipped_unsolved": 1.0, "lze/generated_share": 4 / 6}  # fmt: skip
    # the pooled prompts generated all the same (1, 2) are explored: scored with the others, 2 dead again, 1 live
    assert sorted(run.pruner.pending_keys.tolist()) == [1, 2]
    run.record(run.score(np.array([1, 2, 3, 5]), np.array([[1, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0], [0, 1, 1, 1]]),
                         np.zeros((4, 4))), np.ones(4), 0)  # fmt: skip
    assert run.pruner.explored_scored.sum() == 2 and run.pruner.explored_live.sum() == 1
    assert run.position.skipped_groups == 2
    # a process whose every group is skipped still generates one
    skip, _ = run.skip_groups(np.array([0, 2]), processes=1)
    assert skip.tolist() == [True, False]


def test_skip_mode_state_resumes_exactly():
    run = skip_mode_run()
    record_pass_rates(run.prompts, [0, 1], [1.0, 0.0])
    run.plan_epoch(1, np.arange(12))
    restored = skip_mode_run()
    restored.load_state_dict(run.state_dict())
    assert restored.position.skipping.tolist() == run.position.skipping.tolist() == [0, 1]
    assert restored.skip_groups(np.arange(4), 1)[0].tolist() == run.skip_groups(np.arange(4), 1)[0].tolist()


def test_refilled_pruning_leaves_the_skipped_prompts_out_of_the_plan():
    run = skip_mode_run()
    run.args.prune_refill = True
    record_pass_rates(run.prompts, [0, 1], [1.0, 0.0])
    assert run.plan_epoch(1, np.arange(12)).tolist() == list(range(2, 12)) and not run.skips


def test_skipped_groups_count_in_the_quota_as_the_dead_groups_of_a_full_batch_do():
    from lze_trl.method.selectors import GroupBatch

    run = skip_mode_run(selector="lze", selection_ratio=0.4)
    energies = np.array([0.0, 0.9, 0.0, 0.5, 0.7])  # 3 live groups of 5 generated
    live = energies > 0
    batch = GroupBatch(np.arange(5), np.where(live, 0.5, 1.0), np.zeros((5, 4)), energies, live, np.zeros(5),
                       np.random.default_rng(0))  # fmt: skip
    # the step had 10 prompts, 5 skipped as predicted dead: the quota is int(10 x 0.4) = 4, not int(5 x 0.4) = 2
    assert run.select(batch, skipped=5).tolist() == [0, 1, 0, 1, 1]
    assert run.select(batch).sum() == 2
    # and the choice is the one on the full batch whose dead groups were generated (the noise is drawn for live ones)
    full = GroupBatch(np.arange(10), np.r_[batch.pass_rates, np.ones(5)], np.zeros((10, 4)), np.r_[energies, [0] * 5],
                      np.r_[live, [False] * 5], np.zeros(10), np.random.default_rng(0))  # fmt: skip
    run.args.selection_ratio = 0.2  # 2 of 10 either way: the same 2 by energy and noise
    chosen = run.select(dataclasses.replace(batch, rng=np.random.default_rng(1)), skipped=5)
    assert chosen.tolist() == run.select(dataclasses.replace(full, rng=np.random.default_rng(1)))[:5].tolist()
