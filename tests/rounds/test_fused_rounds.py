"""Fused rounds (`fuse_rounds=True`): one generation call per step after the first, counted on TRL's
`_generate_single_turn`, and an update from the first step; with the weights held fixed, the rows, rewards and
advantages of the serial rounds at the same step; a look-ahead that drew other prompts than TRL's sampler handed is
dropped; the rollouts in flight kept exactly across a resume, and refused when they are missing or were made by another
number of processes."""

import numpy as np
import pytest
import torch
from test_probe_agentic import UpdateRecorder, counting_rollout_func, rows_of
from testing_utils import logged, make_trainer, mixed_reward, prompt_dataset

from lze_trl import LZEGRPOTrainer
from lze_trl.common.in_flight_files import IN_FLIGHT_FILE, load_in_flight, save_in_flight
from lze_trl.method.errors import LZEStateError, LZEWarning
from lze_trl.rounds.fused import RoundPipeline, split_rollouts
from lze_trl.rounds.rollouts import GeneratedRows, Rollouts


pytestmark = pytest.mark.slow

PROBE = dict(generation_rounds=[2, 4], round_policy="probe")
BUDGET = dict(generation_rounds=[1, 2, 4], round_policy="adaptive")


def count_generation_calls(trainer) -> list[int]:
    """Wraps TRL's `_generate_single_turn` on `trainer`: the rows of each call, in order."""
    calls, generate = [], trainer._generate_single_turn

    def counted(prompt_ids, *args, **kwargs):
        calls.append(len(prompt_ids))
        return generate(prompt_ids, *args, **kwargs)

    trainer._generate_single_turn = counted
    return calls


@pytest.mark.parametrize(("rounds", "serial_calls"), [(PROBE, 2), (BUDGET, 3)])
def test_one_generation_call_per_step_where_serial_rounds_make_one_per_round(tmp_path, rounds, serial_calls):
    def run(out, fuse):
        trainer = make_trainer(
            out, reward=mixed_reward, dataset=prompt_dataset(32), per_device_train_batch_size=16, max_steps=5,
            fuse_rounds=fuse, **rounds,
        )  # fmt: skip
        calls = count_generation_calls(trainer)
        trainer.train()
        return trainer, calls

    fused, fused_calls = run(tmp_path / "fused", True)
    serial, calls = run(tmp_path / "serial", False)
    R = len(rounds["generation_rounds"])
    # the first step starts the batches in flight (R calls: the step's batch and the R - 1 drawn ahead, one round
    # more each call), every later step makes one
    assert len(fused_calls) == R + 4 and logged(fused, "lze/generation_calls") == [float(R)] + [1.0] * 4
    assert len(calls) == 5 * serial_calls and logged(serial, "lze/generation_calls") == [float(serial_calls)] * 5
    # each call holds the first round of the batch drawn ahead (4 prompts) and the next round of each batch in flight
    first = rounds["generation_rounds"][0] * 4
    assert fused_calls[0] == first and all(n > first for n in fused_calls[R - 1 : -R])
    assert sum(logged(fused, "lze/fresh_rollouts")) == sum(fused_calls)
    # every step completes the batch TRL handed and trains on it, the first included
    assert all(tokens > 0 for tokens in logged(fused, "lze/update_tokens"))
    assert len(logged(fused, "lze/completed_groups")) == 5
    # a rollout's age at the update, in steps: the first step's batch was started in it; with 3 rounds the second's
    # first two rounds came from the first step; from then on a batch's round r is R - r steps old
    expected = {2: [0.0] + [(2 * 1 + 2 * 0) / 4] * 4, 3: [0.0, (1 + 1) / 4] + [(1 * 2 + 1 * 1 + 2 * 0) / 4] * 3}[R]
    assert logged(fused, "lze/rollout_staleness") == expected
    assert logged(serial, "lze/rollout_staleness") == [0.0] * 5


