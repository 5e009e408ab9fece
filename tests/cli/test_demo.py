"""The CPU demo: cached warm start, accuracy evaluation, token/FLOP accounting, and a shortened end-to-end run."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from datasets import Dataset
from testing_utils import lze_args, mixed_reward, prompt_dataset
from transformers import GenerationConfig

from lze_examples.demo import (
    AccuracyCallback,
    DemoConfig,
    MeteredLZEGRPOTrainer,
    MethodSpec,
    RunMeter,
    WarmStartConfig,
    count_parameters,
    default_cache_dir,
    greedy_accuracy,
    load_warm_start,
    pass_rate_histogram,
    run_demo,
    sampled_pass_rates,
    train_warm_start,
)
from lze_examples.demo.summary import ratios, summarize
from lze_examples.demo.tables import format_table
from lze_examples.demo.training import recorded_lze_warnings
from lze_examples.tasks.arithmetic import CHARSET, arithmetic_reward
from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl.method.guards import LZEWarning


TINY_WARM = dict(hidden_size=16, num_layers=1, num_heads=2, num_examples=64, steps=3, batch_size=8)


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ----------------------------------------------------------------------------------------------- warm start
@pytest.mark.slow
def test_warm_start_is_cached_and_reloaded_identically(tmp_path):
    config = WarmStartConfig(**TINY_WARM)
    model, tokenizer, meta = load_warm_start(config, tmp_path)
    assert not meta["from_cache"]
    assert meta["path"] == str(tmp_path / config.cache_key())
    assert (tmp_path / config.cache_key() / "warmstart.json").is_file()

    again, _, meta_again = load_warm_start(config, tmp_path)
    assert meta_again["from_cache"] and meta_again["path"] == meta["path"]
    assert _same(_weights(model), _weights(again))
    # The cached model really was trained: it differs from the initialisation of the same seed.
    init = tiny_qwen2(tokenizer, hidden_size=16, num_layers=1, num_heads=2, max_position_embeddings=64, seed=0)
    assert not _same(_weights(init), _weights(again))
    assert again.generation_config.eos_token_id == tokenizer.eos_token_id


@pytest.mark.slow
def test_warm_start_is_deterministic():
    config = WarmStartConfig(**TINY_WARM)
    first, _ = train_warm_start(config)
    second, _ = train_warm_start(config)
    assert _same(_weights(first), _weights(second))


@pytest.mark.slow
def test_warm_start_cache_key_follows_the_config(tmp_path):
    a, b = WarmStartConfig(**TINY_WARM), WarmStartConfig(**{**TINY_WARM, "steps": 4})
    assert a.cache_key() == WarmStartConfig(**TINY_WARM).cache_key()
    assert a.cache_key() != b.cache_key()
    assert a.cache_key() != WarmStartConfig(**{**TINY_WARM, "levels": [0, 1]}).cache_key()
    model_a, _, meta_a = load_warm_start(a, tmp_path)
    model_b, _, meta_b = load_warm_start(b, tmp_path)
    assert not meta_b["from_cache"] and meta_a["path"] != meta_b["path"]
    assert not _same(_weights(model_a), _weights(model_b))


@pytest.mark.slow
def test_warm_start_trains_on_the_carry_dropped_answers():
    # The supervision with slips differs from the clean one, so do the cache key and the trained weights.
    clean, slips = WarmStartConfig(**TINY_WARM), WarmStartConfig(**{**TINY_WARM, "carry_drop_prob": 1.0})
    assert clean.cache_key() != slips.cache_key()
    model_clean, _ = train_warm_start(clean)
    model_slips, _ = train_warm_start(slips)
    assert not _same(_weights(model_clean), _weights(model_slips))


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LZE_TRL_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "warmstart"


# ----------------------------------------------------------------------------------------------- accuracy
class OracleModel(torch.nn.Module):
    """Stands in for a causal LM: answers prompts at even positions of the batch correctly, the others wrongly."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id)
        self.calls = []

    def generate(self, input_ids, attention_mask, **kwargs):
        self.calls.append(kwargs)
        assert not self.training, "evaluation must run in eval mode"
        prompts = self.tokenizer.batch_decode(input_ids, skip_special_tokens=True)
        rows = []
        for i, prompt in enumerate(prompts):
            answer = str(eval(prompt[:-1])) if i % 2 == 0 else "99999"
            rows.append(self.tokenizer(answer, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id])
        width = max(len(r) for r in rows)
        completions = [r + [self.tokenizer.pad_token_id] * (width - len(r)) for r in rows]
        return torch.cat([input_ids, torch.tensor(completions)], dim=1)


