"""Checkpoints hold the LZE state; a resumed run continues exactly like the uninterrupted one."""

import numpy as np
import pytest
import torch
from testing_utils import (
    even_solved_reward,
    logged,
    make_trainer,
    mixed_reward,
    prompt_dataset,
    prompt_number,
    sided_reward,
)


pytestmark = pytest.mark.slow


BOTH_SIDES = dict(prune_unsolved=True, prune_exploration="adaptive")


def pruning_trainer(out_dir, prune):
    """10 steps on 8 prompts (2 groups per step: 4 steps per unpruned epoch), a checkpoint at every step; `prune`:
    False, True (the solved side, replay), "both" (both sides, adaptive exploration, on `sided_reward`) or "skip"
    (the same, without refilling the steps: `prune_refill=False`)."""
    rewards = {False: mixed_reward, True: even_solved_reward, "both": sided_reward, "skip": sided_reward}
    return make_trainer(
        out_dir,
        reward=rewards[prune],
        dataset=prompt_dataset(8),
        max_steps=10,
        save_strategy="steps",
        save_steps=1,
        learning_rate=1e-2,
        prune_solved=bool(prune),
        prune_solved_after=1,
        prune_explore_fraction=0.5,
        **(BOTH_SIDES if prune in ("both", "skip") else {}),
        prune_refill=prune != "skip",
    )


def history(trainer, after_step):
    keys = ("loss", "reward", "lze/selected_frac", "lze/energy_mean", "lze/update_tokens", "lze/pruned_prompts",
            "lze/explored_live_unsolved", "lze/keep_probability_unsolved", "lze/skipped_prompts_solved",
            "lze/groups_generated", "lze/generated_share", "lze/groups_explored_live")  # fmt: skip
    return [
        {k: e[k] for k in keys if k in e} for e in trainer.state.log_history if "loss" in e and e["step"] > after_step
    ]


@pytest.mark.parametrize(
    "prune, checkpoints", [(False, (3, 4, 6)), (True, (4, 6, 7)), ("both", (3, 5, 6)), ("skip", (3, 5, 6))]
)
def test_resume_is_exact(tmp_path, prune, checkpoints):
    full = pruning_trainer(tmp_path / "full", prune)
    full.train()
    if prune is True:
        # The even prompts (always solved) were pruned after epoch 0 and no odd one (never 4 of 4 in this seeded run),
        # so later epochs are shorter than the Trainer's arithmetic assumes: in epochs 1 and 2, half of the 4 pruned
        # prompts are explored and the other 2 skip their 4 rollouts.
        assert np.flatnonzero(full.lze.pruner.pruned(np.arange(8), full.lze.prompts)).tolist() == [0, 2, 4, 6]
        assert full.lze.position.groups_skipped(8) * 4 == 2 * 2 * 4
    if prune == "both":  # both sides pruned, the adaptive probabilities moved and some prompts were skipped
        assert full.lze.pruner.explored_scored.sum() > 0 and (full.lze.pruner.keep_probability != 0.5).all()
        assert full.lze.position.groups_skipped(8) > 0
    if prune == "skip":  # every step of the run ran, some with groups skipped
        assert full.state.global_step == 10 and min(logged(full, "lze/generated_share")) < 1
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


