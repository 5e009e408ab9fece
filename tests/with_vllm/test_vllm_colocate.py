"""
LZE training with vLLM colocated in the training process (`use_vllm=True, vllm_mode="colocate"`), on a tiny local
Qwen2. On a CPU-only machine these run on vLLM's CPU build (`make test-vllm`, workarounds in
`tests/support/vllm_cpu.py`).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testing_utils import (
    count_grad_rows,
    even_solved_reward,
    expected_forward_rows,
    logged,
    make_trainer,
    mixed_reward,
    prompt_dataset,
    prompt_number,
)
from vllm_cpu import max_logp_gap, model_sequence_logps, save_tiny_model, vllm_sequence_logps


pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# vLLM runs the float32 checkpoint in bfloat16: its log-probabilities differ from the trainer's float32 ones by
# ~1e-3 to 1e-2 on the tiny model. A stale copy of weights that moved differs by ~1.
SYNC_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("vllm-model")
    save_tiny_model(path)
    return str(path)


def vllm_trainer(tmp_path, model_dir, selector="lze", reward=mixed_reward, dataset=None, **overrides):
    """An `LZEGRPOTrainer` of the saved tiny model generating with vLLM colocate, with `lze_args(**overrides)`."""
    from transformers import AutoTokenizer

    values = dict(
        use_vllm=True,
        vllm_mode="colocate",
        vllm_max_model_length=512,
        vllm_gpu_memory_utilization=0.3,
        max_steps=2,
    )
    values.update(overrides)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return make_trainer(tmp_path, selector, reward, dataset, model=model_dir, tokenizer=tokenizer, **values)


def record_vllm(trainer):
    """
    Records the prompts of every vLLM generation call (as prompt numbers), the prompts pruned at that time, and the
    weight syncs; fails the test if the policy's own `generate` is ever used.
    """
    calls = {"prompts": [], "pruned": [], "syncs": 0}
    engine = trainer.vllm_generation
    generate, sync = engine.generate, engine.sync_weights
    tokenizer = trainer.processing_class

    def recording_generate(prompts, *args, **kwargs):
        calls["prompts"].append([prompt_number(tokenizer.decode(p)) for p in prompts])
        if trainer.lze.pruner is not None:
            pruned = trainer.lze.pruner.pruned(np.arange(len(trainer.train_dataset)), trainer.lze.prompts)
            calls["pruned"].append(set(np.flatnonzero(pruned).tolist()))
        return generate(prompts, *args, **kwargs)

    def recording_sync():
        calls["syncs"] += 1
        return sync()

    def no_generate(*args, **kwargs):
        raise AssertionError("the policy's generate ran: completions must come from vLLM")

    engine.generate, engine.sync_weights = recording_generate, recording_sync
    trainer.model.generate = no_generate
    return calls


def weights(model):
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("selector", ["none", "lze"])
def test_colocate_training_generates_with_vllm(tmp_path, model_dir, selector):
    trainer = vllm_trainer(tmp_path, model_dir, selector, learning_rate=1e-2)
    assert trainer.vllm_generation.mode == "colocate"
    calls = record_vllm(trainer)
    rows = count_grad_rows(trainer.model)
    before = weights(trainer.model)
    trainer.train()
    assert trainer.state.global_step == 2
    assert calls["syncs"] == 2 and len(calls["prompts"]) == 2  # one sync and one generation per step
    assert all(len(p) == 8 for p in calls["prompts"])  # 2 prompts x 4 rollouts
    assert any((a != b).any() for a, b in zip(before, trainer.model.parameters()))
    # The rollouts' vLLM log-probs (sampling) match the trainer's (old) ones: every step generated with the
    # weights the trainer had, i.e. the update of step 1 reached vLLM before step 2 generated.
    gaps = logged(trainer, "sampling/sampling_logp_difference/max")
    assert len(gaps) == 2 and max(gaps) < SYNC_TOLERANCE
    log = trainer.selection_log.to_pandas()
    assert len(log) == 2 * 2
    if selector == "none":
        assert log["selected"].all() and rows["rows"] == 2 * 8
    else:
        kept = int(log["selected"].sum())
        # LZE's top groups only reach the backward (a step with none kept runs on one zero-weight padding row)
        assert 0 < kept < len(log) and rows["rows"] == expected_forward_rows(log)


def test_weight_sync_reaches_vllm(tmp_path, model_dir):
    trainer = vllm_trainer(tmp_path, model_dir, "none")
    llm = trainer.vllm_generation.llm
    tokenizer = trainer.processing_class
    sequences = [tokenizer.encode(text) for text in ("12+5=17", "3+3=6 ok", "(4*2)-1=7")]
    model = trainer.model
    assert max_logp_gap(vllm_sequence_logps(llm, sequences), model_sequence_logps(model, sequences)) < SYNC_TOLERANCE
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    stale = max_logp_gap(vllm_sequence_logps(llm, sequences), model_sequence_logps(model, sequences))
    assert stale > 0.5  # vLLM still has the old weights
    trainer.vllm_generation.sync_weights()
    synced = max_logp_gap(vllm_sequence_logps(llm, sequences), model_sequence_logps(model, sequences))
    assert synced < SYNC_TOLERANCE, f"after sync: {synced:.4f} (before: {stale:.4f})"


@pytest.mark.parametrize("refill", [True, False])
def test_forward_pruning_keeps_solved_prompts_away_from_vllm(tmp_path, model_dir, refill):
    trainer = vllm_trainer(
        tmp_path,
        model_dir,
        "lze",
        reward=even_solved_reward,
        dataset=prompt_dataset(8),  # 2 groups per step: one epoch is 4 steps
        max_steps=6,
        prune_solved=True,
        prune_solved_after=1,
        prune_explore_fraction=0.0,
        prune_refill=refill,
    )
    calls = record_vllm(trainer)
    trainer.train()
    assert trainer.lze.position.groups_skipped(len(trainer.train_dataset)) > 0
    assert {n for prompts in calls["prompts"][:4] for n in prompts} == set(range(8))  # epoch 0: every prompt
    assert calls["pruned"][4] >= set(range(0, 8, 2))  # every even prompt was solved and pruned after epoch 0
    later = [n for prompts in calls["prompts"][4:] for n in prompts]
    if refill:  # the steps are filled from the rest: odd prompts only
        assert later and all(n % 2 == 1 for n in later)
    else:  # skip mode: each step generates its prompts that are not pruned (at least one), never replaced
        assert len(calls["prompts"]) == 6 and trainer.state.global_step == 6
        assert len({n for prompts in calls["prompts"][4:] for n in set(prompts)}) < 4  # fewer than the 2 x 2 drawn
    for prompts, pruned in zip(calls["prompts"], calls["pruned"]):
        # a pruned prompt reaches vLLM only alone in its step (skip mode generates at least one prompt a step)
        assert len(set(prompts)) == 1 or not set(prompts) & pruned


@pytest.mark.parametrize("correction", [True, False])
def test_vllm_importance_sampling_correction(tmp_path, model_dir, correction):
    trainer = vllm_trainer(tmp_path, model_dir, "lze", vllm_importance_sampling_correction=correction)
    batches = []
    compute_loss = trainer.compute_loss

    def recording_compute_loss(model, inputs, *args, **kwargs):
        batches.append({k: v.detach().clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)})
        return compute_loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = recording_compute_loss
    trainer.train()
    assert batches
    ratios = logged(trainer, "sampling/importance_sampling_ratio/mean")
    if not correction:
        assert not ratios and not any("importance_sampling_ratio" in b for b in batches)
        return
    assert len(ratios) == 2
    for batch in batches:
        # TRL's default sequence_mask mode: exp of the summed log-prob gap (trainer minus vLLM) of each kept row,
        # zeroed above clip_max 3. The rows LZE packs for the update carry their own ratios.
        mask = batch["completion_mask"].float()
        rows = mask.sum(1) > 0  # zero-weight padding rows have no loss tokens
        gap = ((batch["old_per_token_logps"] - batch["sampling_per_token_logps"]) * mask).sum(1, keepdim=True)
        expected = torch.exp(gap).masked_fill(torch.exp(gap) > 3.0, 0.0)
        torch.testing.assert_close(batch["importance_sampling_ratio"][rows], expected[rows])
        assert (gap[rows].abs() < 10 * SYNC_TOLERANCE).all()  # vLLM sampled with the trainer's weights


def test_resume_with_vllm_is_exact(tmp_path, model_dir):
    def history(trainer, after_step):
        keys = ("loss", "reward", "lze/selected_frac", "lze/energy_mean", "lze/update_tokens")
        return [
            {k: e[k] for k in keys if k in e}
            for e in trainer.state.log_history
            if "loss" in e and e["step"] > after_step
        ]

    settings = dict(max_steps=4, save_strategy="steps", save_steps=1, learning_rate=1e-2)
    full = vllm_trainer(tmp_path / "full", model_dir, "lze", **settings)
    full.train()
    resumed = vllm_trainer(tmp_path / "full", model_dir, "lze", **settings)  # reads full's checkpoints
    resumed.args.output_dir = str(tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "out" / "checkpoint-2"))
    assert len(history(full, 2)) == 2
    assert history(resumed, 2) == history(full, 2)
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