def test_greedy_accuracy_grades_with_the_verifier():
    tokenizer = char_tokenizer(CHARSET)
    data = Dataset.from_dict(
        {
            "prompt": ["1+2=", "12+30=", "7-9=", "(1+2)*3-4=", "5*6=", "40-3+2="],
            "answer": ["3", "42", "-2", "5", "30", "39"],
            "difficulty": [0, 1, 1, 7, 3, 4],
        }
    )
    model = OracleModel(tokenizer)
    model.train()
    result = greedy_accuracy(model, tokenizer, data, batch_size=4)  # batches [0..3], [4, 5]: rows 0, 2, 4 correct
    assert result["num_prompts"] == 6
    assert result["accuracy"] == pytest.approx(3 / 6)
    assert result["per_level"] == {0: 1.0, 1: 0.5, 3: 1.0, 4: 0.0, 7: 0.0}
    assert all(call["generation_config"].do_sample is False for call in model.calls)
    assert model.training  # mode restored


def _reference_completions(model, tokenizer, prompts, batch_size, num_samples=1, temperature=None, seed=0):
    """The demo's generation before it shared `lze-trl eval`'s: one plain `model.generate` per batch, in order."""
    kwargs = {"max_new_tokens": 8, "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
    if temperature is None:
        kwargs.update(do_sample=False)
    else:
        kwargs.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0, num_return_sequences=num_samples)
    completions = []
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(seed)
        for start in range(0, len(prompts), batch_size):
            batch = prompts[start : start + batch_size]
            enc = tokenizer(batch, padding=True, return_tensors="pt", add_special_tokens=False)
            out = model.generate(**enc, **kwargs)
            completions += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return completions


def test_accuracy_and_pass_rates_generate_like_plain_generate_calls():
    from lze_examples.demo.accuracy import _generate

    tokenizer = char_tokenizer(CHARSET)
    model = tiny_qwen2(tokenizer, hidden_size=32, num_layers=1, num_heads=2, max_position_embeddings=64, seed=3)
    model.eval()
    prompts = ["1+2=", "12+30=", "7-9=", "(1+2)*3-4=", "5*6=", "40-3+2=", "123+456=", "9="]
    greedy = _generate(model, tokenizer, prompts, max_new_tokens=8, batch_size=3)
    assert greedy == _reference_completions(model, tokenizer, prompts, batch_size=3)
    torch.manual_seed(7)
    state = torch.get_rng_state()
    sampled = _generate(model, tokenizer, prompts, max_new_tokens=8, batch_size=3, num_samples=4, temperature=1.0)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's RNG is left alone
    reference = _reference_completions(model, tokenizer, prompts, batch_size=3, num_samples=4, temperature=1.0)
    assert sampled == reference and len(set(sampled)) > len(prompts)  # really sampled, and the same samples
    data = Dataset.from_dict({"prompt": prompts, "answer": ["3"] * len(prompts)})
    rates = sampled_pass_rates(model, tokenizer, data, num_samples=4, batch_size=3)
    expected = [np.mean(arithmetic_reward(reference[4 * i : 4 * i + 4], ["3"] * 4)) for i in range(len(prompts))]
    assert rates.tolist() == pytest.approx(expected)


def test_pass_rate_histogram_counts_bins():
    hist = pass_rate_histogram(np.array([0.0, 0.0, 0.25, 0.5, 1.0, 1.0, 1.0, 0.75]), num_samples=4)
    assert hist["counts"] == [2, 1, 1, 1, 3]
    assert hist["never_solved_frac"] == pytest.approx(2 / 8)
    assert hist["always_solved_frac"] == pytest.approx(3 / 8)
    assert hist["learning_zone_frac"] == pytest.approx(3 / 8)


