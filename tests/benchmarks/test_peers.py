"""The peers and controls of `benchmarks/peers/`: `"uniform"` and `"dapo"`, selectors registered from outside the
package; `"softmax"` and `"prefilter"`, which read their settings from `selector_kwargs` (the prefilter judges its
prompts before training, `benchmarks.peers.prepare`); Reinforce-Rej, the package's own settings (forward pruning after
one dead group with no exploration, and DAPO's filter); and the benchmark harness's run specs of them."""

import json
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from datasets import IterableDataset
from testing_utils import (
    SUPPORT,
    count_grad_rows,
    logged,
    make_trainer,
    prompt_dataset,
    prompt_number,
    run_torchrun,
)

import benchmarks.peers.judge as judge
from benchmarks.harness.specs import PeerTrainer, parse_method
from benchmarks.peers import PEERS, PrefilterSelector, SoftmaxSelector, needs_preparation, prepare
from benchmarks.peers.config import PeerConfig
from benchmarks.peers.dapo import DAPOSelector
from benchmarks.peers.reinforce_rej import SETTINGS as REINFORCE_REJ
from benchmarks.peers.uniform import UniformSelector
from lze_trl import LZEGRPOConfig
from lze_trl.method.prompt_state import PromptState
from lze_trl.method.run import LZERun
from lze_trl.method.selection import group_pass_rates, live_groups
from lze_trl.method.selectors import SELECTORS, GroupBatch, get_selector
from lze_trl.method.settings import LZESettings


def settings(selector="softmax", **kwargs):
    """The config fields a peer reads: its name, its `selector_kwargs` and the generation batch's shape."""
    return SimpleNamespace(
        selector=selector, selector_kwargs=kwargs or None, generation_batch_size=8, num_generations=4
    )


def batch(pass_rates=None, G=4, ema=None, rewards=None, seed=0):
    """Groups with the given pass rates (binary rewards), or with the given rewards (pass rates at 0.5); the EMA is
    the pass rate unless given."""
    if rewards is None:
        p = np.asarray(pass_rates, dtype=np.float64)
        rewards = np.array([[float(j < round(x * G)) if np.isfinite(x) else np.nan for j in range(G)] for x in p])
    rewards = np.asarray(rewards, dtype=np.float64)
    p = group_pass_rates(rewards, rewards.shape[1], 0.5)
    return GroupBatch(
        prompt_keys=np.arange(len(p)),
        pass_rates=p,
        rewards=rewards,
        energies=np.zeros(len(p)),
        live=live_groups(p, rewards, rewards),
        ema_pass_rates=p if ema is None else np.asarray(ema, dtype=np.float64),
        rng=np.random.default_rng(seed),
    )


def plan(selector, rows, state=None, epoch=0):
    rows = np.asarray(rows)
    return list(selector.plan_epoch(epoch, rows, rows, state or PromptState()))


# ----------------------------------------------------------------------------------------------- registration
def test_the_peers_register_from_outside_the_package():
    assert get_selector("softmax") is SoftmaxSelector and get_selector("prefilter") is PrefilterSelector
    assert get_selector("dapo") is DAPOSelector and get_selector("uniform") is UniformSelector
    assert "reinforce_rej" not in SELECTORS  # the package's settings, not a selector (see below)
    assert set(PEERS) == {"softmax", "prefilter"} <= set(SELECTORS)
    modules = {SoftmaxSelector.__module__, PrefilterSelector.__module__}
    assert modules == {"benchmarks.peers.softmax", "benchmarks.peers.prefilter"}
    assert needs_preparation("prefilter") and not needs_preparation("softmax") and not needs_preparation("lze")


