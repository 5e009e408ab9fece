"""The package's own selectors (`lze_trl/method/selectors`): their decisions on hand-built batches, short trainer
runs, and a selector registered from outside the package. The peers registered from `benchmarks/peers` are tested in
tests/benchmarks/test_peers.py."""

from types import SimpleNamespace

import numpy as np
import pytest
from testing_utils import count_grad_rows, expected_forward_rows, lze_args, make_trainer

from lze_trl.method.selection import group_pass_rates, live_groups
from lze_trl.method.selectors import SELECTORS, GroupBatch, Selector, get_selector
from lze_trl.method.selectors.builtin import LZESelector, NoSelector, UniformLiveSelector


def settings(**overrides):
    values = dict(
        selection_ratio=0.4,
    )
    values.update(overrides)
    return SimpleNamespace(**values)


def batch(pass_rates=None, ids=None, rewards=None, seed=0, G=4, energies=None, ema=None):
    """Groups with the given pass rates (binary rewards), or with the given rewards (pass rates at 0.5)."""
    if rewards is None:
        p = np.asarray(pass_rates, dtype=np.float64)
        rewards = np.array([[float(j < round(x * G)) if np.isfinite(x) else np.nan for j in range(G)] for x in p])
    rewards = np.asarray(rewards, dtype=np.float64)
    p = group_pass_rates(rewards, rewards.shape[1], 0.5)
    ids = np.arange(len(p)) if ids is None else np.asarray(ids)
    return GroupBatch(
        prompt_keys=ids,
        pass_rates=p,
        rewards=rewards,
        energies=np.zeros(len(p)) if energies is None else np.asarray(energies, dtype=np.float64),
        live=live_groups(p, rewards, rewards),
        ema_pass_rates=p if ema is None else np.asarray(ema, dtype=np.float64),
        rng=np.random.default_rng(seed),
    )


# ----------------------------------------------------------------------------------------------- units
def test_registry_has_the_built_in_selectors():
    assert {"none", "lze", "uniform_live"} <= set(SELECTORS)
    assert get_selector("none") is NoSelector and get_selector("lze") is LZESelector
    assert get_selector("uniform_live") is UniformLiveSelector
    with pytest.raises(ValueError, match="selector='raft' is invalid"):
        get_selector("raft")


def test_uniform_live_draws_lzes_quota_among_live_groups_only():
    p = [0.0, 1.0, 0.5, 0.25, 0.0, 0.75, 1.0, 0.5, 0.0, 0.25, 0.5, 0.75, 1.0, 0.25, 0.0, 0.5]  # 16 groups, 9 live
    live = (np.asarray(p) > 0) & (np.asarray(p) < 1)
    selector = UniformLiveSelector(settings())
    counts = np.zeros(len(p))
    for seed in range(2000):
        weights = selector.select(batch(p, seed=seed))
        assert set(np.unique(weights)) <= {0.0, 1.0} and weights.sum() == 6  # int(16 * 0.4), as LZE keeps
        counts += weights
    assert counts[~live].sum() == 0  # a dead group is never drawn
    np.testing.assert_allclose(counts[live] / 2000, 6 / 9, atol=0.05)  # every live group equally often
    # the same number of groups as LZE on the same batch (the quota binds: 6 of 9 live groups)
    lze = get_selector("lze")(settings(selection_noise=0.05))
    assert lze.select(batch(p, energies=4 * np.asarray(p) * (1 - np.asarray(p)))).sum() == 6
    # fewer live groups than the quota: all of them, nothing else
    few = [0.0, 1.0, 0.5, 1.0, 0.0, 0.0, 1.0, 0.25, 0.0, 1.0]
    np.testing.assert_array_equal(selector.select(batch(few)), [0, 0, 1, 0, 0, 0, 0, 1, 0, 0])
    assert selector.select(batch([0.0, 1.0, 1.0])).sum() == 0  # no live group: nothing kept
    np.testing.assert_array_equal(selector.select(batch(p, seed=3)), selector.select(batch(p, seed=3)))


def test_lze_at_selection_ratio_one_keeps_every_live_group_whatever_the_noise():
    # the live-group filter (DAPO's, and the selector of Reinforce-Rej's settings in benchmarks/peers/reinforce_rej.py)
    p = [0.0, 1.0, 0.5, 0.25, np.nan, 0.75, 1.0, 0.5]
    live = (np.asarray(p) > 0) & (np.asarray(p) < 1)
    selector = LZESelector(settings(selection_ratio=1.0, selection_noise=1.0))
    for seed in range(50):
        energies = np.random.default_rng(seed).random(len(p))
        np.testing.assert_array_equal(selector.select(batch(p, seed=seed, energies=energies)), live)