def test_with_the_weights_fixed_fused_rounds_train_on_the_serial_rows_at_the_same_step(tmp_path):
    def run(out, steps, fuse):
        calls = []

        def even_digit(completions, tag, **kwargs):  # reads the rollout_func's extra field, in every round
            return [float(c[:1] in "02468") for c in completions]

        trainer = make_trainer(
            out,
            reward=even_digit,
            dataset=prompt_dataset(32),
            per_device_train_batch_size=16,  # 4 prompts x 4 rollouts a step
            selection_ratio=0.5,
            max_steps=steps,
            learning_rate=0.0,  # the weights held fixed
            trainer_class=UpdateRecorder,
            trainer_kwargs=dict(rollout_func=counting_rollout_func(calls)),
            fuse_rounds=fuse,
            # the rollout_func's log-probabilities are placeholders (0.0): no sampling policy to correct towards
            vllm_importance_sampling_correction=False,
            **PROBE,
        )
        trainer.train()
        return trainer, calls

    serial, serial_calls = run(tmp_path / "serial", 4, False)
    fused, fused_calls = run(tmp_path / "fused", 4, True)
    assert len(fused_calls) == 5 and len(serial_calls) == 8
    # the first batch's first round, then each batch's completion with the next batch's first round, then the last
    # batch's completion (no batch is drawn past the run's last step)
    assert fused_calls == [serial_calls[0]] + [serial_calls[2 * t + 1] + serial_calls[2 * t + 2] for t in range(3)] + [
        serial_calls[7]
    ]
    for step in range(4):  # the same rows, completions, masks and TRL advantages, and the same loss, at each step
        assert rows_of(fused.updates[step : step + 1]) == rows_of(serial.updates[step : step + 1])
        assert rows_of(serial.updates[step : step + 1])
    assert logged(fused, "loss") == logged(serial, "loss")
    keys = ("lze/completed_groups", "lze/energy_mean", "lze/pass_rate_mean", "lze/selected_frac")
    for key in keys:  # the same choices and selections
        assert logged(fused, key) == logged(serial, key), key
    fused_log, serial_log = fused.selection_log.to_pandas(), serial.selection_log.to_pandas()
    columns = ["prompt_key", "pass_rate", "energy", "weight"]
    assert fused_log[columns].equals(serial_log[columns])
    np.testing.assert_array_equal(fused.prompt_table()["ema_pass_rate"], serial.prompt_table()["ema_pass_rate"])


@pytest.mark.parametrize(
    ("pruning", "calls"),
    [({}, [2, 1, 1, 1, 1, 1]), ({"prune_solved": True}, [2, 1, 1, 1, 2, 1]),
     ({"prune_solved": True, "prune_unsolved": True, "prune_exploration": "adaptive"}, [2, 1, 1, 1, 2, 1])],
)  # fmt: skip
def test_the_look_ahead_crosses_an_epoch_unless_its_prompts_are_decided_at_its_start(tmp_path, pruning, calls):
    # 16 prompts, 4 a step: 4 steps an epoch. Without pruning the next epoch's order is known (its permutation); with
    # it, the pool is decided at the epoch's start, so the epoch's last step draws nothing ahead and the next one
    # starts its batches in flight anew. Every step trains on the batch TRL handed.
    trainer = make_trainer(
        tmp_path, reward=mixed_reward, dataset=prompt_dataset(16), per_device_train_batch_size=16, max_steps=6,
        fuse_rounds=True, **pruning, **PROBE,
    )  # fmt: skip
    trainer.train()
    assert logged(trainer, "lze/generation_calls") == [float(n) for n in calls]
    if pruning.get("prune_unsolved"):  # prompt 0 never passes (mixed_reward): pruned on the unsolved side
        assert trainer.lze.pruner.side_of(trainer.prompt_keys.dataset_keys[:1], trainer.lze.prompts)[0][0] == 1
    assert all(tokens > 0 for tokens in logged(trainer, "lze/update_tokens"))


def test_a_look_ahead_that_drew_other_prompts_is_dropped_with_a_warning(tmp_path):
    from lze_trl.grpo.sampler import SamplerLookahead

    class Astray(SamplerLookahead):  # draws the batch after the one it should
        def batch(self, ahead):
            return super().batch(ahead + 1)

    class Trainer(LZEGRPOTrainer):
        def _lookahead(self, handed):
            return Astray(**vars(super()._lookahead(handed)))

    trainer = make_trainer(
        tmp_path, reward=mixed_reward, dataset=prompt_dataset(32), per_device_train_batch_size=16, max_steps=3,
        fuse_rounds=True, trainer_class=Trainer, **PROBE,
    )  # fmt: skip
    with pytest.warns(LZEWarning, match="not the one TRL's sampler handed: its rounds in flight are dropped"):
        trainer.train()
    assert logged(trainer, "lze/generation_calls") == [2.0, 2.0, 2.0]  # each step starts anew
    assert all(tokens > 0 for tokens in logged(trainer, "lze/update_tokens"))
    keys = [int(k) for k in trainer.selection_log.to_pandas()["prompt_key"]]
    assert len(keys) == 3 * 4 and len(set(keys)) == 12  # the handed batches were trained, nothing twice