def test_the_peers_read_and_check_their_selector_kwargs(tmp_path):
    base = dict(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    args = PeerConfig(**base, selector="softmax", selector_kwargs={"temperature": 0.3, "allocate_rollouts": True})
    selector = get_selector(args.selector)(args)
    assert selector.temperature == 0.3 and selector.plans_rollouts
    defaults = get_selector("softmax")(PeerConfig(**base, selector="softmax"))
    assert defaults.temperature == 0.2 and not defaults.plans_rollouts
    args = PeerConfig(**base, selector="prefilter", selector_kwargs='{"mode": "remove_all_wrong"}')  # CLI / YAML
    assert get_selector("prefilter")(args).mode == "remove_all_wrong"
    assert PrefilterSelector(PeerConfig(**base, selector="prefilter")).mode == "remove_both"
    bad = [
        (
            "softmax",
            {"temperature": 0},
            r"selector_kwargs\['temperature'\]=0 is invalid: use a finite temperature > 0",
        ),
        ("softmax", {"temperature": float("nan")}, r"selector_kwargs\['temperature'\]=nan is invalid"),
        ("softmax", {"allocate_rollouts": "yes"}, r"selector_kwargs\['allocate_rollouts'\]='yes' is invalid"),
        ("softmax", {"tau": 0.2}, r"selector='softmax' takes the keys \['allocate_rollouts', 'temperature'\]"),
        ("prefilter", {"mode": "remove_some"}, r"selector_kwargs\['mode'\]='remove_some' is invalid: use one of"),
        ("prefilter", {"cache_dir": 3}, r"selector_kwargs\['cache_dir'\]=3 is invalid"),
    ]
    for name, kwargs, message in bad:
        with pytest.raises(ValueError, match=message):
            PeerConfig(**base, selector=name, selector_kwargs=kwargs)
    # the kwargs belong to the selector that runs: another one's keys are not checked by a peer
    assert PeerConfig(**base, selector="lze", selector_kwargs={"tau": 0}).selector_kwargs == {"tau": 0}


def test_run_specs_map_a_peers_own_keys_into_selector_kwargs():
    spec = parse_method("softmax:temperature=0.3")
    assert spec.name == "softmax:temperature=0.3" and spec.trainer_cls is None
    assert spec.overrides == {"selector": "softmax", "selector_kwargs": {"temperature": 0.3}}
    # the config fields they had in the package, as BENCHMARKS.md's commands spell them, and config fields beside
    spec = parse_method("softmax:softmax_allocate_rollouts=true,selection_ratio=0.5")
    assert spec.overrides == {
        "selector": "softmax",
        "selection_ratio": 0.5,
        "selector_kwargs": {"allocate_rollouts": True},
    }
    assert parse_method("softmax").overrides == {"selector": "softmax"}
    prefilter = parse_method("prefilter:mode=remove_all_wrong,cache_dir=/tmp/judged")
    assert prefilter.overrides["selector_kwargs"] == {"mode": "remove_all_wrong", "cache_dir": "/tmp/judged"}
    assert prefilter.trainer_cls is PeerTrainer and parse_method("prefilter").trainer_cls is PeerTrainer
    assert parse_method("prefilter:prefilter_mode=remove_both").overrides["selector_kwargs"] == {"mode": "remove_both"}
    assert parse_method("lze").trainer_cls is None
    with pytest.raises(ValueError, match="softmax:temperature='hot': expected a float"):
        parse_method("softmax:temperature=hot")
    with pytest.raises(ValueError, match="not an LZEGRPOConfig field"):
        parse_method("softmax:tau=0.3")


# ----------------------------------------------------------------------------------------------- uniform, dapo
def test_uniform_keeps_the_quota_drawn_over_all_groups():
    p = [0.0, 1.0, 0.5, 0.25, 0.0, 0.75, 1.0, 0.5, 0.0, 0.25]  # 6 dead groups of 10
    selector = UniformSelector(SimpleNamespace(selection_ratio=0.4))
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
    assert UniformSelector(SimpleNamespace(selection_ratio=0.05)).select(batch(p)).sum() == 1


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
    weights = DAPOSelector(SimpleNamespace()).select(batch(rewards=rewards))
    np.testing.assert_array_equal(weights, [0, 0, 1, 0, 1, 0, 1])


# ----------------------------------------------------------------------------------------------- reinforce_rej
def reinforce_rej_run(num_prompts=8, G=4):
    """An `LZERun` with Reinforce-Rej's settings over `num_prompts` prompts (keys 0, 1, ...), one row each."""
    args = LZESettings(**REINFORCE_REJ)
    args.num_generations, args.seed = G, 0
    return LZERun(args, G, np.arange(num_prompts))


def decide(run, keys, rewards, step=0):
    """The run's decision on a generation batch of `keys`' groups with these (correctness = total) rewards."""
    rewards = np.asarray(rewards, dtype=np.float64)
    return run.decide_batch(np.asarray(keys), rewards[..., None], rewards, step)


def test_reinforce_rej_is_pruning_after_one_dead_group_and_the_live_filter(tmp_path):
    assert parse_method("reinforce_rej").overrides == REINFORCE_REJ  # the harness's arm keeps its name
    assert parse_method("reinforce_rej").trainer_cls is None
    assert parse_method("reinforce_rej:prune_explore_fraction=0.1").overrides["prune_explore_fraction"] == 0.1
    config = LZEGRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, **REINFORCE_REJ)  # valid settings
    assert config.prune_solved_after == config.prune_unsolved_after == 1 and config.prune_explore_fraction == 0
    run = reinforce_rej_run()
    assert run.plans_rollouts and run.plan_epoch(0, np.arange(8)).tolist() == list(range(8))  # nothing seen yet
    decision = decide(run, [0, 1, 2, 3], [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0], [np.nan] * 4])
    np.testing.assert_array_equal(decision.weights, [0, 0, 1, 0])  # only the live group is updated on
    assert decision.metrics["lze/pruned_prompts"] == 2  # the dead ones are rejected; unscorable: not rejected
    # rejected for good: never rolled out again, whatever the epoch's order (no exploration)
    for epoch in range(1, 30):
        order = np.random.default_rng(epoch).permutation(8)
        assert run.plan_epoch(epoch, order).tolist() == [i for i in order if i not in (0, 1)]
    assert run.pruner.num_explored == 0 and run.pruner.skipped.tolist() == [1, 1]
    # a prompt live first and dead later is rejected from then on
    decide(run, [2, 4, 5, 6], [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]], step=1)
    assert run.plan_epoch(30, np.arange(8)).tolist() == [3, 4, 5, 6, 7]
    # the rejected prompts are in the checkpointed state: a resumed run rolls out the same prompts
    restored = reinforce_rej_run()
    restored.load_state_dict(run.state_dict())
    assert restored.plan_epoch(31, np.arange(8)[::-1]).tolist() == [7, 6, 5, 4, 3]


