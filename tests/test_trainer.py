"""Integration tests of LZEGRPOTrainer on a tiny offline Qwen2 (CPU, seconds each)."""

import zlib

import numpy as np
import pytest
import torch
from conftest import count_grad_rows, lze_args, make_trainer, mixed_reward, prompt_dataset, prompt_number
from datasets import Dataset

from lze_trl import LZEGRPOTrainer
from lze_trl.tiny import char_tokenizer, tiny_qwen2


pytestmark = pytest.mark.slow


def text_reward(completions, **kwargs):
    return [float(zlib.crc32(c.encode()) % 3 == 0) for c in completions]


def train(tmp_path, selector, **overrides):
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    counter = count_grad_rows(model)
    args = lze_args(tmp_path, selector=selector, **overrides)
    trainer = LZEGRPOTrainer(
        model=model, reward_funcs=mixed_reward, args=args, train_dataset=prompt_dataset(), processing_class=tokenizer
    )
    trainer.train()
    return trainer, counter["rows"]


def logged(trainer, key):
    return [entry[key] for entry in trainer.state.log_history if key in entry]


def test_update_rows_drop_to_selection_ratio(tmp_path):
    common = dict(gradient_accumulation_steps=4, max_steps=3)  # generation batch: 8 groups of 4 rollouts
    lze, lze_rows = train(tmp_path / "lze", "lze", **common)
    _, full_rows = train(tmp_path / "none", "none", **common)
    assert full_rows == 3 * 4 * 8
    assert lze_rows <= 0.4 * full_rows  # int(8 * 0.4) = 3 of 8 groups at most, padding included
    assert lze_rows >= 0.25 * full_rows
    assert sum(logged(lze, "lze/update_rows")) <= lze_rows
    saved = logged(lze, "lze/update_tokens_saved_frac")
    assert all(0.5 < s < 1.0 for s in saved)