@pytest.mark.parametrize(
    "setting, value",
    [
        ("selector", "raft"),
    ],
)
def test_bad_settings_name_the_setting(tmp_path, setting, value):
    with pytest.raises(ValueError, match=f"{setting}={value!r} is invalid: use"):
        lze_args(tmp_path, **{setting: value})


def test_energy_terms_accept_a_comma_separated_string(tmp_path):
    assert lze_args(tmp_path, energy_terms="anchor, momentum").energy_terms == ["anchor", "momentum"]
    with pytest.raises(ValueError, match="energy_terms"):
        lze_args(tmp_path, energy_terms="anchor,variance")


# ----------------------------------------------------------------------------------------------- trainer runs
@pytest.mark.slow
def test_uniform_live_run_updates_only_live_groups(tmp_path):
    trainer = make_trainer(tmp_path, "uniform_live", gradient_accumulation_steps=4, max_steps=2)  # 8 groups per step
    rows = count_grad_rows(trainer.model)
    trainer.train()
    log = trainer.selection_log.to_pandas()
    live = (log["pass_rate"] > 0) & (log["pass_rate"] < 1)
    assert not (log["selected"] & ~live).any()
    kept = log.groupby("batch")["selected"].sum().to_numpy()
    np.testing.assert_array_equal(kept, np.minimum(3, live.groupby(log["batch"]).sum().to_numpy()))
    assert kept.sum() > 0 and (live.sum() > kept.sum() or kept.max() == 3)
    assert rows["rows"] == expected_forward_rows(log)  # only the kept groups' rollouts reach the backward


@pytest.mark.slow
@pytest.mark.parametrize("terms", [["anchor"], ["uncertainty", "momentum"]])
def test_energy_ablations_end_to_end(tmp_path, terms):
    trainer = make_trainer(tmp_path, "lze", gradient_accumulation_steps=4, max_steps=1, energy_terms=terms)
    trainer.train()
    table = trainer.prompt_table(include_prompts=False)
    p, p0, energy = table["last_pass_rate"], table["initial_pass_rate"], table["last_energy"]
    if terms == ["anchor"]:
        np.testing.assert_allclose(energy, np.maximum(1 - p0, 0.05))
        log = trainer.selection_log.to_pandas()
        dead = (log["pass_rate"] == 0) | (log["pass_rate"] == 1)
        assert (log.loc[dead, "energy"] > 0).all()  # without the uncertainty term dead groups compete
    else:
        # every prompt was observed once: no momentum yet, and no anchor, whatever the initial pass rate
        assert (table["num_observations"] == 1).all() and ((p > 0) & (p < 1)).any()
        np.testing.assert_allclose(energy, 4 * p * (1 - p))


def test_a_selector_added_outside_the_package_brings_its_own_settings(tmp_path):
    # registering a selector (and a config subclass with its settings) is all it takes: it validates its settings
    from dataclasses import dataclass

    from lze_trl import LZEGRPOConfig
    from lze_trl.method.checks import check_setting
    from lze_trl.method.selectors import register_selector

    @dataclass
    class KeepFirstConfig(LZEGRPOConfig):
        keep: int = 1

    class KeepFirst(Selector):
        name = "keep_first_test"

        @classmethod
        def check_args(cls, args):
            if args.selector == cls.name:
                check_setting(args.keep >= 1, "keep", args.keep, "use an integer >= 1.")

        def select(self, batch):
            weights = np.zeros(batch.num_groups)
            weights[: self.args.keep] = 1.0
            return weights

    register_selector(KeepFirst)
    try:
        base = dict(output_dir=str(tmp_path), report_to="none", use_cpu=True, selector="keep_first_test")
        with pytest.raises(ValueError, match=r"keep=0 is invalid: use an integer >= 1"):
            KeepFirstConfig(**base, keep=0)
        args = KeepFirstConfig(**base, keep=2)
        np.testing.assert_array_equal(get_selector(args.selector)(args).select(batch([0.5] * 4)), [1, 1, 0, 0])
    finally:
        SELECTORS.pop("keep_first_test")
