"""The adaptive rollout budget (`generation_rounds`, `round_policy="adaptive"`): the learning-zone probability against
the beta-binomial, the rows of several rounds served as one call, and trainer runs: each rollout generated and
rewarded once, a group going on only while it may be live, whole groups with TRL's advantages in the update, a
guard, settings refused early (exact resume: `tests/rounds/test_probe.py`)."""

import numpy as np
import pytest
import torch
from scipy import stats
from test_probe import RecordingTrainer, bucket_reward, rollouts
from testing_utils import completion_bucket, logged, lze_args, make_trainer, prompt_dataset, prompt_number

from lze_trl import LZEWarning
from lze_trl.method.energy import fit_beta_prior, learning_zone_probability
from lze_trl.method.round_policies import AdaptiveRounds, RoundsState
from lze_trl.method.run import LZERun
from lze_trl.rounds.serial import served_rows


def test_live_probability_is_one_minus_the_beta_binomial_chance_that_the_group_stays_alike():
    # by hand: 2 of 2 correct under a Beta(0.5, 0.5) prior: Beta(2.5, 0.5); 2 more all correct: 2.5/3 * 3.5/4
    np.testing.assert_allclose(learning_zone_probability([2], [2], 2, [0.5], [0.5]), [1 - 2.5 / 3 * 3.5 / 4])
    rng = np.random.default_rng(0)
    trials = rng.integers(0, 5, 200)
    successes = np.where(rng.random(200) < 0.5, 0, trials)  # alike so far: all failures or all successes
    successes[:20] = np.minimum(1, trials[:20])  # and a few mixed (or empty) ones
    prior_a, prior_b, remaining = 0.1 + 3 * rng.random(200), 0.1 + 3 * rng.random(200), 4
    a, b = prior_a + successes, prior_b + trials - successes
    stays = np.where(successes == trials, stats.betabinom.pmf(remaining, remaining, a, b), 0.0)
    stays += np.where(successes == 0, stats.betabinom.pmf(0, remaining, a, b), 0.0)
    np.testing.assert_allclose(learning_zone_probability(successes, trials, remaining, prior_a, prior_b), 1 - stays)
    mixed = (successes > 0) & (successes < trials)
    assert mixed.any() and np.all(
        learning_zone_probability(successes, trials, remaining, prior_a, prior_b)[mixed] == 1.0
    )


def test_the_fitted_prior_recovers_a_beta_binomial_population_and_its_limits():
    rng = np.random.default_rng(0)
    for a, b, n in [(0.6, 1.4, 4), (3.0, 2.0, 2), (0.2, 0.3, 2)]:
        successes = rng.binomial(n, rng.beta(a, b, 200_000))
        fitted_a, fitted_b = fit_beta_prior(successes, np.full(len(successes), n))
        np.testing.assert_allclose([fitted_a, fitted_b], [a, b], rtol=0.08)
    # by hand: successes 0, 2, 2, 2 of 2: mean 7/10, Var(s) = 0.75, ratio 0.75 / (2 * 0.21), strength (2 - r) / (r - 1)
    ratio = 0.75 / (2 * 0.7 * 0.3)
    strength = (2 - ratio) / (ratio - 1)
    np.testing.assert_allclose(fit_beta_prior([0, 2, 2, 2], [2, 2, 2, 2]), [0.7 * strength, 0.3 * strength])
    # groups as spread as one binomial: a point prior; every group alike: an empty one
    assert sum(fit_beta_prior([1, 1, 1, 1], [2, 2, 2, 2])) == 1e6
    assert sum(fit_beta_prior([0, 0, 2, 2], [2, 2, 2, 2])) == 1e-6
    # an unscorable rollout leaves its group out; one rollout per group, or one group, cannot tell
    np.testing.assert_allclose(fit_beta_prior([0, 1, 2, 2, 2], [2, 1, 2, 2, 2]), fit_beta_prior([0, 2, 2, 2], [2] * 4))
    assert fit_beta_prior([0, 1, 1], [1, 1, 1]) is None and fit_beta_prior([1], [2]) is None


