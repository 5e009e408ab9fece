"""The experimental rule of BENCHMARKS.md section 12 (`benchmarks/adaptive/worth.py`): a group of the adaptive budget
goes on while it may still reach the update (live and in the selector's quota by energy once complete)."""

import numpy as np
from testing_utils import make_trainer

from benchmarks.adaptive.worth import SETTING, WorthRounds, reach_probability
from lze_trl.method.round_policies import AdaptiveRounds, RoundsState


def test_a_group_goes_on_while_it_may_still_reach_the_update(tmp_path):
    trainer = make_trainer(tmp_path, **SETTING, num_generations=8)
    run, policy = trainer.lze, trainer.lze.round_policy
    assert isinstance(policy, WorthRounds)  # chosen from the config, by its registered name
    rewards = np.full((64, 8, 1), np.nan)
    rewards[:, :4, 0] = 0.0
    rewards[:8, :4, 0] = [1.0, 0.0, 1.0, 0.0]  # half right: the highest energy a group can have
    rewards[8:40, :4, 0] = [1.0, 1.0, 1.0, 0.0]  # three of four: live, lower energy
    rewards[40:48, 2:4, 0] = np.nan  # stopped after the first round, alike: never kept
    going = np.ones(64, dtype=bool)
    going[40:48] = False
    state = RoundsState(np.arange(64), rewards, 0, going, rollouts_so_far=4)
    reach = policy.learning_zone_probability(run, state)
    assert np.array_equal(reach, reach_probability(policy, run, state))  # the same on every call (process)
    live = AdaptiveRounds.learning_zone_probability(policy, run, state)
    assert np.all(reach <= live + 0.08) and np.all(reach[40:48] == 0.0)  # up to the draws' noise
    # the quota (int(0.4 x 64) = 25) holds the 8 half-right groups, then 17 of the 32 three-of-four ones
    assert np.all(reach[:8] > 0.9) and np.all(live[8:40] == 1.0) and 0.2 < reach[8:40].mean() < 0.8
    # with a quota of every group, a group still going on reaches the update when it is live
    run.args.selection_ratio = 1.0
    np.testing.assert_allclose(reach_probability(policy, run, state)[going], live[going], atol=0.08)