def test_step_with_nothing_selected_leaves_weights_unchanged(tmp_path):
    def always_right(completions, **kwargs):
        return [1.0] * len(completions)

    def run(selector):
        tokenizer = char_tokenizer()
        model = tiny_qwen2(tokenizer)
        before = [p.detach().clone() for p in model.parameters()]
        args = lze_args(tmp_path / selector, selector=selector, max_steps=2, weight_decay=0.1, learning_rate=1e-2)
        trainer = LZEGRPOTrainer(
            model=model,
            reward_funcs=always_right,
            args=args,
            train_dataset=prompt_dataset(),
            processing_class=tokenizer,
        )
        trainer.train()
        return trainer, before

    lze, before = run("lze")
    assert logged(lze, "lze/selected_frac") == [0.0, 0.0]
    assert logged(lze, "lze/dead_frac") == [1.0, 1.0]
    for a, b in zip(before, lze.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # Plain GRPO on the same dead batches does move the weights (AdamW weight decay on zero gradients).
    grpo, before = run("none")
    assert any(not torch.equal(a, b) for a, b in zip(before, grpo.model.parameters()))


def test_evaluation_neither_selects_nor_touches_state(tmp_path):
    tokenizer = char_tokenizer()
    args = lze_args(tmp_path, max_steps=1, per_device_eval_batch_size=8, eval_strategy="no")
    trainer = LZEGRPOTrainer(
        model=tiny_qwen2(tokenizer),
        reward_funcs=mixed_reward,
        args=args,
        train_dataset=prompt_dataset(),
        eval_dataset=prompt_dataset(8),
        processing_class=tokenizer,
    )
    trainer.train()
    arrays, counters = trainer.lze_state()
    metrics = trainer.evaluate()
    assert "eval_loss" in metrics and not any("lze" in k for k in metrics)
    arrays_after, counters_after = trainer.lze_state()
    assert counters == counters_after
    for key in arrays:
        np.testing.assert_array_equal(arrays[key], arrays_after[key])


def test_none_and_nan_rewards_neither_crash_nor_poison_state(tmp_path):
    def patchy(prompts, completions, **kwargs):
        out = []
        for c, pid in zip(completions, map(prompt_number, prompts)):
            if pid % 4 == 0:
                out.append(None)  # a prompt with no scorable rollout
            elif zlib.crc32(c.encode()) % 5 == 0:
                out.append(float("nan"))
            else:
                out.append(float(zlib.crc32(c.encode()) % 2))
        return out

    tokenizer = char_tokenizer()
    trainer = LZEGRPOTrainer(
        model=tiny_qwen2(tokenizer),
        reward_funcs=patchy,
        args=lze_args(tmp_path, max_steps=4),
        train_dataset=prompt_dataset(),
        processing_class=tokenizer,
    )
    trainer.train()
    state = trainer.scorer.state_dict()
    assert len(trainer.scorer) > 0
    assert np.isfinite(state["ema_pass_rate"]).all() and np.isfinite(state["initial_pass_rate"]).all()
    observed = trainer.scorer.index.sorted_ids
    assert not (observed % 4 == 0).any()  # unscorable prompts were never scored
    assert all(np.isfinite(v) for v in logged(trainer, "loss"))


def test_bad_inputs_fail_early_with_the_fix(tmp_path):
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    with pytest.raises(ValueError, match="correctness_reward='accuracy'.*mixed_reward"):
        LZEGRPOTrainer(
            model=model,
            reward_funcs=mixed_reward,
            args=lze_args(tmp_path, correctness_reward="accuracy"),
            train_dataset=prompt_dataset(),
            processing_class=tokenizer,
        )
    with pytest.raises(ValueError, match="no `prompt` column.*rename_column"):
        LZEGRPOTrainer(
            model=model,
            reward_funcs=mixed_reward,
            args=lze_args(tmp_path),
            train_dataset=Dataset.from_dict({"question": ["1+1="]}),
            processing_class=tokenizer,
        )
    with pytest.raises(ValueError, match="prune_solved=True needs a map-style"):
        LZEGRPOTrainer(
            model=model,
            reward_funcs=mixed_reward,
            args=lze_args(tmp_path, prune_solved=True),
            train_dataset=prompt_dataset().to_iterable_dataset(),
            processing_class=tokenizer,
        )


def test_correctness_reward_picks_the_reward_function(tmp_path):
    def never(completions, **kwargs):
        return [0.0] * len(completions)

    tokenizer = char_tokenizer()
    trainer = LZEGRPOTrainer(
        model=tiny_qwen2(tokenizer),
        reward_funcs=[never, mixed_reward],
        args=lze_args(tmp_path, max_steps=2, correctness_reward="mixed_reward"),
        train_dataset=prompt_dataset(),
        processing_class=tokenizer,
    )
    trainer.train()
    assert max(logged(trainer, "lze/pass_rate_mean")) > 0  # pass rates come from mixed_reward, not `never`


def test_iterable_dataset_keys_state_by_content_hash(tmp_path):
    from lze_trl.prompt_ids import content_hash

    tokenizer = char_tokenizer()
    dataset = prompt_dataset()
    trainer = LZEGRPOTrainer(
        model=tiny_qwen2(tokenizer),
        reward_funcs=text_reward,
        args=lze_args(tmp_path, max_steps=2),
        train_dataset=dataset.to_iterable_dataset(),
        processing_class=tokenizer,
    )
    trainer.train()
    hashes = {content_hash(p) for p in dataset["prompt"]}
    assert len(trainer.scorer) > 0 and set(trainer.scorer.index.sorted_ids.tolist()) <= hashes


def test_lora_run_updates_only_adapters(tmp_path):
    from peft import LoraConfig

    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    base_before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = LZEGRPOTrainer(
        model=model,
        reward_funcs=mixed_reward,
        args=lze_args(tmp_path, max_steps=3, learning_rate=1e-2, gradient_accumulation_steps=2),
        train_dataset=prompt_dataset(),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    trainer.train()
    params = dict(trainer.model.named_parameters())
    lora = {n: p for n, p in params.items() if "lora_B" in n}
    assert lora and any(p.abs().sum() > 0 for p in lora.values())  # lora_B starts at zero
    base_after = {
        n.removeprefix("base_model.model.").replace(".base_layer", ""): p
        for n, p in params.items()
        if "lora_" not in n
    }
    assert base_after.keys() == base_before.keys()
    for name, before in base_before.items():
        torch.testing.assert_close(base_after[name], before, rtol=0, atol=0)
    assert logged(trainer, "lze/selected_frac")


def test_prompt_table_and_bounded_selection_log(tmp_path):
    import pandas as pd

    trainer = make_trainer(
        tmp_path, reward=mixed_reward, max_steps=4, save_strategy="steps", save_steps=2, selection_log_max_rows=5
    )
    trainer.train()
    table = trainer.prompt_table()
    assert len(table) == len(trainer.scorer) == 8  # 4 steps x 2 groups, all different prompts in epoch 0
    assert {"prompt_id", "prompt", "ema_pass_rate", "last_energy", "num_selected"} <= set(table.columns)
    assert table["prompt"].tolist() == [prompt_dataset()["prompt"][i] for i in table["prompt_id"]]
    assert table["num_selected"].sum() == round(sum(logged(trainer, "lze/selected_frac")) * 2)
    log = trainer.selection_log.to_pandas()
    assert len(log) <= 5 and log["generation"].min() > 0  # oldest batches dropped
    for folder in (tmp_path / "out" / "checkpoint-2", tmp_path / "out"):
        saved = pd.read_parquet(folder / "lze_prompts.parquet")
        assert len(saved) > 0 and (folder / "lze_selection_log.parquet").exists()


def test_skipped_update_keeps_the_generation_pace(tmp_path):
    calls = []

    def always_right(completions, **kwargs):
        calls.append(len(completions))
        return [1.0] * len(completions)

    trainer = make_trainer(
        tmp_path, reward=always_right, max_steps=2, gradient_accumulation_steps=2
    )  # 2 micro-steps per generation batch
    trainer.train()
    # one generation (and reward call) per optimizer step, although every micro-step was skipped
    assert calls == [16, 16]
    assert trainer._step == 4