def test_a_new_prompt_s_prior_is_fitted_to_the_batch_and_a_known_one_s_is_its_history(tmp_path):
    run = LZERun(lze_args(tmp_path, generation_rounds=[2, 4, 8], num_generations=8), 8, None)
    policy = run.round_policy
    assert isinstance(policy, AdaptiveRounds)  # round_policy's default

    def state(correctness):
        rewards = np.full((len(correctness), 8, 1), np.nan)
        rewards[:, : correctness.shape[1], 0] = correctness
        return RoundsState(np.arange(16), rewards, 0, np.ones(16, dtype=bool), correctness.shape[1])

    alike = np.array([[0.0, 0.0]] * 6 + [[1.0, 1.0]] * 6 + [[1.0, 0.0]] * 4)  # most prompts never or always solved
    live = policy.learning_zone_probability(run, state(alike))
    assert np.all(live[:12] < 0.5) and np.all(live[12:] == 1.0)  # the alike groups stop, the mixed go on
    going_on, priority = policy.choose(run, state(alike))
    assert np.array_equal(going_on, live >= 0.5) and np.array_equal(priority, live)
    spread = np.array([[0.0, 0.0]] * 4 + [[1.0, 1.0]] * 4 + [[1.0, 0.0]] * 8)  # as one binomial: every prompt alike
    assert np.all(policy.learning_zone_probability(run, state(spread)) > 0.9)
    # the first round alone is fitted: a later round's columns (NaN where a group stopped) do not move the prior
    later = np.concatenate([alike, np.where(np.arange(16)[:, None] >= 12, 1.0, np.nan) * np.ones((16, 2))], axis=1)
    assert policy.new_prompt_prior(run, later) == policy.new_prompt_prior(run, alike)
    # a known prompt's prior is its EMA, weighed history_prior_strength rollouts, whatever the batch
    run.prompts.record_pass_rates(np.array([0]), np.array([0.5]), 0)
    ema_prior = learning_zone_probability([0], [2], 6, [0.5 + 4 * 0.5], [0.5 + 4 * 0.5])
    np.testing.assert_allclose(policy.learning_zone_probability(run, state(alike))[:1], ema_prior)
    assert ema_prior > 0.5


@pytest.mark.slow
def test_in_the_first_batch_groups_alike_in_a_bimodal_batch_stop_after_the_first_round(tmp_path):
    def bimodal_reward(prompts, completions, **kwargs):  # prompts always solved, never solved, or half the time
        kind = [prompt_number(p) % 4 for p in prompts]
        return [float(k == 0 or (k == 3 and completion_bucket(c, 2) == 0)) for k, c in zip(kind, completions)]

    trainer = make_trainer(
        tmp_path,
        reward=bimodal_reward,
        dataset=prompt_dataset(32),
        generation_rounds=[2, 4],
        fuse_rounds=False,  # the serial rounds: the batch complete in its own step
        per_device_train_batch_size=64,  # 16 new prompts x 4 rollouts in the first generation batch
        max_steps=1,
        trainer_class=RecordingTrainer,
    )
    trainer.train()
    first = trainer.generated[0]
    groups = {}
    for prompt, completion in first:
        groups.setdefault(prompt, []).append(bimodal_reward([prompt], [completion])[0])
    mixed = {p for p, r in groups.items() if len(set(r)) > 1}
    assert len(groups) == 16 and 0 < len(mixed) < 8
    completed = {p for p, _ in trainer.generated[1]}
    assert completed == mixed  # only the groups mixed in the first round went on
    assert logged(trainer, "lze/completed_groups") == [len(mixed)]
    assert logged(trainer, "lze/new_prompt_pass_rate_std")[0] > 0.3  # the batch's prompts taken as far apart


def test_rows_of_several_rounds_are_served_group_by_group_in_round_order():
    # group 0 stopped after round 1; groups 1 and 2 got rounds 2 (1 rollout each) and 3 (2 rollouts each)
    first, second, third = rollouts([10, 11, 12]), rollouts([21, 22]), rollouts([31, 32, 33, 34])
    rounds = [
        (first.rows, np.array([0, 1, 2]), 1),
        (second.rows, np.array([1, 2]), 1),
        (third.rows, np.array([1, 2]), 2),
    ]
    served = served_rows(rounds, np.array([1, 2]))
    assert served.prompts == ["p11", "p21", "p31", "p32", "p12", "p22", "p33", "p34"]