def test_accuracy_callback_records_at_start_every_n_steps_and_end():
    scores = iter(range(100))
    counter = {"flops": 0}
    callback = AccuracyCallback(lambda model: {"test": next(scores)}, eval_steps=2, counters=lambda: dict(counter))
    state = SimpleNamespace(global_step=0)
    callback.on_train_begin(None, state, None, model=None)
    for step in range(1, 6):
        state.global_step = step
        counter["flops"] = 10 * step
        callback.on_step_end(None, state, None, model=None)
    callback.on_train_end(None, state, None, model=None)
    assert [r["step"] for r in callback.records] == [0, 2, 4, 5]
    assert [r["test_accuracy"] for r in callback.records] == [0, 1, 2, 3]
    assert [r["flops"] for r in callback.records] == [0, 20, 40, 50]
    assert callback.records[0]["train_seconds"] == 0.0
    times = [r["train_seconds"] for r in callback.records]
    assert times == sorted(times)
    with pytest.raises(ValueError, match="eval_steps"):
        AccuracyCallback(lambda m: {}, eval_steps=0)


# ----------------------------------------------------------------------------------------------- accounting
def test_flops_of_a_hand_checked_run():
    meter = RunMeter(
        rollout_prompt_tokens=100, rollout_completion_tokens=50, update_prompt_tokens=40, update_completion_tokens=20
    )
    assert meter.rollout_processed_tokens == 150 and meter.update_processed_tokens == 60
    flops = meter.flops(num_params=1000)
    assert flops["generation_flops"] == 2 * 1000 * 150
    assert flops["update_flops"] == 6 * 1000 * 60
    assert flops["total_flops"] == 2 * 1000 * 150 + 6 * 1000 * 60


def test_count_parameters_counts_tied_embeddings_once(tiny):
    model, tokenizer = tiny
    total = sum(p.numel() for p in model.parameters())  # `parameters()` already yields a tied tensor once
    vocab, hidden = model.get_input_embeddings().weight.shape
    assert count_parameters(model) == total
    assert count_parameters(model, non_embedding=True) == total - vocab * hidden


@pytest.mark.slow
@pytest.mark.parametrize("selector", ["none", "lze"])
def test_metered_trainer_counts_the_rows_of_the_update(tmp_path, tiny, selector):
    model, tokenizer = tiny
    trainer = MeteredLZEGRPOTrainer(
        model=model,
        reward_funcs=mixed_reward,
        args=lze_args(tmp_path, selector=selector, max_steps=3, gradient_checkpointing=False, bf16=False),
        train_dataset=prompt_dataset(32),
        processing_class=tokenizer,
    )
    trainer.train()
    meter = trainer.meter
    logged = [e for e in trainer.state.log_history if "lze/update_tokens" in e]
    assert meter.generation_batches == 3 and meter.rollouts == 3 * 8
    # TRL's own count of rollout tokens (prompt + completion) is the meter's.
    assert trainer.state.num_input_tokens_seen == meter.rollout_processed_tokens
    # The trainer's loss-token count of the update is the completion tokens the meter saw entering the loss.
    assert meter.update_completion_tokens == sum(e["lze/update_tokens"] for e in logged)
    if selector == "none":
        assert (
            meter.update_processed_tokens == meter.rollout_processed_tokens
            and meter.update_forward_rows == meter.rollouts
        )
    else:
        assert meter.update_processed_tokens < meter.rollout_processed_tokens
    assert meter.selection_seconds > 0 and meter.rollout_seconds < meter.step_seconds


def _curve(accs: list[float], seconds_per_step: float, flops_per_step: float) -> list[dict]:
    return [
        {
            "step": 10 * i,
            "train_seconds": seconds_per_step * 10 * i,
            "train_cpu_seconds": seconds_per_step * 10 * i,
            "total_flops": flops_per_step * 10 * i,
            "test_accuracy": a,
            "ood_accuracy": 0.0,
            "train_accuracy": a,
        }
        for i, a in enumerate(accs)
    ]