def test_reinforce_rej_where_pruning_differs_from_its_old_selector():
    # Pruning reads the pass rate, where the old selector read liveness: a non-binary group all below
    # pass_threshold whose rewards differ is live, so updated on, and its prompt is rejected all the same.
    run = reinforce_rej_run()
    decision = decide(run, [0, 1], [[0.3, 0.3, 0.3, 0.31], [0.3, 0.3, 0.3, 0.3]])
    np.testing.assert_array_equal(decision.weights, [1, 0])
    assert run.plan_epoch(1, np.arange(4)).tolist() == [2, 3]
    # a prompt with two groups in one batch is rejected when their mean pass rate is 0 or 1, not when one is dead
    run = reinforce_rej_run()
    decide(run, [0, 0, 1, 1], [[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    assert run.plan_epoch(1, np.arange(4)).tolist() == [0, 2, 3]
    # a rejected prompt that reaches a batch all the same (a duplicate row, or an epoch planned ahead) is updated on
    # when its group is live, and rolled out again from the next epoch
    run = reinforce_rej_run()
    decide(run, [0], [[0, 0, 0, 0]])
    np.testing.assert_array_equal(decide(run, [0], [[1, 0, 0, 0]], step=1).weights, [1])
    assert run.plan_epoch(1, np.arange(4)).tolist() == [0, 1, 2, 3]


# ----------------------------------------------------------------------------------------------- softmax
def test_softmax_weights_peak_at_half_and_average_one():
    selector = SoftmaxSelector(settings())
    p = np.array([0.5, 0.25, 0.75, 0.0, 1.0])
    weights = selector.select(batch(p))
    z = -np.abs(p - 0.5) / 0.2
    np.testing.assert_allclose(weights, 5 * np.exp(z) / np.exp(z).sum())
    assert weights.mean() == pytest.approx(1.0)
    assert weights[1] == pytest.approx(weights[2]) and weights[3] == pytest.approx(weights[4])
    assert weights[0] > weights[1] > weights[3] > 0
    sharp = SoftmaxSelector(settings(temperature=0.1)).select(batch(p))
    flat = SoftmaxSelector(settings(temperature=0.3)).select(batch(p))
    assert sharp[0] > weights[0] > flat[0]
    # the weights follow the per-prompt table's EMA (after this observation), not this group's pass rate
    weights = selector.select(batch([1.0, 0.5, np.nan], ema=[0.55, 0.5, np.nan]))
    z = -np.abs(np.array([0.55, 0.5]) - 0.5) / 0.2
    np.testing.assert_allclose(weights, [*(2 * np.exp(z) / np.exp(z).sum()), 0.0])  # unscorable: weight 0


def test_softmax_allocates_each_epochs_groups_in_proportion():
    off = SoftmaxSelector(settings())
    assert not off.plans_rollouts  # off unless allocate_rollouts
    selector = SoftmaxSelector(settings(allocate_rollouts=True))
    assert selector.plans_rollouts
    state = PromptState()
    assert plan(selector, np.arange(6), state=state) == list(range(6))  # nothing seen yet: one group each
    p = np.array([0.0, 0.5, 1.0, 0.375])
    state.record_pass_rates(np.arange(4), p, batch_index=0)
    order = plan(selector, [5, 3, 1, 0, 2, 4], state=state)
    z = -np.abs(p - 0.5) / 0.2
    share = 4 * np.exp(z) / np.exp(z).sum()  # the 4 prompts seen share 4 groups: 0.19, 2.35, 0.19, 1.26
    counts = np.bincount(order, minlength=6)
    np.testing.assert_array_equal(counts, [0, 3, 0, 1, 1, 1])  # floors 0, 2, 0, 1; the spare group to 2.35
    assert counts[:4].sum() == 4 and np.all(np.abs(counts[:4] - share) < 1)
    assert order == [5, 3, 1, 4, 1, 1]  # the epoch's pass over every prompt, then over those with 2 groups, ...
    assert selector.metrics()["softmax_groups_max"] == 3.0


# ----------------------------------------------------------------------------------------------- prefilter
@pytest.mark.parametrize(
    "mode, removed",
    [
        ("remove_all_wrong", [True, False, False, False, True]),
        ("remove_all_right", [False, True, False, False, False]),
        ("remove_both", [True, True, False, False, True]),
    ],
)
def test_prefilter_modes(mode, removed):
    selector = PrefilterSelector(settings("prefilter", mode=mode))
    with pytest.raises(RuntimeError, match=r"none were: call `benchmarks.peers.prepare\(trainer\)`"):
        plan(selector, np.arange(5))  # not judged: training it would silently be plain GRPO
    selector.judged(np.array([0.0, 1.0, 0.5, np.nan, 0.0]))  # unscorable prompts are kept
    np.testing.assert_array_equal(selector.removed(), removed)
    assert plan(selector, np.arange(5), epoch=3) == list(np.flatnonzero(~np.array(removed)))
    np.testing.assert_array_equal(selector.select(batch([0.0, 0.5])), [1, 1])
    assert selector.metrics() == {"prefilter_removed_prompts": float(sum(removed))}
    restored = PrefilterSelector(settings("prefilter", mode=mode))
    restored.load_state_dict(selector.state_dict())
    np.testing.assert_array_equal(restored.pass_rates, selector.pass_rates)


def test_prepare_judges_once_caches_and_reads_the_cache(tmp_path, monkeypatch):
    # `prepare` with a stand-in trainer: the judging and the collective are the trainer side's, replaced here
    calls = []

    def judge_pass_rates(trainer):
        calls.append(1)
        return np.array([0.0, 1.0, 0.5, np.nan, 0.25, 0.0])[: len(trainer.train_dataset)]

    everywhere = {"flag": True}
    key = {"value": "k" * 40}
    monkeypatch.setattr(judge, "judge_pass_rates", judge_pass_rates)
    monkeypatch.setattr(judge, "judge_key", lambda trainer: key["value"])
    monkeypatch.setattr(judge, "all_processes", lambda trainer, flag: flag and everywhere["flag"])

    def trainer(num_prompts=6, **kwargs):
        selector = PrefilterSelector(settings("prefilter", mode="remove_both", **kwargs))
        return SimpleNamespace(
            lze=SimpleNamespace(selector=selector),
            train_dataset=list(range(num_prompts)),
            args=SimpleNamespace(output_dir=str(tmp_path)),
            accelerator=SimpleNamespace(is_main_process=True),
        )

    first = trainer()
    prepare(first)
    assert len(calls) == 1 and not first.lze.selector.from_cache
    assert plan(first.lze.selector, np.arange(6)) == [2, 3, 4]
    assert (tmp_path / "lze_prefilter" / f"pass_rates-{'k' * 32}.npz").is_file()
    prepare(first)  # judged already: nothing to do
    assert len(calls) == 1
    second = trainer()
    prepare(second)
    assert len(calls) == 1 and second.lze.selector.from_cache  # read from the cache, not judged
    np.testing.assert_array_equal(second.lze.selector.pass_rates, first.lze.selector.pass_rates)
    everywhere["flag"] = False  # another process lacks the cache: every process judges again
    third = trainer()
    prepare(third)
    assert len(calls) == 2 and not third.lze.selector.from_cache
    everywhere["flag"] = True
    fourth = trainer(num_prompts=5)  # a cache of another dataset's length is not used
    prepare(fourth)
    assert len(calls) == 3 and not fourth.lze.selector.from_cache and len(fourth.lze.selector.pass_rates) == 5
    # fewer prompts left than a generation batch (2 prompts of 4 rollouts here): an error naming the setting
    with pytest.raises(ValueError, match=r"\['mode'\]='remove_both' leaves 0 of 2 prompts, fewer than one generation"):
        prepare(trainer(num_prompts=2))
    assert len(calls) == 4
    key["value"] = "other" * 8  # another model or dataset: another cache entry
    shared = tmp_path / "shared"
    prepare(trainer(cache_dir=str(shared)))
    assert len(calls) == 5 and (shared / f"pass_rates-{('other' * 8)[:32]}.npz").is_file()


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
def test_dapo_run_filters_zero_variance_groups(tmp_path):
    trainer = make_trainer(tmp_path, "dapo", gradient_accumulation_steps=2, max_steps=2)
    trainer.train()
    log = trainer.selection_log.to_pandas()
    informative = (log["pass_rate"] > 0) & (log["pass_rate"] < 1)  # binary reward: std > 0 iff 0 < p < 1
    np.testing.assert_array_equal(log["weight"] > 0, informative)
    assert len(log) == 2 * 4


@pytest.mark.slow
def test_reinforce_rej_never_rolls_rejected_prompts_out_again(tmp_path):
    trainer = make_trainer(tmp_path, dataset=prompt_dataset(8), max_steps=8, **REINFORCE_REJ)
    trainer.train()
    log = trainer.selection_log.to_pandas()
    extreme = (log["pass_rate"] == 0) | (log["pass_rate"] == 1)
    assert extreme.any()
    first_rejection = log[extreme].groupby("prompt_key")["batch"].min()
    for prompt, generation in first_rejection.items():
        later = log[(log["prompt_key"] == prompt) & (log["batch"] > generation)]
        assert later.empty, f"prompt {prompt} rolled out again after its rejection"
    np.testing.assert_array_equal(log["weight"] > 0, ~extreme)
    rejected = sorted(first_rejection.index)
    assert np.flatnonzero(trainer.lze.pruner.pruned(np.arange(8), trainer.lze.prompts)).tolist() == rejected
    assert trainer.lze.pruner.explored_scored.sum() == 0  # no rejected prompt was ever explored
    restored = LZERun(trainer.args, trainer.lze.num_generations, trainer.lze.dataset_keys)  # the checkpointed state
    restored.load_state_dict(trainer.lze_state_dict()[0])
    assert np.flatnonzero(restored.pruner.pruned(np.arange(8), restored.prompts)).tolist() == rejected
    assert logged(trainer, "lze/pruned_prompts")[-1] == len(first_rejection)


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [dict(REINFORCE_REJ, max_steps=7), dict(selector="uniform", max_steps=6)],
    ids=["reinforce_rej", "uniform"],
)
def test_resume_is_exact(tmp_path, overrides):
    def run(out, resume=None):
        trainer = make_trainer(out, dataset=prompt_dataset(8), save_strategy="steps", save_steps=5, **overrides)
        if resume is not None:
            trainer.args.output_dir = str(out / "resumed")
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path)
    resumed = run(tmp_path, resume=str(tmp_path / "out" / "checkpoint-5"))
    keys = ("loss", "lze/selected_frac", "lze/energy_mean", "lze/pruned_prompts")
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


@pytest.mark.parametrize(
    "overrides, message",
    [
        (REINFORCE_REJ, "prune_solved=True needs a map-style train dataset"),
        (
            dict(selector="softmax", selector_kwargs={"allocate_rollouts": True}, config_class=PeerConfig),
            "selector='softmax' needs a map-style train dataset",
        ),
    ],
    ids=["reinforce_rej", "softmax_allocating"],
)
def test_planned_epochs_need_a_map_style_dataset(tmp_path, overrides, message):
    iterable = IterableDataset.from_generator(lambda: iter([{"prompt": f"{i}+1="} for i in range(8)]))
    with pytest.raises(ValueError, match=message):
        make_trainer(tmp_path, dataset=iterable, **overrides)


@pytest.mark.slow
def test_softmax_run_weights_every_group(tmp_path):
    trainer = make_trainer(
        tmp_path,
        "softmax",
        gradient_accumulation_steps=4,
        max_steps=1,
        selector_kwargs={"temperature": 0.1},
        config_class=PeerConfig,
    )
    rows = count_grad_rows(trainer.model)
    trainer.train()
    log = trainer.selection_log.to_pandas()
    for _, groups in log.groupby("batch"):
        assert groups["weight"].mean() == pytest.approx(1.0)
        assert (groups["weight"] > 0).all()
        closest = np.abs(groups["pass_rate"] - 0.5)  # first observation of each prompt: the EMA is the pass rate
        assert groups["weight"].iloc[int(np.argmin(closest))] == pytest.approx(groups["weight"].max())
    assert rows["rows"] == 32  # soft weights: every row takes part in the update


@pytest.mark.slow
def test_softmax_allocation_rolls_prompts_out_as_often_as_their_counts(tmp_path):
    trainer = make_trainer(
        tmp_path,
        "softmax",
        dataset=prompt_dataset(8),
        max_steps=8,
        selector_kwargs={"allocate_rollouts": True},
        config_class=PeerConfig,
    )
    trainer.train()
    log = trainer.selection_log.to_pandas()
    per_epoch = len(log) // 2  # 8 groups per epoch, two epochs
    first, second = log.iloc[:per_epoch], log.iloc[per_epoch:]
    np.testing.assert_array_equal(np.bincount(first["prompt_key"], minlength=8), np.ones(8))
    counts = np.bincount(trainer.lze.position.plan, minlength=8)
    assert counts.sum() == 8 and counts.max() >= 2 and (counts == 0).any()
    np.testing.assert_array_equal(np.bincount(second["prompt_key"], minlength=8), counts)
    # Prompts always or never solved in the first epoch (mixed_reward: prompt 0 never, prompt 8 would be always)
    # are skipped; the ones nearest 50% get the spare groups.
    ema = trainer.lze.prompts.get(np.arange(8))["ema_pass_rate"]
    assert counts[np.argmin(np.abs(ema - 0.5))] == counts.max()
    assert logged(trainer, "lze/softmax_groups_max")[-1] == counts.max()


def by_prompt_reward(prompts, completions, **kwargs):
    """Pass rate fixed by the prompt: i % 3 == 0 always wrong, i % 3 == 1 always right, else by completion."""
    rewards = []
    for p, c in zip(prompts, completions):
        i = prompt_number(p) % 3
        rewards.append(0.0 if i == 0 else 1.0 if i == 1 else float(zlib.crc32(c.encode()) % 2))
    return rewards


def prefilter_trainer(folder, num_prompts=24, **kwargs):
    return make_trainer(
        folder,
        "prefilter",
        reward=by_prompt_reward,
        dataset=prompt_dataset(num_prompts),
        max_steps=kwargs.pop("max_steps", 2),
        selector_kwargs=kwargs,
        config_class=PeerConfig,
    )


@pytest.mark.slow
def test_prefilter_judges_once_caches_and_removes(tmp_path):
    cache = str(tmp_path / "cache")
    trainer = prefilter_trainer(tmp_path / "a", mode="remove_all_wrong", cache_dir=cache)
    prepare(trainer)
    trainer.train()
    p = trainer.lze.selector.pass_rates
    i = np.arange(24)
    assert not trainer.lze.selector.from_cache and len(list(Path(cache).iterdir())) == 1
    np.testing.assert_array_equal(p[i % 3 == 0], 0.0)  # judged prompt by prompt, in dataset order
    np.testing.assert_array_equal(p[i % 3 == 1], 1.0)
    log = trainer.selection_log.to_pandas()
    assert len(log) == 4 and not (log["prompt_key"] % 3 == 0).any()  # all-wrong prompts are never rolled out
    assert logged(trainer, "lze/prefilter_removed_prompts")[0] == 8
    # judging is not training: its rollouts leave the training logs alone
    assert trainer.state.global_step == 2 and len(logged(trainer, "lze/selected_frac")) == 2

    # another run on the same model and data reuses the judgement, whatever the mode
    again = prefilter_trainer(tmp_path / "b", mode="remove_both", cache_dir=cache, max_steps=1)
    calls = []
    original = again._generate
    again._generate = lambda prompts: calls.append(len(prompts)) or original(prompts)
    prepare(again)
    again.train()
    assert again.lze.selector.from_cache
    np.testing.assert_array_equal(again.lze.selector.pass_rates, p)
    assert len(calls) == 1  # the training step's generation only: nothing judged
    assert not again.selection_log.to_pandas()["prompt_key"].isin(np.flatnonzero(p % 1 == 0)).any()

    # a prefilter that leaves less than a generation batch fails before training, naming the setting
    dead = prefilter_trainer(tmp_path / "c", num_prompts=3, mode="remove_both", cache_dir=cache)
    with pytest.raises(ValueError, match=r"selector_kwargs\['mode'\]='remove_both' leaves [01] of 3 prompts"):
        prepare(dead)
    # and a prefilter never judged does not train as plain GRPO under its name
    unjudged = prefilter_trainer(tmp_path / "d", mode="remove_both", cache_dir=cache)
    with pytest.raises(RuntimeError, match="none were"):
        unjudged.train()


@pytest.mark.slow
def test_the_harness_trains_the_peers(tmp_path):
    from benchmarks.harness.cli import main

    out = tmp_path / "bench"
    selectors = ["grpo", "prefilter", "softmax:temperature=0.3", "reinforce_rej"]
    argv = ["train", "--tiny", "--seeds", "0", "--selectors", *selectors, "--output-dir", str(out)]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 0
    result = json.loads((out / "seed_0" / "demo_results.json").read_text())
    assert list(result["methods"]) == selectors
    softmax = result["methods"]["softmax:temperature=0.3"]
    assert softmax["overrides"] == {"selector": "softmax", "selector_kwargs": {"temperature": 0.3}}
    assert all(row["lze/selected_frac"] == 1.0 for row in softmax["steps"])  # soft weights: every group kept
    assert result["methods"]["reinforce_rej"]["overrides"] == REINFORCE_REJ  # the arm keeps its name
    prefilter = result["methods"]["prefilter"]
    methods = {m["name"]: m for m in result["config"]["methods"]}
    assert methods["prefilter"]["trainer_cls"] == "benchmarks.harness.specs.PeerTrainer"
    # judged before training: every training prompt rolled out once more, counted in its rollouts
    grpo = result["methods"]["grpo"]["summary"]
    config = result["config"]
    assert prefilter["summary"]["rollouts"] == grpo["rollouts"] + config["n_train"] * config["num_generations"]
    assert (out / "seed_0" / "runs" / "prefilter" / "lze_prefilter").is_dir()


# ----------------------------------------------------------------------------------------------- two processes
@pytest.mark.slow
@pytest.mark.distributed
def test_two_processes_prefilter_and_softmax_agree(tmp_path):
    result = run_torchrun(SUPPORT / "dist_peers.py", tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    for selector in ("prefilter", "softmax"):
        infos = [json.loads((tmp_path / selector / f"rank{r}.json").read_text()) for r in range(2)]
        assert [i["world"] for i in infos] == [2, 2]
        assert infos[0]["counters"] == infos[1]["counters"]
        assert infos[0]["log"] == infos[1]["log"] and infos[0]["selection"] == infos[1]["selection"]
        assert infos[0]["grad_rows"] == infos[1]["grad_rows"] > 0
        ranks = [np.load(tmp_path / selector / f"rank{r}.npz") for r in range(2)]
        assert set(ranks[0].files) == set(ranks[1].files)
        for key in ranks[0].files:
            np.testing.assert_array_equal(ranks[0][key], ranks[1][key], err_msg=f"{selector}: {key}")
        selection = infos[0]["selection"]
        if selector == "softmax":  # 8 prompts, 4 groups per generation batch: epochs of 2 steps
            counts = np.bincount(ranks[0]["position.plan"], minlength=8)
            assert counts.sum() == 8 and counts.max() >= 2
            last_epoch = [i for g, i in zip(selection["batch"], selection["prompt_key"]) if g >= 2]
            np.testing.assert_array_equal(np.bincount(last_epoch, minlength=8), counts)
        else:
            p = ranks[0]["selector.pass_rates"]
            i = np.arange(32)
            np.testing.assert_array_equal(p[i % 9 == 0], 0.0)  # the reward can never pass these
            np.testing.assert_array_equal(p[i % 9 == 8], 1.0)  # nor fail these
            assert not set(selection["prompt_key"]) & set(np.flatnonzero((p == 0) | (p == 1)).tolist())


@pytest.mark.slow
@pytest.mark.distributed
def test_two_processes_agree_on_reinforce_rej(tmp_path):
    result = run_torchrun(SUPPORT / "dist_peers.py", tmp_path, "reinforce_rej", timeout=300)
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
    selection = infos[0]["selection"]  # and a rejected prompt is never rolled out again, on either process
    dead = {}
    for generation, key, p in zip(selection["batch"], selection["prompt_key"], selection["pass_rate"]):
        assert key not in dead or generation == dead[key], f"prompt {key} rolled out again after its rejection"
        if p in (0.0, 1.0):
            dead.setdefault(key, generation)
