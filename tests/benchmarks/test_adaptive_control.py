"""The uniform control of BENCHMARKS.md section 12 (`benchmarks/adaptive/control.py`): as many groups go on as the
adaptive budget's rule would continue, each chosen among the groups still going on, uniformly."""

import numpy as np
from testing_utils import make_trainer

from benchmarks.adaptive.control import SETTING, UniformAdaptiveRounds
from lze_trl.method.round_policies import AdaptiveRounds, RoundsState


def test_the_control_continues_as_many_groups_as_the_rule_chosen_among_those_going_on(tmp_path):
    trainer = make_trainer(
        tmp_path,
        **SETTING,
        num_generations=8,
        learning_zone_threshold=0.99,  # only groups already mixed are sure to be live
    )
    run, policy = trainer.lze, trainer.lze.round_policy
    assert isinstance(policy, UniformAdaptiveRounds)  # chosen from the config, by its registered name
    rng = np.random.default_rng(0)
    rewards = np.full((64, 8, 1), np.nan)
    rewards[:, :4, 0] = rng.integers(0, 2, size=(64, 4))
    stopped = rng.random(64) < 0.3
    rewards[stopped, 2:4] = np.nan  # stopped after the first round
    rewards[:16, :4] = 1.0  # all right so far: the rule stops them
    rewards[16:24, :4] = 0.0
    state = RoundsState(np.arange(64), rewards, 0, ~stopped, rollouts_so_far=4)
    state.going_on[:24] = True
    rule, _ = AdaptiveRounds.choose(policy, run, state)
    picks = [policy.choose(run, state)[0] for _ in range(20)]
    for chosen in picks:
        assert chosen.sum() == (rule & state.going_on).sum() and not chosen[~state.going_on].any()
    assert len({tuple(c) for c in picks}) > 1  # uniform: not the rule's own choice every time
    assert (rule & state.going_on).sum() < state.going_on.sum()  # the rule stops some: the control has a choice
