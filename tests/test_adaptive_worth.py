"""The experimental rule of BENCHMARKS.md section 12 (`benchmarks/adaptive/worth.py`): a group of the adaptive budget
goes on while it may still reach the update (live and in the selector's quota by energy once complete)."""

import numpy as np
from testing_utils import make_trainer

from benchmarks.adaptive.worth import WorthRoundsTrainer, reach_probability
from lze_trl.run import LZERun


def test_a_group_goes_on_while_it_may_still_reach_the_update(tmp_path):
    trainer = make_trainer(tmp_path, trainer_class=WorthRoundsTrainer, rollout_rounds=[2, 4, 8], num_generations=8)
    run, ids = trainer.lze, np.arange(64)
    correctness = np.zeros((64, 4))
    correctness[:8] = [1.0, 0.0, 1.0, 0.0]  # half right: the highest energy a group can have
    correctness[8:40] = [1.0, 1.0, 1.0, 0.0]  # three of four: live, lower energy
    correctness[40:48, 2:] = np.nan  # stopped after the first round, alike: never kept
    reach = run.live_probability(ids, correctness, 4)
    assert np.array_equal(reach, reach_probability(run, ids, correctness, 4))  # the trainer decides by it
    assert np.array_equal(reach, reach_probability(run, ids, correctness, 4))  # the same on every call (process)
    live = LZERun.live_probability(run, ids, correctness, 4)
    assert np.all(reach <= live + 0.08) and np.all(reach[40:48] == 0.0)  # up to the draws' noise
    # the quota (int(0.4 x 64) = 25) holds the 8 half-right groups, then 17 of the 32 three-of-four ones
    assert np.all(reach[:8] > 0.9) and np.all(live[8:40] == 1.0) and 0.2 < reach[8:40].mean() < 0.8
    # with a quota of every group, a group still going on reaches the update when it is live
    run.args.selection_ratio = 1.0
    going = ~np.isnan(correctness[:, -1])
    np.testing.assert_allclose(reach_probability(run, ids, correctness, 4)[going], live[going], atol=0.08)