def _run(accs, seconds_per_step, flops_per_step, update_tokens):
    totals = {
        "optimizer_steps": 10 * (len(accs) - 1),
        "generation_batches": 10 * (len(accs) - 1),
        "train_seconds": seconds_per_step * 10 * (len(accs) - 1),
        "train_cpu_seconds": seconds_per_step * 10 * (len(accs) - 1),
        "eval_seconds": 1.0,
        "rollout_seconds": 1.0,
        "step_seconds": 2.0,
        "selection_seconds": 0.001,
        "rollouts": 100,
        "rollout_completion_tokens": 500,
        "rollout_prompt_tokens": 1000,
        "update_processed_tokens": 3 * update_tokens,
        "update_completion_tokens": update_tokens,
        "update_forward_rows": 10,
        "generation_flops": 1.0,
        "update_flops": 2.0,
        "total_flops": flops_per_step * 10 * (len(accs) - 1),
    }
    return {"num_params": 10, "curve": _curve(accs, seconds_per_step, flops_per_step), "totals": totals}


def test_time_and_flops_to_the_baseline_target():
    baseline = _run([0.5, 0.55, 0.6, 0.62, 0.64], seconds_per_step=1.0, flops_per_step=8.0, update_tokens=1500)
    faster = _run([0.5, 0.6, 0.66, 0.62, 0.68], seconds_per_step=0.5, flops_per_step=4.0, update_tokens=450)
    base = summarize(baseline, baseline, target_window=1)
    row = summarize(faster, baseline, target_window=1)
    assert row["target_test_accuracy"] == pytest.approx(0.64) and row["target_test_informative"]
    assert row["reach_test_step"] == 20 and row["reach_test_seconds"] == pytest.approx(10.0)
    assert row["reach_test_flops"] == pytest.approx(80.0)
    assert base["reach_test_step"] == 40
    r = ratios(row, base)
    assert r["reach_test_seconds"] == pytest.approx(10.0 / 40.0)
    assert r["update_tokens_per_step"] == pytest.approx(450 / 1500)
    # Smoothed over 3 evaluations, the target is (0.6 + 0.62 + 0.64) / 3 = 0.62 and the faster run's trailing means
    # are 0.5, 0.55, 0.587, 0.627: it gets there at step 30.
    smooth = summarize(faster, baseline, target_window=3)
    assert smooth["target_test_accuracy"] == pytest.approx(0.62)
    assert smooth["reach_test_step"] == 30
    # 90% of the baseline's gain: 0.5 + 0.9 * (0.64 - 0.5) = 0.626, first reached at step 20 (the baseline: 40).
    assert row["target90_test_accuracy"] == pytest.approx(0.626)
    assert (row["reach90_test_step"], base["reach90_test_step"]) == (20, 40)
    # With 100 evaluated prompts, a 0.14 gain is more than the evaluation's noise (2 sqrt(0.25 / 100) = 0.1) but not
    # with 10 prompts (0.32): the target is then flagged uninformative.
    assert summarize(faster, {**baseline, "eval_sizes": {"test": 100}})["target_test_informative"]
    assert not summarize(faster, {**baseline, "eval_sizes": {"test": 10}})["target_test_informative"]
    never = summarize(_run([0.5, 0.5, 0.5, 0.5, 0.5], 0.5, 4.0, 450), baseline, target_window=1)
    assert never["reach_test_seconds"] is None and ratios(never, base)["reach_test_seconds"] is None


