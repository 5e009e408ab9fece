"""Integration tests of LZEGRPOTrainer on a tiny offline Qwen2 (CPU, seconds each)."""

import json
import os
import zlib

import numpy as np
import pytest
import torch
from datasets import Dataset
from testing_utils import (
    always_right,
    count_grad_rows,
    even_solved_reward,
    expected_forward_rows,
    logged,
    make_trainer,
    mixed_reward,
    prompt_dataset,
    prompt_number,
    text_reward,
)

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl.common.engines import apply_thread_policy
from lze_trl.method.checkpoint import STATE_FILE
from lze_trl.method.errors import LZEWarning


pytestmark = pytest.mark.slow


def train(tmp_path, selector, **overrides):
    model = tiny_qwen2(char_tokenizer())
    counter = count_grad_rows(model)
    trainer = make_trainer(tmp_path, selector, model=model, **overrides)
    trainer.train()
    return trainer, counter["rows"]


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


def test_step_with_nothing_selected_updates_as_grpo_on_the_same_dead_batch(tmp_path):
    def run(selector):
        model = tiny_qwen2(char_tokenizer())
        before = [p.detach().clone() for p in model.parameters()]
        rows = count_grad_rows(model)
        trainer = make_trainer(
            tmp_path / selector,
            selector,
            reward=always_right,
            model=model,
            max_steps=2,
            weight_decay=0.1,
            learning_rate=1e-2,
        )
        trainer.train()
        return trainer, before, rows["rows"]

    lze, before, lze_rows = run("lze")
    assert logged(lze, "lze/selected_frac") == [0.0, 0.0]
    # Each step's micro-step still runs, on one zero-weight padding row: what `expected_forward_rows` counts.
    assert lze_rows == expected_forward_rows(lze.selection_log.to_pandas()) == 2
    assert logged(lze, "lze/dead_frac") == [1.0, 1.0]
    assert logged(lze, "lze/update_tokens") == [0, 0]
    # The update ran on zero-weight rows only: a zero gradient, as plain GRPO's on the same all-dead batches, so the
    # optimizer moves the weights exactly as GRPO's does (AdamW's weight decay).
    grpo, _, _ = run("none")
    assert logged(lze, "grad_norm") == logged(grpo, "grad_norm") == [0.0, 0.0]
    for _a, b, c in zip(before, lze.model.parameters(), grpo.model.parameters()):
        torch.testing.assert_close(b, c, rtol=0, atol=0)
    assert any(not torch.equal(a, b) for a, b in zip(before, lze.model.parameters()))


def test_evaluation_neither_selects_nor_touches_state(tmp_path):
    trainer = make_trainer(
        tmp_path,
        max_steps=1,
        per_device_eval_batch_size=8,
        eval_strategy="no",
        trainer_kwargs=dict(eval_dataset=prompt_dataset(8)),
    )
    trainer.train()
    arrays, counters = trainer.lze_state_dict()
    metrics = trainer.evaluate()
    assert "eval_loss" in metrics and not any("lze" in k for k in metrics)
    arrays_after, counters_after = trainer.lze_state_dict()
    assert counters == counters_after
    for key in arrays:
        np.testing.assert_array_equal(arrays[key], arrays_after[key])


def test_none_and_nan_rewards_neither_crash_nor_poison_state(tmp_path):
    seen = set()

    def patchy(prompts, completions, **kwargs):
        seen.update(map(prompt_number, prompts))
        out = []
        for c, pid in zip(completions, map(prompt_number, prompts)):
            if pid % 4 == 0:
                out.append(None)  # a prompt with no scorable rollout
            elif zlib.crc32(c.encode()) % 5 == 0:
                out.append(float("nan"))
            else:
                out.append(float(zlib.crc32(c.encode()) % 2))
        return out

    trainer = make_trainer(tmp_path, reward=patchy, max_steps=4)
    trainer.train()
    state = trainer.lze.prompts.state_dict()
    assert len(seen) == 4 * 2  # 4 steps x 2 groups, all different prompts in epoch 0
    assert any(i % 4 == 0 for i in seen) and any(i % 4 for i in seen)  # both kinds were rolled out
    assert np.isfinite(state["ema_pass_rate"]).all() and np.isfinite(state["initial_pass_rate"]).all()
    # every scorable prompt was scored, the unscorable ones (i % 4 == 0) never
    assert sorted(trainer.lze.prompts.index.tolist()) == sorted(i for i in seen if i % 4)
    assert all(np.isfinite(v) for v in logged(trainer, "loss"))