@pytest.mark.slow
def test_groups_go_on_while_they_may_be_live_and_only_completed_ones_reach_the_update(tmp_path):
    scored = []

    def counting_reward(prompts, completions, **kwargs):
        scored.append(len(completions))
        return bucket_reward(prompts, completions)

    trainer = make_trainer(
        tmp_path,
        reward=counting_reward,
        dataset=prompt_dataset(32),
        generation_rounds=[1, 2, 4],
        fuse_rounds=False,  # the serial rounds: three generation calls per step
        per_device_train_batch_size=32,  # 8 prompts x 4 rollouts per generation batch
        max_steps=3,
        trainer_class=RecordingTrainer,
    )
    trainer.train()
    tokenizer = trainer.processing_class
    completed, fresh = logged(trainer, "lze/completed_groups"), logged(trainer, "lze/fresh_rollouts")
    calls = [len(g) for g in trainer.generated]
    assert len(calls) == 9  # three rounds per generation batch: 1 rollout of all 8 prompts, 1 more, 2 more
    assert scored == calls and [sum(calls[3 * s : 3 * s + 3]) for s in range(3)] == fresh  # rewarded once each
    assert all(calls[3 * s] == 8 and calls[3 * s + 2] == 2 * completed[s] for s in range(3))
    assert 0 < sum(completed) < 24
    for step, update in enumerate(trainer.updates):
        made = [pc for call in trainer.generated[3 * step : 3 * step + 3] for pc in call]
        kept = update["completion_mask"].sum(dim=1) > 0
        prompts = tokenizer.batch_decode(update["prompt_ids"][kept], skip_special_tokens=True)
        completions = tokenizer.batch_decode(update["completion_ids"][kept], skip_special_tokens=True)
        for prompt in set(prompts):  # a completed group: its rollouts of the three rounds, TRL's advantages over 4
            rows_of = [i for i, p in enumerate(prompts) if p == prompt]
            assert sorted(completions[i] for i in rows_of) == sorted(c for p, c in made if p == prompt)
            rewards = torch.tensor(bucket_reward([prompt] * 4, [completions[i] for i in rows_of]))
            torch.testing.assert_close(
                update["advantages"][kept][rows_of], (rewards - rewards.mean()) / (rewards.std() + 1e-4)
            )
        stopped = [p for p in {p for p, _ in made} if sum(q == p for q, _ in made) < 4]
        assert len(stopped) == 8 - completed[step] and not set(stopped) & set(prompts)
        for prompt in stopped:  # a group that stopped early: its rollouts all alike
            got = [c for p, c in made if p == prompt]
            assert len(set(bucket_reward([prompt] * len(got), got))) == 1


@pytest.mark.slow
def test_a_run_whose_rounds_complete_dead_groups_says_so_naming_the_setting(tmp_path):
    trainer = make_trainer(
        tmp_path,
        reward=lambda completions, **kw: [0.0] * len(completions),
        generation_rounds=[1, 2, 4],
        learning_zone_threshold=1e-9,  # every group goes on: every completed group is dead
        per_device_train_batch_size=16,
        fuse_rounds=True,
        max_steps=3,  # fused rounds: the first step starts the batches in flight (3 calls) and completes its own
    )
    with pytest.warns(
        LZEWarning,
        match=r"generation_rounds=\[1, 2, 4\], round_policy='adaptive': more than half .* Raise learning_zone_thre",
    ):
        trainer.train()
    assert logged(trainer, "lze/completed_groups") == [4.0] * 3
    # the first step: 4, then 4 + 4, then 8 + 4 + 4 (its own last round, the next batch's second, the one after's
    # first); then each step its own last round and what is left of the run's batches: 8 + 4, then 8
    assert logged(trainer, "lze/fresh_rollouts") == [4.0 + 8.0 + 16.0, 12.0, 8.0]


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(generation_rounds=[2, 3]), r"generation_rounds=\[2, 3\] is invalid.*ending at num_generations=4"),
        (dict(generation_rounds=[2, 2, 4]), "strictly increasing"),
        (dict(generation_rounds=[0, 4]), "strictly increasing rollout counts >= 1"),
        (dict(generation_rounds=[2, 4], selector="none"), "selector='none' keeps every group"),
        (dict(generation_rounds=[2, 4], learning_zone_threshold=0.0), "learning_zone_threshold=0.0 is invalid"),
    ],
)
def test_bad_adaptive_budget_settings_are_refused_with_the_fix(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        lze_args(tmp_path, **overrides)


def test_rounds_from_a_command_line_are_parsed_and_need_whole_groups(tmp_path):
    from lze_trl.method.validation import validate_lze_args

    assert lze_args(tmp_path, generation_rounds="1,2,4").generation_rounds == [1, 2, 4]
    args = lze_args(tmp_path, generation_rounds=[2, 4], num_generations=4, per_device_train_batch_size=8)
    args.per_device_train_batch_size = 6  # as on 2 processes
    with pytest.raises(ValueError, match=r"generation_rounds=\[2, 4\] cannot run: every process needs whole groups"):
        validate_lze_args(args)


def test_the_budget_needs_a_selector_that_reads_pass_rates(tmp_path, monkeypatch):
    from lze_trl.method.selectors import SELECTORS
    from lze_trl.method.selectors.base import Selector

    class Blind(Selector):
        name, needs_pass_rates = "blind", False

        def select(self, batch):
            return np.ones(batch.num_groups)

    monkeypatch.setitem(SELECTORS, "blind", Blind)
    lze_args(tmp_path, selector="blind")  # fine without the budget
    with pytest.raises(ValueError, match=r"selector='blind' reads no pass rates.*Set generation_rounds=None"):
        lze_args(tmp_path, selector="blind", generation_rounds=[2, 4])