# ----------------------------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_demo_command_end_to_end(tmp_path, capsys, monkeypatch):
    from lze_examples.commands.demo import main

    out = tmp_path / "demo"
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert main(["--tiny", "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache")]) == 0
    printed = capsys.readouterr().out
    # The demo's own lines come first: it reports to no tracker and sets no WANDB_MODE (with "offline", importing
    # transformers prints "[INFO] Running in WANDB offline mode" before anything else).
    assert printed.startswith("lze-trl demo: ") and "WANDB_MODE" not in os.environ
    # the headline table comes last, one row per method
    headline = printed[printed.index("Headline (task carries") :]
    assert "in the learning zone" in headline and "rollouts to target" in headline
    assert all(f"\n{name} " in headline for name in ("grpo", "lze", "lze+prune"))
    assert "One seed is noisy" in headline and f"results go to {out}" in printed
    results = json.loads((out / "demo_results.json").read_text())
    assert list(results["methods"]) == ["grpo", "lze", "lze+prune"]
    assert results["baseline"] == "grpo"
    config = DemoConfig.tiny()
    for method in results["methods"].values():
        summary = method["summary"]
        assert summary["optimizer_steps"] == config.steps
        assert [r["step"] for r in method["curve"]] == list(range(config.steps + 1))
        generated = sum(row["lze/generated_rollouts"] for row in method["steps"] if "lze/generated_rollouts" in row)
        assert summary["rollouts"] == generated  # the rollouts TRL really generated, as the trainer logs them
        assert generated == config.steps * config.prompts_per_step * config.num_generations  # the steps refilled
        assert summary["total_flops"] == pytest.approx(summary["generation_flops"] + summary["update_flops"])
        assert summary["update_flops"] == pytest.approx(6 * summary["num_params"] * summary["update_processed_tokens"])
        # one word, one count: update tokens are the loss tokens, as the trainer's `lze/update_tokens` logs them
        logged = sum(row["lze/update_tokens"] for row in method["steps"] if "lze/update_tokens" in row)
        assert summary["update_tokens"] == summary["update_completion_tokens"] == logged
        for key in (
            "final_test_accuracy",
            "final_ood_accuracy",
            "train_seconds",
            "rollout_tokens",
            "reach_test_flops",
        ):
            assert key in summary
        assert set(method["ratios"]) >= {"update_tokens_per_step", "total_flops", "train_seconds"}
        assert set(method["final_accuracy_by_level"]) == {"test", "ood", "train"}
    grpo = results["methods"]["grpo"]["summary"]
    # plain GRPO updates on every rollout: its update tokens are the completion tokens it generated
    assert grpo["update_tokens"] == grpo["rollout_tokens"]
    assert grpo["update_processed_tokens"] == grpo["rollout_tokens"] + grpo["rollout_prompt_tokens"]
    assert "target" not in results  # no verdict against an issue's target inside the wheel
    assert sum(results["start"]["train_pass_rate_histogram"]["counts"]) == config.n_train
    # the starting accuracy names the test set it was measured on (the README's snippets grade other ones)
    test_split = f'make_dataset({config.n_test}, seed={config.data_seed}, split="test")'
    start_test = results["start"]["test_accuracy"]
    assert f"in-domain test {start_test:.3f} on {config.n_test} held-out prompts" in printed and test_split in printed
    assert results["machine"]["start"]["cpu_count"] >= 1
    for name in ("accuracy_vs_time", "accuracy_vs_flops", "distributions", "update_tokens"):
        path = results["figures"][name]
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert "in-domain test acc" in format_table(results)
    # the machine-readable summary (README: "demo_results.json")
    summary = results["summary"]
    hist = results["start"]["train_pass_rate_histogram"]
    assert summary["start"] == {
        "learning_zone_share": hist["learning_zone_frac"],
        "test_accuracy": results["start"]["test_accuracy"],
        "ood_accuracy": results["start"]["ood_accuracy"],
        "test_size": config.n_test,
        "ood_size": config.n_ood,
    }
    assert summary["task"] == "carries" and list(summary["methods"]) == ["grpo", "lze", "lze+prune"]
    for name, row in summary["methods"].items():
        full = results["methods"][name]["summary"]
        assert row["test_accuracy"] == full["final_test_accuracy"]
        assert row["ood_accuracy"] == full["final_ood_accuracy"]
        assert row["update_tokens_ratio"] == pytest.approx(full["update_tokens"] / grpo["update_tokens"])
        assert row["total_flops_ratio"] == pytest.approx(full["total_flops"] / grpo["total_flops"])
        assert row["generated_rollouts_ratio"] == pytest.approx(full["rollouts"] / grpo["rollouts"])
        log = pd.read_parquet(out / "runs" / name / "lze_selection_log.parquet")
        assert row["dead_share"] == pytest.approx(((log["pass_rate"] == 0) | (log["pass_rate"] == 1)).mean())
        assert row["utilisation"] == pytest.approx(full["update_tokens"] / full["rollout_tokens"])
        reached = full["reach_test_rollouts"]
        expected = None if reached is None else pytest.approx(reached / grpo["rollouts"])
        assert row["rollouts_to_grpo_final"] == expected
    assert summary["methods"]["grpo"]["update_tokens_ratio"] == 1.0
    assert summary["methods"]["grpo"]["rollouts_to_grpo_final"] is not None  # grpo reaches its own final accuracy