def test_bad_inputs_fail_early_with_the_fix(tmp_path):
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    with pytest.raises(ValueError, match="correctness_reward='accuracy'.*mixed_reward"):
        make_trainer(tmp_path, model=model, tokenizer=tokenizer, correctness_reward="accuracy")
    with pytest.raises(ValueError, match="no `prompt` column.*rename_column"):
        make_trainer(tmp_path, model=model, tokenizer=tokenizer, dataset=Dataset.from_dict({"question": ["1+1="]}))
    with pytest.raises(ValueError, match="prune_solved=True needs a map-style"):
        make_trainer(
            tmp_path,
            model=model,
            tokenizer=tokenizer,
            dataset=prompt_dataset().to_iterable_dataset(),
            prune_solved=True,
        )


def test_correctness_reward_picks_the_reward_function(tmp_path):
    def never(completions, **kwargs):
        return [0.0] * len(completions)

    calls = []

    def recording_mixed_reward(prompts, completions, **kwargs):
        calls.append(mixed_reward(prompts, completions))
        return calls[-1]

    recording_mixed_reward.__name__ = "mixed_reward"
    trainer = make_trainer(
        tmp_path, reward=[never, recording_mixed_reward], max_steps=2, correctness_reward="mixed_reward"
    )
    trainer.train()
    # pass rates come from mixed_reward, not `never`: per step, the mean over its 2 groups of 4 of mixed_reward >= 0.5
    expected = [float((np.reshape(rewards, (-1, 4)) >= 0.5).mean(axis=1).mean()) for rewards in calls]
    assert len(expected) == 2 and any(e > 0 for e in expected)
    assert logged(trainer, "lze/pass_rate_mean") == pytest.approx(expected)


def test_iterable_dataset_keys_state_by_content_hash(tmp_path):
    from lze_trl.method.prompt_keys import content_key

    seen = set()

    def recording_text_reward(prompts, completions, **kwargs):
        seen.update(prompts)
        return text_reward(completions)

    trainer = make_trainer(
        tmp_path, reward=recording_text_reward, dataset=prompt_dataset().to_iterable_dataset(), max_steps=2
    )
    trainer.train()
    assert len(seen) == 2 * 2  # 2 steps x 2 groups
    assert sorted(trainer.lze.prompts.index.tolist()) == sorted(content_key({"prompt": p}) for p in seen)


def test_lora_run_updates_only_adapters(tmp_path):
    from peft import LoraConfig

    model = tiny_qwen2(char_tokenizer())
    base_before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = make_trainer(
        tmp_path,
        model=model,
        max_steps=3,
        learning_rate=1e-2,
        gradient_accumulation_steps=2,
        trainer_kwargs=dict(peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])),
    )
    trainer.train()
    params = dict(trainer.model.named_parameters())
    lora = {n: p for n, p in params.items() if "lora_B" in n}
    # lora_B starts at zero: every adapter (2 layers x q_proj, v_proj) was trained
    assert len(lora) == 2 * 2 and all(p.abs().sum() > 0 for p in lora.values())
    base_after = {
        n.removeprefix("base_model.model.").replace(".base_layer", ""): p
        for n, p in params.items()
        if "lora_" not in n
    }
    assert base_after.keys() == base_before.keys()
    for name, before in base_before.items():
        torch.testing.assert_close(base_after[name], before, rtol=0, atol=0)
    assert len(logged(trainer, "lze/selected_frac")) == 3  # LZE selected on each of the 3 steps


