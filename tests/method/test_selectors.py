"""The paper's peers and controls as selectors (`benchmarks/peers`, registered from outside the package): their
decisions on hand-built batches, then short trainer runs."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from datasets import IterableDataset
from testing_utils import (
    SUPPORT,
    count_grad_rows,
    expected_forward_rows,
    logged,
    lze_args,
    make_trainer,
    prompt_dataset,
    run_torchrun,
)

from benchmarks.peers.dapo import DAPOSelector
from benchmarks.peers.reinforce_rej import ReinforceRejSelector
from benchmarks.peers.uniform import UniformSelector
from lze_trl.method.prompt_state import PromptState
from lze_trl.method.selection import group_pass_rates, live_groups
from lze_trl.method.selectors import SELECTORS, GroupBatch, Selector, get_selector
from lze_trl.method.selectors.builtin import UniformLiveSelector  # the control of LZE's ranking, built in


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
def test_registry_has_the_peers():
    names = {"none", "lze", "uniform", "uniform_live", "dapo", "reinforce_rej"}
    assert names <= set(SELECTORS)
    assert get_selector("dapo") is DAPOSelector
    with pytest.raises(ValueError, match="selector='raft' is invalid"):
        get_selector("raft")


def test_uniform_keeps_the_quota_drawn_over_all_groups():
    p = [0.0, 1.0, 0.5, 0.25, 0.0, 0.75, 1.0, 0.5, 0.0, 0.25]  # 6 dead groups of 10
    selector = UniformSelector(settings())
    counts = np.zeros(10)
    for seed in range(2000):
        weights = selector.select(batch(p, seed=seed))
        assert set(np.unique(weights)) <= {0.0, 1.0} and weights.sum() == 4  # int(10 * 0.4)
        counts += weights
    # uniform over all groups, dead ones included: each kept 40% of the time
    np.testing.assert_allclose(counts / 2000, 0.4, atol=0.05)
    # the same generator (the same generation index on every process) takes the same decision
    np.testing.assert_array_equal(selector.select(batch(p, seed=7)), selector.select(batch(p, seed=7)))
    assert not UniformSelector.needs_pass_rates
    assert UniformSelector(settings(selection_ratio=0.05)).select(batch(p)).sum() == 1


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


def test_dapo_keeps_the_live_groups():
    rewards = [
        [1, 1, 1, 1],  # all correct
        [0, 0, 0, 0],  # all wrong
        [1, 0, 1, 0],  # informative
        [0.1 + 0.2, 0.3, 0.3, 0.3],  # constant non-binary reward with float noise
        [0.3, 0.3, 0.3, 0.31],  # a small but real spread
        [np.nan, 1, np.nan, np.nan],  # a single scorable rollout
        [np.nan, 1, 0, np.nan],
    ]
    weights = DAPOSelector(settings()).select(batch(rewards=rewards))
    np.testing.assert_array_equal(weights, [0, 0, 1, 0, 1, 0, 1])


def plan(selector, rows, ids=None, state=None, epoch=0):
    rows = np.asarray(rows)
    return list(selector.plan_epoch(epoch, rows, rows if ids is None else np.asarray(ids), state or PromptState()))


def test_reinforce_rej_rejects_extreme_groups_for_good():
    selector = ReinforceRejSelector(settings())
    assert selector.plans_rollouts
    weights = selector.select(batch([0.0, 1.0, 0.5, np.nan], ids=[0, 1, 2, 3]))
    np.testing.assert_array_equal(weights, [0, 0, 1, 0])  # unscorable: dropped, not rejected
    np.testing.assert_array_equal(selector.rejected, [0, 1])
    assert plan(selector, [4, 1, 3, 0, 2], epoch=1) == [4, 3, 2]
    # a rejected prompt that still reaches a batch is not updated on, even with a mixed group now
    weights = selector.select(batch([0.5, 1.0, 0.25], ids=[0, 2, 3]))
    np.testing.assert_array_equal(weights, [0, 0, 1])
    np.testing.assert_array_equal(selector.rejected, [0, 1, 2])
    assert selector.metrics() == {"rejected_prompts": 3.0}
    restored = ReinforceRejSelector(settings())
    restored.load_state_dict(selector.state_dict())
    assert plan(restored, [0, 1, 2, 3], epoch=2) == [3]
    # rows repeating a rejected prompt are rejected with it
    assert plan(restored, [5, 6, 7], ids=[0, 6, 2]) == [6]


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
def test_uniform_run_keeps_the_draw_of_each_generation(tmp_path):
    trainer = make_trainer(tmp_path, "uniform", gradient_accumulation_steps=4, max_steps=2)  # 8 groups per step
    rows = count_grad_rows(trainer.model)
    trainer.train()
    log = trainer.selection_log.to_pandas()
    for generation, groups in log.groupby("batch"):
        expected = np.zeros(8, dtype=bool)
        expected[np.random.default_rng([0, generation]).choice(8, size=3, replace=False)] = True
        np.testing.assert_array_equal(groups["selected"].to_numpy(), expected)
    assert rows["rows"] == 2 * 3 * 4  # 3 groups of 4 rollouts per step: the others never reach the backward


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
def test_dapo_run_filters_zero_variance_groups(tmp_path):
    trainer = make_trainer(tmp_path, "dapo", gradient_accumulation_steps=2, max_steps=2)
    trainer.train()
    log = trainer.selection_log.to_pandas()
    informative = (log["pass_rate"] > 0) & (log["pass_rate"] < 1)  # binary reward: std > 0 iff 0 < p < 1
    np.testing.assert_array_equal(log["weight"] > 0, informative)
    assert len(log) == 2 * 4


@pytest.mark.slow
def test_reinforce_rej_never_rolls_rejected_prompts_out_again(tmp_path):
    trainer = make_trainer(tmp_path, "reinforce_rej", dataset=prompt_dataset(8), max_steps=8)
    trainer.train()
    log = trainer.selection_log.to_pandas()
    extreme = (log["pass_rate"] == 0) | (log["pass_rate"] == 1)
    assert extreme.any()
    first_rejection = log[extreme].groupby("prompt_key")["batch"].min()
    for prompt, generation in first_rejection.items():
        later = log[(log["prompt_key"] == prompt) & (log["batch"] > generation)]
        assert later.empty, f"prompt {prompt} rolled out again after its rejection"
    np.testing.assert_array_equal(log["weight"] > 0, ~extreme)
    np.testing.assert_array_equal(trainer.lze.selector.rejected, sorted(first_rejection.index))
    assert trainer.lze_state_dict()[0]["selector.rejected"].tolist() == sorted(first_rejection.index)
    assert logged(trainer, "lze/rejected_prompts")[-1] == len(first_rejection)


@pytest.mark.slow
@pytest.mark.parametrize(
    "selector, overrides",
    [
        ("reinforce_rej", dict(max_steps=7)),
        ("uniform", dict(max_steps=6)),
    ],
)
def test_resume_is_exact(tmp_path, selector, overrides):
    def run(out, resume=None):
        trainer = make_trainer(
            out, selector, dataset=prompt_dataset(8), save_strategy="steps", save_steps=5, **overrides
        )
        if resume is not None:
            trainer.args.output_dir = str(out / "resumed")
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path)
    resumed = run(tmp_path, resume=str(tmp_path / "out" / "checkpoint-5"))
    keys = ("loss", "lze/selected_frac", "lze/energy_mean", "lze/rejected_prompts")
    after = [
        [{k: e[k] for k in keys if k in e} for e in t.state.log_history if e.get("step", 0) > 5]
        for t in (full, resumed)
    ]
    assert after[0] == after[1] and after[0]
    full_arrays, full_counters = full.lze_state_dict()
    arrays, counters = resumed.lze_state_dict()
    assert counters == full_counters and set(arrays) == set(full_arrays)
    for key in full_arrays:
        np.testing.assert_array_equal(arrays[key], full_arrays[key], err_msg=key)


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


def test_a_selector_that_plans_epochs_needs_a_map_style_dataset(tmp_path):
    iterable = IterableDataset.from_generator(lambda: iter([{"prompt": f"{i}+1="} for i in range(8)]))
    with pytest.raises(ValueError, match="selector='reinforce_rej' needs a map-style train dataset"):
        make_trainer(tmp_path, "reinforce_rej", dataset=iterable)


# ----------------------------------------------------------------------------------------------- two processes
@pytest.mark.slow
@pytest.mark.distributed
def test_two_processes_agree_on_a_selector_that_plans_epochs(tmp_path):
    result = run_torchrun(SUPPORT / "dist_selectors.py", tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    infos = [json.loads((tmp_path / "reinforce_rej" / f"rank{r}.json").read_text()) for r in range(2)]
    assert [i["world"] for i in infos] == [2, 2]
    assert infos[0]["counters"] == infos[1]["counters"]
    assert infos[0]["log"] == infos[1]["log"] and infos[0]["selection"] == infos[1]["selection"]
    assert infos[0]["grad_rows"] == infos[1]["grad_rows"] > 0
    ranks = [np.load(tmp_path / "reinforce_rej" / f"rank{r}.npz") for r in range(2)]
    assert set(ranks[0].files) == set(ranks[1].files)
    for key in ranks[0].files:
        np.testing.assert_array_equal(ranks[0][key], ranks[1][key], err_msg=key)
    assert infos[0]["grad_rows"] <= 6 * 6  # 6 steps: no process ever held more than its 6 rows (groups straddle)


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