class CountingTrainer(MeteredLZEGRPOTrainer):
    instances = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        CountingTrainer.instances += 1


@pytest.mark.slow
def test_a_method_can_train_with_its_own_trainer_class(tmp_path):
    methods = [MethodSpec("grpo", {"selector": "none"}), MethodSpec("custom", {"selector": "lze"}, CountingTrainer)]
    config = DemoConfig.tiny(methods=methods, cache_dir=str(tmp_path / "cache"))
    results = run_demo(config, tmp_path / "out", figures=False)
    assert CountingTrainer.instances == 1
    assert results["config"]["methods"][1]["trainer_cls"].endswith("CountingTrainer")
    assert json.loads((tmp_path / "out" / "demo_results.json").read_text())["methods"]["custom"]["summary"]


def test_recorded_lze_warnings_keeps_what_the_guards_said_whatever_the_filters():
    with pytest.warns(UserWarning) as outside:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as the demo command and the bench silence library warnings
            with recorded_lze_warnings() as said:
                warnings.warn("replay degenerates", LZEWarning, stacklevel=2)
                warnings.warn("other library", UserWarning, stacklevel=2)
                warnings.warn("replay degenerates", LZEWarning, stacklevel=2)
                warnings.warn("buffer starved", LZEWarning, stacklevel=2)
            assert said == ["replay degenerates", "buffer starved"]
        with recorded_lze_warnings() as said:
            warnings.warn("not silenced", UserWarning, stacklevel=2)
    # re-issued under the caller's filters: silenced inside the `ignore` block, shown outside it
    assert said == [] and [str(w.message) for w in outside] == ["not silenced"]


@pytest.mark.slow
def test_a_run_that_degenerates_says_so_in_the_demo_results(tmp_path):
    # pass_threshold above every reward: no group is ever in the learning zone, which the dead-run guard says
    methods = [
        MethodSpec("grpo", {"selector": "none"}),
        MethodSpec("dead", {"selector": "lze", "pass_threshold": 5.0}),
    ]
    config = DemoConfig.tiny(methods=methods, cache_dir=str(tmp_path / "cache"), steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_demo(config, tmp_path / "out", figures=False)
    saved = json.loads((tmp_path / "out" / "demo_results.json").read_text())["methods"]
    (message,) = [m for m in saved["dead"]["warnings"] if "learning zone" in m]
    assert "no prompt group was in the learning zone" in message and "pass_threshold=5" in message
    assert any("This run trained no token" in m for m in saved["dead"]["warnings"])  # nothing selected: said
    assert "never at or above the threshold" in message
    # each run keeps what its own guards said (this tiny model's first groups are all dead at 0.5 too)
    assert all("pass_threshold=0.5" in m for m in saved["grpo"]["warnings"])


# ----------------------------------------------------------------------------------------------- the package
def test_the_demo_is_one_package_without_the_old_paths():
    # the harness moved out of the package (to benchmarks/), the deprecation shims are gone: nothing was released
    import importlib
    import importlib.util

    import lze_examples.demo

    for old in (
        "lze_trl.experiments",
        "lze_examples.demo.runner",
        "lze_examples.demo.bench",
        "lze_examples.demo._moved",
    ):
        assert importlib.util.find_spec(old) is None, old
    with pytest.raises(AttributeError):
        lze_examples.demo.aggregate  # noqa: B018
    # the shipped warm start is package data of `lze_examples.demo`
    assert (Path(lze_examples.demo.__file__).parent / "weights").is_dir()
    assert importlib.import_module("lze_examples.demo.warmstart").SHIPPED_DIR.parent.name == "demo"


def test_the_demo_names_import_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from lze_examples.demo import DemoConfig, MethodSpec, WarmStartConfig, run_demo  # noqa: F401