def test_pruning_on_both_sides_skips_dead_prompts_and_logs_it(tmp_path):
    seen_per_call = []

    def recording_reward(prompts, completions, **kwargs):
        seen_per_call.append({prompt_number(p) for p in prompts})
        return sided_reward(prompts, completions)

    trainer = make_trainer(
        tmp_path, reward=recording_reward, dataset=prompt_dataset(12), max_steps=-1, num_train_epochs=3,
        prune_solved=True, prune_solved_after=1, prune_unsolved=True, prune_explore_fraction=0.0,
    )  # fmt: skip
    trainer.train()
    # epoch 0 rolls out all 12 prompts (6 steps); then only mixed ones (2 mod 3; one of them can be dead by chance in
    # 4 rollouts and be pruned too)
    assert set().union(*seen_per_call[:6]) == set(range(12))
    later = set().union(*seen_per_call[6:])
    assert later and later <= {2, 5, 8, 11}
    assert (
        logged(trainer, "lze/skipped_prompts_solved")[-1] >= 4
        and logged(trainer, "lze/skipped_prompts_unsolved")[-1] >= 4
    )
    solved, unsolved = logged(trainer, "lze/dead_frac_solved"), logged(trainer, "lze/dead_frac_unsolved")
    dead = logged(trainer, "lze/dead_frac")
    np.testing.assert_allclose(np.add(solved, unsolved), dead)  # the two sides add up to the dead share
    assert np.mean(dead[:6]) > 0.5 > np.mean(dead[6:])  # 8 of 12 dead in epoch 0, few after
    assert trainer.lze.pruner.num_pruned(trainer.lze.prompts) >= 8


def test_checkpoint_holds_lze_state(tmp_path):
    trainer = pruning_trainer(tmp_path, prune=True)
    trainer.train()
    folder = tmp_path / "out" / "checkpoint-5"
    assert (folder / "lze_state.npz").exists() and not (folder / "lze_state.json").exists()
    with np.load(folder / "lze_state.npz") as data:
        assert {"prompts.initial_pass_rate", "prompts.saturated_streak", "pruner.explored_keys"} <= set(data.files)
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
        prune_explore_fraction=0.0,
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


@pytest.mark.parametrize("selector", ["none", "lze", "uniform_live"])
def test_skip_mode_generates_only_the_prompts_pruning_keeps_and_reaches_max_steps(tmp_path, selector):
    seen_per_call = []

    def recording_reward(prompts, completions, **kwargs):
        seen_per_call.append([prompt_number(p) for p in prompts[::4]])
        return sided_reward(prompts, completions)

    # 12 prompts, 2 a step (6 steps an epoch), 15 steps: epoch 0 generates every prompt; later steps generate only
    # their prompts that are not pruned (2 mod 3, mixed), at least one a step, and are not refilled
    trainer = make_trainer(
        tmp_path, selector=selector, reward=recording_reward, dataset=prompt_dataset(12), max_steps=15,
        prune_solved=True, prune_solved_after=1, prune_unsolved=True, prune_explore_fraction=0.0, prune_refill=False,
    )  # fmt: skip
    trainer.train()
    assert trainer.state.global_step == 15 and len(seen_per_call) == 15
    assert sorted(sum(seen_per_call[:6], [])) == list(range(12))  # epoch 0: every prompt, 2 a step
    generated = logged(trainer, "lze/groups_generated")
    skipped = np.add(logged(trainer, "lze/groups_skipped_solved"), logged(trainer, "lze/groups_skipped_unsolved"))
    assert [len(s) for s in seen_per_call] == generated  # what TRL generated is what the step says
    np.testing.assert_array_equal(np.add(generated, skipped), 2)  # the counts add up to the step's prompts
    np.testing.assert_allclose(logged(trainer, "lze/generated_share"), np.divide(generated, 2))
    np.testing.assert_array_equal(logged(trainer, "lze/generated_rollouts"), np.multiply(generated, 4))
    assert sum(skipped) > 0 and all(g >= 1 for g in generated)
    pruned = trainer.lze.pruner.pruned(trainer.prompt_keys.dataset_keys, trainer.lze.prompts)
    for step, seen in enumerate(seen_per_call[6:], start=6):  # a dead prompt is generated only when alone in its step
        assert all(n % 3 == 2 or len(seen) == 1 or not pruned[n] for n in seen), (step, seen)
    if selector != "none":  # the quota and lze/selected_frac count the skipped groups as the step's dead ones
        assert max(logged(trainer, "lze/selected_frac")) <= 0.5 and 1 in generated
    assert trainer.lze.position.groups_skipped(12) == sum(skipped)  # lze/rollouts_skipped: the run's, cumulative
    assert logged(trainer, "lze/rollouts_skipped")[-1] == 4 * sum(skipped)
