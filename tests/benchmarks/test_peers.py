"""The peers registered from outside the package (`benchmarks/peers/`): `"softmax"` and `"prefilter"` read their
settings from `selector_kwargs`, the prefilter judges its prompts before training (`benchmarks.peers.prepare`), and
the benchmark harness's run specs map a peer's own keys into `selector_kwargs`."""

import json
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
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
from lze_trl.method.prompt_state import PromptState
from lze_trl.method.selection import group_pass_rates, live_groups
from lze_trl.method.selectors import SELECTORS, GroupBatch, get_selector


def settings(selector="softmax", **kwargs):
    """The config fields a peer reads: its name, its `selector_kwargs` and the generation batch's shape."""
    return SimpleNamespace(
        selector=selector, selector_kwargs=kwargs or None, generation_batch_size=8, num_generations=4
    )


def batch(pass_rates, G=4, ema=None):
    """Groups with the given pass rates (binary rewards); the EMA is the pass rate unless given."""
    p = np.asarray(pass_rates, dtype=np.float64)
    rewards = np.array([[float(j < round(x * G)) if np.isfinite(x) else np.nan for j in range(G)] for x in p])
    p = group_pass_rates(rewards, G, 0.5)
    return GroupBatch(
        prompt_keys=np.arange(len(p)),
        pass_rates=p,
        rewards=rewards,
        energies=np.zeros(len(p)),
        eligible=live_groups(p, rewards, rewards),
        ema_pass_rates=p if ema is None else np.asarray(ema, dtype=np.float64),
        rng=np.random.default_rng(0),
    )


def plan(selector, rows, state=None, epoch=0):
    rows = np.asarray(rows)
    return list(selector.plan_epoch(epoch, rows, rows, state or PromptState()))


# ----------------------------------------------------------------------------------------------- registration
def test_the_peers_register_from_outside_the_package():
    assert get_selector("softmax") is SoftmaxSelector and get_selector("prefilter") is PrefilterSelector
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
    selectors = ["grpo", "prefilter", "softmax:temperature=0.3"]
    argv = ["train", "--tiny", "--seeds", "0", "--selectors", *selectors, "--output-dir", str(out)]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 0
    result = json.loads((out / "seed_0" / "demo_results.json").read_text())
    assert list(result["methods"]) == selectors
    softmax = result["methods"]["softmax:temperature=0.3"]
    assert softmax["overrides"] == {"selector": "softmax", "selector_kwargs": {"temperature": 0.3}}
    assert all(row["lze/selected_frac"] == 1.0 for row in softmax["steps"])  # soft weights: every group kept
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