def test_prompt_table_and_bounded_selection_log(tmp_path):
    import pandas as pd

    trainer = make_trainer(tmp_path, max_steps=4, save_strategy="steps", save_steps=2, selection_log_max_rows=5)
    trainer.train()
    table = trainer.prompt_table()
    assert len(table) == len(trainer.lze.prompts) == 8  # 4 steps x 2 groups, all different prompts in epoch 0
    assert {"prompt_key", "prompt", "ema_pass_rate", "last_energy", "num_selected"} <= set(table.columns)
    assert table["prompt"].tolist() == [prompt_dataset()["prompt"][i] for i in table["prompt_key"]]
    assert table["num_selected"].sum() == round(sum(logged(trainer, "lze/selected_frac")) * 2)
    log = trainer.selection_log.to_pandas()
    # 4 batches of 2 rows: whole batches are dropped, oldest first, until at most 5 rows are left
    assert log["batch"].tolist() == [2, 2, 3, 3]
    # the checkpoint at step 2 holds the 2 prompts of each of its 2 steps and their batches; the end, everything
    for folder, prompts, generations in [
        (tmp_path / "out" / "checkpoint-2", 4, [0, 0, 1, 1]),
        (tmp_path / "out", 8, [2, 2, 3, 3]),
    ]:
        assert len(pd.read_parquet(folder / "lze_prompts.parquet")) == prompts
        assert pd.read_parquet(folder / "lze_selection_log.parquet")["batch"].tolist() == generations


def test_skipped_update_keeps_the_generation_pace(tmp_path):
    calls = []

    def recording_always_right(completions, **kwargs):
        calls.append(len(completions))
        return always_right(completions)

    # 2 micro-steps per generation batch
    trainer = make_trainer(tmp_path, reward=recording_always_right, max_steps=2, gradient_accumulation_steps=2)
    trainer.train()
    # one generation (and reward call) per optimizer step, although every micro-step was skipped
    assert calls == [16, 16]
    assert trainer._step == 4