@pytest.mark.parametrize("rounds", [PROBE, BUDGET])
@pytest.mark.parametrize("at", [1, 3])
def test_a_resumed_fused_run_continues_its_rollouts_in_flight_exactly(tmp_path, rounds, at):
    def trainer(out, **extra):
        return make_trainer(
            out, reward=mixed_reward, dataset=prompt_dataset(32), per_device_train_batch_size=16, max_steps=6,
            save_strategy="steps", save_steps=1, learning_rate=1e-2, fuse_rounds=True, **rounds, **extra,
        )  # fmt: skip

    full = trainer(tmp_path / "full")
    full_calls = count_generation_calls(full)
    full.train()
    checkpoint = tmp_path / "full" / "out" / f"checkpoint-{at}"  # after the first step's R calls, or later
    assert (checkpoint / IN_FLIGHT_FILE.format(process=0)).exists()
    resumed = trainer(tmp_path / "full")
    resumed.args.output_dir = str(tmp_path / "resumed")
    resumed_calls = count_generation_calls(resumed)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    # nothing regenerated: the batches in flight came from the checkpoint (the first step made R calls)
    assert resumed_calls == full_calls[len(rounds["generation_rounds"]) + at - 1 :]
    keys = ("loss", "lze/completed_groups", "lze/fresh_rollouts", "lze/energy_mean", "lze/rollout_staleness")

    def after(t):
        return [{k: e[k] for k in keys if k in e} for e in t.state.log_history if "loss" in e and e["step"] > at]

    assert len(after(full)) == 6 - at and after(full) == after(resumed)
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_checkpoint_without_its_rollouts_in_flight_is_refused(tmp_path):
    def trainer(out, **extra):
        return make_trainer(
            out, reward=mixed_reward, dataset=prompt_dataset(32), per_device_train_batch_size=16, max_steps=3,
            save_strategy="steps", save_steps=2, fuse_rounds=True, **PROBE, **extra,
        )  # fmt: skip

    trainer(tmp_path / "run").train()
    checkpoint = tmp_path / "run" / "out" / "checkpoint-2"
    (checkpoint / IN_FLIGHT_FILE.format(process=0)).unlink()
    with pytest.raises(LZEStateError, match=r"lze_in_flight_0\.pt' is missing.*fuse_rounds=True"):
        trainer(tmp_path / "run").train(resume_from_checkpoint=str(checkpoint))
    save_in_flight(str(checkpoint), 0, 1, ({}, {"window_batches": "[]"}))  # an async window's, not fused rounds'
    with pytest.raises(LZEStateError, match=r"are not fused rounds' \(no 'fused_batches'\)"):
        trainer(tmp_path / "run").train(resume_from_checkpoint=str(checkpoint))
    (checkpoint / IN_FLIGHT_FILE.format(process=0)).unlink()
    fresh = trainer(tmp_path / "run", resume_lze_state="fresh")  # on purpose: a fresh LZE state, nothing in flight
    with pytest.warns(LZEWarning, match="resumes with a fresh LZE state"):
        fresh.train(resume_from_checkpoint=str(checkpoint))
    # its one step starts the batches in flight anew (R calls) and trains on the batch TRL handed
    assert logged(fresh, "lze/generation_calls")[-1] == 2.0 and logged(fresh, "lze/update_tokens")[-1] > 0


def test_rollouts_in_flight_are_refused_by_another_number_of_processes(tmp_path):
    save_in_flight(str(tmp_path), process=0, num_processes=2, batches=RoundPipeline(calls=3).state_dict())
    with pytest.raises(LZEStateError, match="kept by 2 processes, not 1"):
        load_in_flight(str(tmp_path), process=0, num_processes=1, needed_by="this test")
    pipeline = RoundPipeline()
    pipeline.load_state_dict(*load_in_flight(str(tmp_path), process=0, num_processes=2, needed_by="this test"))
    assert pipeline.calls == 3 and pipeline.batches == []
    with pytest.raises(LZEStateError, match=r"lze_in_flight_1\.pt' is missing.*which this test needs"):
        load_in_flight(str(tmp_path), process=1, num_processes=2, needed_by="this test")


def test_one_calls_rollouts_are_cut_into_their_parts_on_every_process():
    # 2 processes, each with a part of 2 rows then a part of 3: row r of process p is named p*10 + r
    rows = GeneratedRows([{"i": i} for i in range(5)], [f"p{i}" for i in range(5)], ([[i] for i in range(5)],), {})
    rows.generated = (*rows.generated, *([None] * 7))
    keys = np.array([0, 1, 2, 3, 4, 10, 11, 12, 13, 14])
    rewards = keys[:, None].astype(float)
    first, second = split_rollouts(Rollouts(rows, keys, rewards), [2, 3], processes=2)
    assert first.prompt_keys.tolist() == [0, 1, 10, 11] and second.prompt_keys.tolist() == [2, 3, 4, 12, 13, 14]
    assert second.rewards[:, 0].tolist() == [2, 3, 4, 12, 13, 14]
    assert first.rows.prompts == ["p0", "p1"] and second.rows.generated[0] == [[2], [3], [4]]
