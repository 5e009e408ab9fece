"""Checkpoints hold the LZE state; a resumed run continues exactly like the uninterrupted one."""

import numpy as np
import pytest
import torch
from testing_utils import even_solved_reward, make_trainer, mixed_reward, prompt_dataset, prompt_number


pytestmark = pytest.mark.slow


def pruning_trainer(out_dir, prune):
    """10 steps on 8 prompts (2 groups per step: 4 steps per unpruned epoch), a checkpoint at every step."""
    return make_trainer(
        out_dir,
        reward=even_solved_reward if prune else mixed_reward,
        dataset=prompt_dataset(8),
        max_steps=10,
        save_strategy="steps",
        save_steps=1,
        learning_rate=1e-2,
        prune_solved=prune,
        prune_solved_after=1,
        prune_revisit_fraction=0.5,
    )


def history(trainer, after_step):
    keys = ("loss", "reward", "lze/selected_frac", "lze/energy_mean", "lze/update_tokens", "lze/pruned_prompts")
    return [
        {k: e[k] for k in keys if k in e} for e in trainer.state.log_history if "loss" in e and e["step"] > after_step
    ]


@pytest.mark.parametrize("prune, checkpoints", [(False, (3, 4, 6)), (True, (4, 6, 7))])
def test_resume_is_exact(tmp_path, prune, checkpoints):
    full = pruning_trainer(tmp_path / "full", prune)
    full.train()
    if prune:
        # The even prompts (always solved) were pruned after epoch 0 and no odd one (never 4 of 4 in this seeded run),
        # so later epochs are shorter than the Trainer's arithmetic assumes: in epochs 1 and 2, half of the 4 pruned
        # prompts are revisited and the other 2 skip their 4 rollouts.
        assert np.flatnonzero(full.lze.pruner.pruned(np.arange(8), full.lze.prompts)).tolist() == [0, 2, 4, 6]
        assert full.lze.position.groups_skipped(8) * 4 == 2 * 2 * 4
    full_arrays, full_counters = full.lze_state_dict()
    for step in checkpoints:
        # same output_dir: checkpoints are read from it
        resumed = pruning_trainer(tmp_path / "full", prune)
        resumed.args.output_dir = str(tmp_path / f"resumed-{step}")
        resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "out" / f"checkpoint-{step}"))
        assert history(resumed, step) == history(full, step), f"resumed from checkpoint-{step}"
        arrays, counters = resumed.lze_state_dict()
        assert counters == full_counters
        for key in full_arrays:
            np.testing.assert_array_equal(arrays[key], full_arrays[key])
        for a, b in zip(full.model.parameters(), resumed.model.parameters()):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_checkpoint_holds_lze_state(tmp_path):
    trainer = pruning_trainer(tmp_path, prune=True)
    trainer.train()
    folder = tmp_path / "out" / "checkpoint-5"
    assert (folder / "lze_state.npz").exists() and not (folder / "lze_state.json").exists()
    with np.load(folder / "lze_state.npz") as data:
        assert {"prompts.initial_pass_rate", "prompts.saturated_streak", "pruner.revisited_keys"} <= set(data.files)
        assert {"position.plan", "position.counters", "run.batches_recorded", "__counters__"} <= set(data.files)
    # the model card TRL writes beside the checkpoints names no base model for one built in code: it says so
    card = (tmp_path / "out" / "README.md").read_text()
    assert "trained from a local model" in card and "[None]" not in card and "LZE" in card


def test_epoch_based_pruning_skips_solved_prompts(tmp_path):
    seen_per_call = []

    def recording_reward(prompts, completions, **kwargs):
        seen_per_call.append({prompt_number(p) for p in prompts})
        return even_solved_reward(prompts, completions)

    trainer = make_trainer(
        tmp_path,
        reward=recording_reward,
        dataset=prompt_dataset(8),
        max_steps=-1,
        num_train_epochs=3,
        prune_solved=True,
        prune_solved_after=1,
        prune_revisit_fraction=0.0,
    )
    trainer.train()
    # epoch 0 rolls out all 8 prompts (4 steps); then only the 4 odd ones (2 steps per epoch)
    assert len(seen_per_call) == 4 + 2 + 2
    assert set().union(*seen_per_call[:4]) == set(range(8))
    assert set().union(*seen_per_call[4:]) == {1, 3, 5, 7}
    assert trainer.lze.pruner.num_pruned(trainer.lze.prompts) == 4
    assert trainer.state.global_step == 8
    assert [e["lze/rollouts_skipped"] for e in trainer.state.log_history if "lze/rollouts_skipped" in e][
        -1
    ] == 2 * 4 * 4