def test_a_trainer_runs_a_small_cpu_on_one_thread_unless_told_not_to(tmp_path, monkeypatch):
    # thread_policy (a setting, on by default with its reason stated) applies the commands' policy; False leaves
    # torch's threads as the user set them
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setattr("os.cpu_count", lambda: 2)
        torch.set_num_threads(2)
        make_trainer(tmp_path / "off", thread_policy=False)
        assert torch.get_num_threads() == 2
        make_trainer(tmp_path / "on")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_thread_policy_runs_a_small_cpu_on_one_thread_unless_omp_num_threads_is_set(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setattr("os.cpu_count", lambda: 2)
        torch.set_num_threads(2)
        assert apply_thread_policy() == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's choice stands
        torch.set_num_threads(2)
        assert apply_thread_policy() == 2 and torch.get_num_threads() == 2
        monkeypatch.delenv("OMP_NUM_THREADS")
        monkeypatch.setattr("os.cpu_count", lambda: 8)  # a larger CPU keeps torch's default
        assert apply_thread_policy() == 2 and torch.get_num_threads() == 2
        assert apply_thread_policy("cuda") is None and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_an_epoch_left_empty_by_pruning_ends_the_run_with_a_warning(tmp_path):
    # every prompt always solved: once recorded, forward pruning leaves the next epoch without a generation batch;
    # the run ends there with a warning that names the fix, as the async trainer's does at an epoch with no prompt
    trainer = make_trainer(
        tmp_path, selector="none", reward=always_right, dataset=prompt_dataset(8), per_device_train_batch_size=16,
        max_steps=50, prune_solved=True, prune_solved_after=1, prune_explore_fraction=0.0,
    )  # fmt: skip
    with pytest.warns(LZEWarning, match=r"Epoch 1 has no generation batch.*training stops at this epoch"):
        trainer.train()
    assert 0 < trainer.state.global_step < 50 and trainer.train_sampler.epoch == 1


def final_state(trainer) -> tuple[int, dict]:
    """The last step of a trained run, and what its final checkpoint holds (asserting it exists)."""
    step = trainer.state.global_step
    folder = trainer.args.output_dir + f"/checkpoint-{step}"
    saved = json.loads(open(folder + "/trainer_state.json").read())
    assert os.path.isfile(os.path.join(folder, STATE_FILE))
    return step, saved


def test_a_run_ended_early_by_an_empty_epoch_keeps_its_final_checkpoint(tmp_path):
    # max_steps=50 and save_steps=100: the Trainer saves its last checkpoint only at max_steps, which pruning keeps the
    # run from reaching; the run saves it where it ends and says so in one line
    trainer = make_trainer(
        tmp_path, selector="none", reward=always_right, dataset=prompt_dataset(8), per_device_train_batch_size=16,
        max_steps=50, prune_solved=True, prune_solved_after=1, prune_explore_fraction=0.0, save_strategy="steps",
        save_steps=100,
    )  # fmt: skip
    with pytest.warns(LZEWarning) as caught:
        trainer.train()
    step, saved = final_state(trainer)
    assert 0 < step < 50 and saved["global_step"] == step
    ended = [str(w.message) for w in caught if str(w.message).startswith("Training ended")]
    assert ended == [
        f"Training ended at step {step} of the 50 planned: forward pruning left epoch 1 without prompts to roll out "
        f"(see the warning above); its last state is saved in checkpoint-{step}."
    ]
    assert (tmp_path / "out" / "lze_prompts.parquet").is_file()


def test_a_run_whose_epochs_pruning_shortens_keeps_its_final_checkpoint(tmp_path):
    # 16 prompts, 2 a step, 3 epochs: the Trainer plans 24 steps; even prompts are pruned after epoch 0, so epochs 1
    # and 2 roll out the 8 odd ones (4 steps each) and the run ends at step 16, saved there, not at the planned 24
    trainer = make_trainer(
        tmp_path, selector="none", reward=even_solved_reward, dataset=prompt_dataset(16), max_steps=-1,
        num_train_epochs=3, prune_solved=True, prune_solved_after=1, prune_explore_fraction=0.0,
        save_strategy="steps", save_steps=500,
    )  # fmt: skip
    with pytest.warns(LZEWarning, match=r"Training ended at step (\d+) of the 24 planned: forward pruning rolled out"):
        trainer.train()
    step, saved = final_state(trainer)
    assert step < 24 and trainer.train_sampler.epoch == 2
    assert saved["global_step"] == step and saved["log_history"]


def test_a_run_that_reaches_its_planned_steps_saves_once_and_says_nothing(tmp_path, recwarn):
    trainer = make_trainer(tmp_path, selector="none", dataset=prompt_dataset(16), max_steps=3, prune_solved=True,
                           save_strategy="steps", save_steps=3)  # fmt: skip
    trainer.train()
    assert final_state(trainer)[0] == 3
    assert not [w for w in recwarn if str(w.message).startswith("Training ended")]


@pytest.mark.parametrize("selector", ["none", "lze"])
def test_the_step_split_and_grpos_update_reach_the_trainer_state_without_a_tracker(tmp_path, selector):
    trainer = make_trainer(tmp_path, selector=selector, max_steps=3, report_to="none", save_strategy="steps",
                           save_steps=3)  # fmt: skip
    trainer.train()
    saved = json.loads((tmp_path / "out" / "checkpoint-3" / "trainer_state.json").read_text())["log_history"]
    steps = [e for e in saved if "lze/step_seconds" in e]
    assert len(steps) == 3
    for e in steps:
        assert 0 < e["lze/generation_seconds"] < e["lze/step_seconds"]
        assert e["lze/update_seconds"] == pytest.approx(e["lze/step_seconds"] - e["lze/generation_seconds"])
        assert e["lze/grpo_update_rows"] == 8  # every complete group: 2 prompts x 4 rollouts
        if selector == "none":
            assert (e["lze/update_rows"], e["lze/update_tokens"]) == (8, e["lze/grpo_update_tokens"])
        else:
            assert e["lze/update_rows"] < e["lze/grpo_update_rows"]
            assert e["lze/update_tokens"] < e["lze/grpo_update_tokens"]
    # the generation seconds are TRL's generation calls' time: an evaluation's generation is not counted
    assert trainer.generation_seconds == pytest.approx(sum(e["lze/generation_seconds"] for e in steps), rel=1e-6)


SKIP_EVENS = {"prune_solved": True, "prune_solved_after": 1, "prune_explore_fraction": 0.0, "prune_refill": False}


@pytest.mark.parametrize("settings", [{}, SKIP_EVENS])
def test_a_step_enters_trls_generate_and_score_completions_once(tmp_path, monkeypatch, settings):
    # the default step (and the skip mode) makes one call into TRL's generation and scoring, then scores, selects and
    # cuts the update rows: no second call, no call stopped by an exception
    from trl import GRPOTrainer

    calls = []
    original = GRPOTrainer._generate_and_score_completions

    def counted(self, inputs):
        calls.append((self.state.global_step, len(inputs)))
        return original(self, inputs)

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", counted)
    trainer = make_trainer(tmp_path, dataset=prompt_dataset(8), reward=even_solved_reward, max_steps=6, **settings)
    trainer.train()
    assert [step for step, _ in calls] == list(range(6))
    if settings:  # later steps generated fewer rows: the skipped prompts never reached TRL
        assert min(n for _, n in calls) < 8
