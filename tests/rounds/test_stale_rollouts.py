"""Stale rollouts of fused rounds: their sampling log-probabilities recorded when they are generated, TRL's
importance-sampling ratio applied to their update rows (and only to theirs), every TRL loss trained under fused rounds,
and the updates that train nothing said loudly."""

import copy
import math

import numpy as np
import pytest
import torch
from testing_utils import flat_parameters, logged, make_trainer, mixed_reward, prompt_dataset

from lze_trl import LZEGRPOTrainer
from lze_trl.method.errors import LZEWarning
from lze_trl.method.guards import EmptyUpdateGuard
from lze_trl.rounds.off_policy import IS_MODES, importance_weights


PROBE = dict(generation_rounds=[2, 4], round_policy="probe", fuse_rounds=True)


# ----------------------------------------------------------------------------------------------- the formula
def test_importance_weights_follow_trl_s_four_modes():
    current = torch.tensor([[-1.0, -2.0, 0.0], [-1.0, -1.0, -1.0]])
    sampling = torch.tensor([[-1.5, -1.0, 5.0], [float("nan"), -3.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # the third token of row 0 is padding
    token = torch.tensor([[math.exp(0.5), math.exp(-1.0), 1.0], [1.0, math.exp(2.0), 1.0]])
    torch.testing.assert_close(importance_weights(current, sampling, mask, "token_truncate", None, None), token)
    torch.testing.assert_close(
        importance_weights(current, sampling, mask, "token_truncate", 0.5, 2.0),
        torch.tensor([[math.exp(0.5), 0.5, 1.0], [1.0, 2.0, 1.0]]),
    )
    torch.testing.assert_close(
        importance_weights(current, sampling, mask, "token_mask", 0.5, 2.0),
        torch.tensor([[math.exp(0.5), 0.0, 1.0], [1.0, 0.0, 1.0]]),
    )
    sequence = torch.tensor([[math.exp(-0.5)], [3.0]])  # NaN (unrecorded) tokens add nothing; exp(2) clipped at 3
    torch.testing.assert_close(importance_weights(current, sampling, mask, "sequence_truncate", None, 3.0), sequence)
    masked = importance_weights(current, sampling, mask, "sequence_mask", None, 3.0)
    torch.testing.assert_close(masked, torch.tensor([[math.exp(-0.5)], [0.0]]))
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode='tokens'"):
        importance_weights(current, sampling, mask, "tokens", None, None)
    assert len(IS_MODES) == 4


# ----------------------------------------------------------------------------------------------- the correction
class SamplingRecorder(LZEGRPOTrainer):
    """Records each update's rows with their sampling log-probabilities, and the current policy's log-probabilities
    of them (the policy the update starts from)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.updates = []

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        with torch.no_grad():
            current = self._get_per_token_logps_and_entropies(model, ids, mask, inputs["completion_ids"].size(1))[0]
        keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages")
        update = {k: inputs[k].detach().clone() for k in keys}
        self.updates.append({**update, "current": current, "sampling": inputs.get("sampling_per_token_logps")})
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def fused_run(tmp_path, name, correction, **overrides):
    trainer = make_trainer(
        tmp_path / name,
        reward=mixed_reward,
        dataset=prompt_dataset(32),
        per_device_train_batch_size=16,  # 4 prompts x 4 rollouts a step, one micro-step
        selection_ratio=1.0,
        learning_rate=5e-2,
        max_steps=3,
        trainer_class=SamplingRecorder,
        vllm_importance_sampling_correction=correction,
        vllm_importance_sampling_mode="sequence_truncate",
        vllm_importance_sampling_clip_max=100.0,
        **(PROBE | overrides),
    )
    start = copy.deepcopy(trainer.model)
    trainer.train()
    return trainer, start


@pytest.mark.slow
def test_stale_rows_are_corrected_by_the_ratio_of_the_policy_trained_to_the_one_that_sampled_them(tmp_path):
    corrected, start = fused_run(tmp_path, "corrected", True)
    plain, _ = fused_run(tmp_path, "plain", False)
    # step 1 trains batch 1, generated in it (no stale row: nothing to correct) and draws batch 2's first round; step 2
    # trains batch 2, whose first round the starting weights sampled, before step 1's update.
    first, second = corrected.updates[0], corrected.updates[1]
    assert not torch.isfinite(first["sampling"]).any()  # nothing recorded of a row trained in its own step
    stale = torch.isfinite(second["sampling"]).any(dim=1) & (second["completion_mask"].sum(dim=1) > 0)
    fresh = ~torch.isfinite(second["sampling"]).any(dim=1) & (second["completion_mask"].sum(dim=1) > 0)
    assert stale.sum() > 0 and fresh.sum() > 0
    # the first round's sampling log-probabilities are the policy's at generation: the starting weights
    ids = torch.cat([second["prompt_ids"], second["completion_ids"]], dim=1)
    mask = torch.cat([second["prompt_mask"], second["completion_mask"]], dim=1)
    with torch.no_grad():
        at_start = corrected._get_per_token_logps_and_entropies(start, ids, mask, second["completion_ids"].size(1))[0]
    tokens = second["completion_mask"].bool() & stale[:, None]
    torch.testing.assert_close(second["sampling"][tokens], at_start[tokens], rtol=1e-4, atol=1e-4)
    # the same rows in both runs; the stale ones' advantages scaled by exp(sum over tokens of current - sampling)
    other = plain.updates[1]
    assert torch.equal(second["completion_ids"], other["completion_ids"])
    expected = torch.exp(((second["current"] - second["sampling"]).nan_to_num() * second["completion_mask"]).sum(1))
    scaled = other["advantages"][stale] * expected[stale]
    torch.testing.assert_close(second["advantages"][stale], scaled, rtol=1e-3, atol=1e-5)
    assert not torch.allclose(second["advantages"][stale], other["advantages"][stale])  # switched off: not scaled
    torch.testing.assert_close(second["advantages"][fresh], other["advantages"][fresh], rtol=0, atol=0)
    assert torch.equal(first["advantages"], plain.updates[0]["advantages"])  # no stale row: nothing scaled
    assert len(logged(corrected, "lze/stale_is_ratio_mean")) == 2  # steps 2 and 3
    # logged over every completed group's stale rows, those the selection then dropped (dead groups) included
    assert logged(corrected, "lze/stale_is_ratio_max")[0] >= float(expected[stale].max()) * (1 - 1e-3)
    assert logged(plain, "lze/stale_is_ratio_mean") == []


@pytest.mark.slow
def test_serial_rounds_have_no_stale_row_and_correct_nothing(tmp_path):
    serial, _ = fused_run(tmp_path, "serial", True, fuse_rounds=False)
    assert logged(serial, "lze/stale_is_ratio_mean") == []
    assert all(u["sampling"] is None for u in serial.updates)  # nothing recorded: no forward spent


# ----------------------------------------------------------------------------------------------- every loss trains
LOSSES = [
    dict(loss_type="grpo"),
    dict(loss_type="dapo"),
    dict(loss_type="bnpo"),
    dict(loss_type="dr_grpo"),
    dict(loss_type="cispo"),
    dict(loss_type="sapo", sapo_temperature_pos=0.5, sapo_temperature_neg=2.0),
    dict(loss_type="vespo"),
    dict(loss_type="luspo", importance_sampling_level="sequence"),
    dict(loss_type="grpo", importance_sampling_level="sequence"),
    dict(loss_type="dapo", off_policy_mask_threshold=0.5),
    dict(loss_type="dapo", top_entropy_quantile=0.5),
    dict(loss_type="dapo", vllm_importance_sampling_mode="token_truncate"),
    dict(loss_type="dapo", vllm_importance_sampling_mode="token_mask"),
]


@pytest.mark.slow
@pytest.mark.parametrize("settings", LOSSES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_every_trl_loss_trains_under_fused_rounds(tmp_path, settings):
    from trl import GRPOConfig

    unknown = [k for k in settings if k not in GRPOConfig.__dataclass_fields__]
    if unknown:
        pytest.skip(f"this TRL has no {unknown}")
    moved = {}
    for fuse in (False, True):  # 4 steps of 2 micro-steps, each generation batch trained twice: 2 batches
        trainer = make_trainer(
            tmp_path / str(fuse), dataset=prompt_dataset(32), num_generations=8, per_device_train_batch_size=8,
            gradient_accumulation_steps=2, num_iterations=2, learning_rate=1e-2, max_steps=4,
            **PROBE | {"generation_rounds": [2, 8], "fuse_rounds": fuse}, **settings,
        )  # fmt: skip
        before = flat_parameters(trainer.model).copy()
        trainer.train()
        assert all(tokens > 0 for tokens in logged(trainer, "lze/update_tokens"))  # every update trains
        moved[fuse] = np.abs(flat_parameters(trainer.model) - before).max()
        if fuse:
            assert len(logged(trainer, "lze/stale_is_ratio_mean")) > 0  # the second batch's first round was stale
    assert moved[True] > 0 and moved[False] > 0  # trains fused as it does serial


# ----------------------------------------------------------------------------------------------- empty updates
@pytest.mark.slow
def test_a_fused_run_of_one_step_trains_as_a_serial_one(tmp_path):
    moved = {}
    for fuse in (False, True):
        trainer = make_trainer(
            tmp_path / str(fuse), generation_rounds=[1, 2, 4], fuse_rounds=fuse, max_steps=1, learning_rate=1e-2
        )
        before = flat_parameters(trainer.model).copy()
        trainer.train()
        assert logged(trainer, "lze/update_tokens")[0] > 0
        moved[fuse] = np.abs(flat_parameters(trainer.model) - before).max()
    assert moved[True] > 0 and moved[False] > 0


def test_empty_updates_are_said_once_and_a_run_that_trained_nothing_names_its_cause():
    said = []
    guard = EmptyUpdateGuard(warn=said.append)
    for tokens in (0, 5, 0, 0, 3, 0, 0, 0, 0):
        guard.observe(True, 1)
        guard.check(tokens, "why")
    assert len(said) == 1 and "last 3 updates trained no token (why)" in said[0]
    state = guard.state_dict()
    restored = EmptyUpdateGuard(warn=said.append)
    restored.load_state_dict(state)
    assert (restored.updates, restored.trained, restored.empty, restored.warned) == (9, 2, 4, True)
    assert (restored.scored_batches, restored.live_groups) == (9, 9)
    assert restored.untrained(["r"], "r", 1.0) is None  # it trained

    def untrained(scored: bool, live: int) -> str:
        nothing = EmptyUpdateGuard(warn=said.append)
        for _ in range(2):
            nothing.observe(scored, live)
            nothing.check(0, "why")
        return nothing.untrained(["acc", "fmt"], "acc", 0.5)

    head = "This run trained no token: all its 2 updates were empty, so the model is where it started. "
    assert untrained(False, 0).startswith(head + "No rollout was scored: the reward functions ('acc', 'fmt')")
    assert "max_unscorable_batches=3" in untrained(False, 0)
    assert untrained(True, 0).startswith(head + "Every group was dead")
    assert "pass_threshold=0.5 on the correctness reward 'acc'" in untrained(True, 0)
    assert untrained(True, 1).startswith(head + "2 live groups were scored, but no update kept one")
    assert "Train more steps" not in untrained(True, 0)  # the old advice, which named the wrong cause


@pytest.mark.slow
def test_a_run_whose_every_group_is_dead_says_it_trained_nothing(tmp_path):
    trainer = make_trainer(tmp_path, reward=lambda completions, **kw: [1.0] * len(completions), max_steps=4)
    with pytest.warns(LZEWarning) as record:
        trainer.train()
    messages = [str(w.message) for w in record]
    assert any("The last 3 updates trained no token" in m for m in messages)
    assert any(m.startswith("This run trained no token") and "Every group was dead" in m for m in messages)
    assert trainer.lze.untrained() is not None


@pytest.mark.slow
def test_a_run_whose_reward_scores_nothing_names_the_reward_at_its_end(tmp_path):
    def unscorable(completions, **kwargs):
        return [None] * len(completions)

    trainer = make_trainer(tmp_path, reward=unscorable, max_steps=2)
    with pytest.warns(LZEWarning) as record:
        trainer.train()
    ended = [str(w.message) for w in record if str(w.message).startswith("This run trained no token")]
    assert len(ended) == 1 and "No rollout was scored: the reward functions ('unscorable')" in ended[0]


def test_fused_rounds_with_image_prompts_need_vllm(tmp_path):
    from testing_utils import colour_dataset

    # their sampling log-probabilities would be recorded without the images on transformers generation
    with pytest.raises(ValueError, match=r"fuse_rounds=True with image prompts needs use_vllm=True"):
        make_trainer(tmp_path, dataset=colour_dataset(), generation_rounds=[2, 4], fuse_rounds=True)
