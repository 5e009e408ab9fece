"""The uniform control of BENCHMARKS.md section 12 (`benchmarks/adaptive/control.py`): as many groups go on as the
adaptive budget's rule would continue, each chosen among the groups still going on, uniformly."""

import numpy as np
from testing_utils import make_trainer

from benchmarks.adaptive.control import UniformRoundsTrainer
from lze_trl.run import LZERun


def test_the_control_continues_as_many_groups_as_the_rule_chosen_among_those_going_on(tmp_path):
    trainer = make_trainer(
        tmp_path,
        trainer_class=UniformRoundsTrainer,
        rollout_rounds=[2, 4, 8],
        num_generations=8,
        rollout_live_threshold=0.99,  # only groups already mixed are sure to be live
    )
    rng = np.random.default_rng(0)
    ids = np.arange(64)
    correctness = rng.integers(0, 2, size=(64, 4)).astype(float)
    correctness[rng.random(64) < 0.3, 2:] = np.nan  # stopped after the first round
    correctness[:16, :] = 1.0  # all right so far: the rule stops them
    correctness[16:24, :] = 0.0
    going = ~np.isnan(correctness[:, -1])
    rule = LZERun.live_probability(trainer.lze, ids, correctness, 4) >= trainer.args.rollout_live_threshold
    picks = [trainer.lze.live_probability(ids, correctness, 4) for _ in range(20)]
    for chosen in picks:
        assert set(np.unique(chosen)) <= {0.0, 1.0}
        assert chosen.sum() == (rule & going).sum() and not chosen[~going].any()
    assert len({tuple(c) for c in picks}) > 1  # uniform: not the rule's own choice every time
    assert (rule & going).sum() < going.sum()  # the rule stops some: the control has a choice to make
