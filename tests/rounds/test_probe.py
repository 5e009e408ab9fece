"""Probe-then-complete (`generation_rounds` with `round_policy="probe"`): the pieces (choice evened out over processes,
rows of TRL's `_generate` results taken and merged), then trainer runs: each rollout generated and rewarded once,
log-probabilities only for the completed groups, which alone reach the update, with TRL's advantages over the whole
group; exact resume; the run says when its probes decide badly; bad settings are refused early."""

import numpy as np
import pytest
import torch
from testing_utils import (
    completion_bucket,
    count_grad_rows,
    even_solved_reward,
    expected_forward_rows,
    logged,
    lze_args,
    make_trainer,
    prompt_dataset,
    prompt_number,
)
from trl import GRPOTrainer

from lze_trl import LZEGRPOTrainer, LZEWarning
from lze_trl.method.round_policies import RoundsState
from lze_trl.method.run import LZERun
from lze_trl.rounds.in_flight import BatchInFlight, even_out, round_done
from lze_trl.rounds.rollouts import GeneratedRows, Rollouts, gather_rows


# ----------------------------------------------------------------------------------------------- pieces
def test_even_out_gives_every_process_the_same_count_keeping_the_best():
    chosen = np.array([1, 1, 1, 0, 0, 0, 0, 1], dtype=bool)  # 3 on process 0, 1 on process 1
    energies = np.array([0.5, 0.1, 0.9, 0.3, 0.2, 0.8, 0.7, 0.6])
    out = even_out(chosen, energies, num_processes=2)
    assert out.reshape(2, -1).sum(axis=1).tolist() == [2, 2]
    # process 0 drops its lowest chosen (0.1); process 1 adds its best other group (0.8) to its chosen one
    assert np.flatnonzero(out).tolist() == [0, 2, 5, 7]
    assert even_out(chosen, energies, num_processes=1).tolist() == chosen.tolist()  # one process: unchanged
    nothing = np.zeros(8, dtype=bool)  # at least one group per process, the best: every process has update rows
    assert np.flatnonzero(even_out(nothing, energies, num_processes=2)).tolist() == [2, 5]
    # a later round adds only groups still going on: process 1's stopped group of priority 0.8 stays stopped
    going_on = np.array([1, 1, 1, 1, 1, 0, 1, 1], dtype=bool)
    out = even_out(chosen, energies, num_processes=2, going_on=going_on)
    assert np.flatnonzero(out).tolist() == [0, 2, 6, 7]


def test_round_done_moves_a_batch_in_flight_through_the_schedule(tmp_path):
    # the rule both trainers follow (the sync rounds' SyncBatchInFlight, the async window's AsyncBatchInFlight): after
    # a round, the round policy chooses among the groups going on, evened out over the processes, and the next round
    # begins
    args = lze_args(tmp_path, num_generations=8, generation_rounds=[2, 4, 8], round_policy="probe")
    run = LZERun(args, 8, None)
    rewards = np.full((4, 8, 1), np.nan)
    rewards[:, :2, 0] = [[0, 1], [1, 1], [0, 0], [1, 0]]  # groups 0 and 3 in the learning zone after the probe
    batch = BatchInFlight(2, RoundsState(np.arange(4), rewards, 0, np.ones(4, dtype=bool)))
    assert not round_done(batch, run, processes=2) and not batch.complete
    assert batch.state.rollouts_so_far == 2 and batch.round_last == 4
    assert batch.state.going_on.reshape(2, -1).sum(axis=1).tolist() == [1, 1]  # one group on each process
    assert batch.state.going_on.tolist() == [True, False, False, True]  # the mixed groups, not the dead or solved
    batch.state.rewards[batch.state.going_on, 2:4, 0] = [[0, 1], [1, 1]]
    assert not round_done(batch, run, processes=2) and batch.round_last == 8
    batch.state.rewards[batch.state.going_on, 4:8, 0] = 1.0
    assert round_done(batch, run, processes=2) and batch.complete and batch.state.rollouts_so_far == 8


def generate_result(rows):
    """A `_generate`-shaped result: prompt ids, completion ids, no tool mask, completions, no logprobs, no extra
    fields, no images, no tool images (TRL's 8-tuple)."""
    return (
        [[1, r] for r in rows],
        [[r, r] for r in rows],
        None,
        [f"c{r}" for r in rows],
        None,
        {},
        None,
        [],
    )


def rollouts(rows, logs=None):
    prompts = [f"p{r}" for r in rows]
    return Rollouts(
        GeneratedRows([{"prompt": p} for p in prompts], prompts, generate_result(rows), logs or {}), None, None
    )


def test_rows_of_generate_results_are_gathered_as_one_call_returns_them():
    probe, rest = rollouts([3, 4], {"judge": ["a", "b"]}), rollouts([5, 6, 7])
    gathered = gather_rows([probe.rows, rest.rows], [(0, 1), (1, 0), (1, 2)])
    assert [x["prompt"] for x in gathered.inputs] == gathered.prompts == ["p4", "p5", "p7"]
    assert gathered.generated == generate_result([4, 5, 7])  # per-row parts taken, `None` and empty parts kept
    assert gathered.extra_logs == {
        "judge": ["b", None, None]
    }  # a reward function's log_extra values follow their rows
    extra = (*generate_result([1, 2])[:5], {"env_mask": [[1], [0]], "shared": 3}, None, [])
    taken = gather_rows([GeneratedRows([{}, {}], ["a", "b"], extra, {})], [(0, 1)]).generated
    assert taken[5] == {"env_mask": [[0]], "shared": 3}
    with pytest.raises(TypeError, match="completion_ids=list of length 1 for 2 rows"):
        gather_rows([GeneratedRows([{}, {}], ["a", "b"], (*extra[:1], [[1]], *extra[2:]), {})], [(0, 0)])
    other = (*extra[:5], {"env_mask": [[1], [0]], "shared": 4}, None, [])
    with pytest.raises(TypeError, match="shared=int, int for 2, 2 rows"):  # rounds disagree on a shared value
        gather_rows(
            [GeneratedRows([{}, {}], ["a", "b"], extra, {}), GeneratedRows([{}, {}], ["c", "d"], other, {})], [(0, 0)]
        )


# ----------------------------------------------------------------------------------------------- trainer runs
class _RecordGeneration(GRPOTrainer):
    def _generate(self, prompts):  # below LZEGRPOTrainer: only the rollouts TRL really generates
        result = super()._generate(prompts)
        if self.model.training:
            self.generated.append(list(zip(prompts, result[3])))
        return result

    def _get_per_token_logps_and_entropies(self, model, input_ids, *args, **kwargs):
        if not torch.is_grad_enabled():  # TRL's old / reference log-probabilities, outside the update's backward
            self.logprob_rows.append(input_ids.shape[0])
        return super()._get_per_token_logps_and_entropies(model, input_ids, *args, **kwargs)


class RecordingTrainer(LZEGRPOTrainer, _RecordGeneration):
    """Records every rollout it really generates, the rows of TRL's log-probability forwards outside the update, and
    every micro-batch of the update."""

    def __init__(self, *args, **kwargs):
        self.generated, self.updates, self.logprob_rows = [], [], []
        super().__init__(*args, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        keys = ("prompt_ids", "completion_ids", "completion_mask", "advantages")
        self.updates.append({k: inputs[k].detach().clone() for k in keys})
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def bucket_reward(prompts, completions, **kwargs):
    """Deterministic in the completion's text: a group's rewards are known from its completions alone."""
    return [float(completion_bucket(c, 3) < prompt_number(p) % 3) for p, c in zip(prompts, completions)]


@pytest.mark.slow
def test_only_completed_groups_reach_the_update_with_trls_advantages_over_the_whole_group(tmp_path):
    trainer = make_trainer(
        tmp_path,
        reward=bucket_reward,
        dataset=prompt_dataset(32),
        generation_rounds=[2, 4],
        round_policy="probe",
        fuse_rounds=False,  # the serial rounds: two generation calls per step (test_fused_rounds.py: one)
        per_device_train_batch_size=32,  # 8 prompts x 4 rollouts per generation batch
        max_steps=3,
        trainer_class=RecordingTrainer,
    )
    rows = count_grad_rows(trainer.model)
    trainer.train()
    tokenizer = trainer.processing_class
    completed = logged(trainer, "lze/completed_groups")
    assert logged(trainer, "lze/first_round_rollouts") == [16.0] * 3  # 8 prompts x 2
    assert logged(trainer, "lze/fresh_rollouts") == [16 + 2 * c for c in completed]
    # Two generation calls per step: the probe (2 rollouts of each of the 8 prompts), then the completion (2 more of
    # each completed prompt): the probe's rollouts are never generated again.
    assert [len(g) for g in trainer.generated] == [n for c in completed for n in (16, 2 * int(c))]
    assert 0 < sum(completed) < 3 * 8
    for step, update in enumerate(trainer.updates):
        probe, completion = trainer.generated[2 * step], trainer.generated[2 * step + 1]
        kept = update["completion_mask"].sum(dim=1) > 0
        prompts = tokenizer.batch_decode(update["prompt_ids"][kept], skip_special_tokens=True)
        completions = tokenizer.batch_decode(update["completion_ids"][kept], skip_special_tokens=True)
        advantages = update["advantages"][kept]
        for prompt in set(prompts):
            rows_of = [i for i, p in enumerate(prompts) if p == prompt]
            assert len(rows_of) == 4  # a whole group of num_generations reaches the update
            group = sorted(completions[i] for i in rows_of)
            # the group is the prompt's probe (2 rollouts) and its completion (2 new ones)
            expected = [c for p, c in probe if p == prompt] + [c for p, c in completion if p == prompt]
            assert group == sorted(expected)
            # TRL's advantages over the group of 4 (scale_rewards="group"): (r - mean) / (std + 1e-4)
            rewards = torch.tensor(bucket_reward([prompt] * 4, [completions[i] for i in rows_of]))
            mean, std = rewards.mean(), rewards.std()
            torch.testing.assert_close(advantages[rows_of], (rewards - mean) / (std + 1e-4))
    log = trainer.selection_log.to_pandas()
    assert rows["rows"] == expected_forward_rows(log)  # only the kept groups' rows went through the backward
    table = trainer.prompt_table()
    # a prompt only probed has no first pass rate yet (a probe's 2 rollouts do not set the difficulty anchor)
    probed_only = table["num_selected"] == 0
    assert table.loc[probed_only, "initial_pass_rate"].isna().any()


@pytest.mark.slow
def test_each_rollout_is_rewarded_once_and_only_completed_groups_get_log_probabilities(tmp_path):
    scored = []

    def counting_reward(prompts, completions, log_extra, **kwargs):
        scored.append(len(completions))
        log_extra("scored", [f"{p}|{c}" for p, c in zip(prompts, completions)])  # one value per row it rewarded
        return bucket_reward(prompts, completions)

    trainer = make_trainer(
        tmp_path,
        reward=counting_reward,
        dataset=prompt_dataset(32),
        generation_rounds=[2, 4],
        round_policy="probe",
        fuse_rounds=False,
        per_device_train_batch_size=16,
        steps_per_generation=2,  # 8 prompts x 4 rollouts per generation batch, two micro-steps
        num_iterations=2,  # TRL computes old log-probabilities (its update is not on-policy): counted here
        max_steps=2,
        log_completions=True,
        trainer_class=RecordingTrainer,
    )
    trainer.train()
    # the completions table TRL logs: the update rows' prompts and completions, each beside its own log_extra value
    table = trainer._logs
    text = [f"{p}|{c}" for p, c in zip(table["prompt"], table["completion"])]
    assert len(text) == len(table["extra"]["scored"]) > 0 and list(table["extra"]["scored"]) == text
    completed = logged(trainer, "lze/completed_groups")[::2]  # logged with each of the generation batch's 2 steps
    fresh = logged(trainer, "lze/fresh_rollouts")[::2]
    assert 0 < sum(completed) < 8 * len(completed)
    # The reward functions see every rollout once: the probe's 16, then the completions' 2 per completed group
    assert scored == [n for c in completed for n in (16, 2 * int(c))]
    assert sum(scored) == sum(fresh) == sum(len(g) for g in trainer.generated)
    # TRL's log-probability forwards (outside the update) only for the completed groups' rows, never the probes'
    assert sum(trainer.logprob_rows) == sum(4 * int(c) for c in completed)


@pytest.mark.slow
@pytest.mark.parametrize("fuse_rounds", [False, True])
def test_the_adapter_restores_what_it_bends_in_trl_after_each_call(tmp_path, monkeypatch, fuse_rounds):
    # lze_trl/grpo/adapter.py is the one place that bends TRL: inside a round's call TRL sees the round's group size
    # and the adapter's call; after it, and after a call that fails, the trainer is as TRL left it
    seen = []
    generate = GRPOTrainer._generate

    def spying_generate(self, prompts):
        seen.append((self.num_generations, self._call is not None))
        if fail and len(seen) == 3:
            raise RuntimeError("generation failed")
        return generate(self, prompts)

    fail = False
    monkeypatch.setattr(GRPOTrainer, "_generate", spying_generate)
    trainer = make_trainer(tmp_path, generation_rounds=[2, 4], round_policy="probe", fuse_rounds=fuse_rounds,
                           max_steps=2)  # fmt: skip
    logs = trainer._pending_extra_logs
    trainer.train()
    assert seen and set(seen) == {(2, True)}  # every round: 2 rollouts a group; the update rows' calls are served
    assert trainer._call is None and trainer.num_generations == 4 and trainer._pending_extra_logs is logs
    fail, seen[:] = True, []
    trainer = make_trainer(tmp_path, generation_rounds=[2, 4], round_policy="probe", fuse_rounds=fuse_rounds,
                           max_steps=4)  # fmt: skip
    logs = trainer._pending_extra_logs
    with pytest.raises(RuntimeError, match="generation failed"):
        trainer.train()
    assert trainer._call is None and trainer.num_generations == 4 and trainer._pending_extra_logs is logs
    calls = []

    def failing_reward(prompts, completions, **kwargs):  # the second round's reward fails
        calls.append(len(completions))
        if len(calls) == 2:
            raise RuntimeError("reward failed")
        return bucket_reward(prompts, completions)

    fail = False
    trainer = make_trainer(tmp_path, reward=failing_reward, generation_rounds=[2, 4], round_policy="probe",
                           fuse_rounds=fuse_rounds, max_steps=4)  # fmt: skip
    logs = trainer._pending_extra_logs
    with pytest.raises(RuntimeError, match="reward failed"):
        trainer.train()
    assert trainer._call is None and trainer.num_generations == 4 and trainer._pending_extra_logs is logs


@pytest.mark.slow
@pytest.mark.parametrize(
    "budget", [dict(generation_rounds=[2, 4], round_policy="probe"), dict(generation_rounds=[1, 2, 4])]
)
def test_probe_resume_is_exact(tmp_path, budget):  # the probe, and the adaptive budget's rounds
    def trainer(out, **extra):
        return make_trainer(
            out,
            reward=even_solved_reward,
            dataset=prompt_dataset(16),
            **budget,
            per_device_train_batch_size=16,
            max_steps=6,
            save_strategy="steps",
            save_steps=1,
            learning_rate=1e-2,
            **extra,
        )

    full = trainer(tmp_path / "full")
    full.train()
    resumed = trainer(tmp_path / "full")
    resumed.args.output_dir = str(tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "out" / "checkpoint-3"))
    keys = ("loss", "lze/completed_groups", "lze/fresh_rollouts", "lze/energy_mean")
    history = [{k: e[k] for k in keys if k in e} for e in full.state.log_history if "loss" in e and e["step"] > 3]
    assert len(history) == 3 and history == [
        {k: e[k] for k in keys if k in e} for e in resumed.state.log_history if "loss" in e and e["step"] > 3
    ]
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.slow
def test_a_run_whose_probes_decide_badly_says_so(tmp_path):
    # Every rollout is wrong: every probe is 0 of 2, the quota is still completed, and every completed group is dead
    trainer = make_trainer(
        tmp_path,
        reward=lambda completions, **kw: [0.0] * len(completions),
        generation_rounds=[2, 4],
        round_policy="probe",
        per_device_train_batch_size=16,
        fuse_rounds=True,
        max_steps=3,  # fused rounds: a batch completed every step
    )
    with pytest.warns(LZEWarning, match="more than half of the completed groups came back dead"):
        trainer.train()
    assert logged(trainer, "lze/completed_dead_frac") == [1.0] * 3


@pytest.mark.slow
def test_probe_with_lora_trains_only_the_adapters(tmp_path):
    from peft import LoraConfig

    trainer = make_trainer(
        tmp_path,
        dataset=prompt_dataset(16),
        generation_rounds=[1, 4],
        round_policy="probe",
        per_device_train_batch_size=16,
        fuse_rounds=True,
        max_steps=2,  # fused rounds: both steps train
        trainer_kwargs=dict(peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all("lora" in n for n in changed)
    assert logged(trainer, "lze/first_round_rollouts") == [4.0, 4.0]  # each step's batch's first round


@pytest.mark.parametrize(
    "overrides, kwargs, match",
    [
        (dict(generation_rounds=[4, 4], round_policy="probe"), {}, r"generation_rounds=\[4, 4\] is invalid"),
        (dict(generation_rounds=[2, 4], round_policy="probe", selector="none"), {}, "selector='none' keeps every"),
        (dict(generation_rounds=[2, 4], round_policy="probes"), {}, "round_policy='probes' is invalid"),
        (dict(generation_rounds=[2, 4], history_prior_strength=float("nan")), {}, "history_prior_strength=nan"),
        (dict(generation_rounds=[2, 4], fuse_rounds="False"), {}, "fuse_rounds='False' is invalid.*True, False"),
    ],
)
def test_bad_probe_settings_are_refused_with_the_fix(tmp_path, overrides, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_trainer(tmp_path, trainer_kwargs=kwargs, **overrides)


def test_the_probe_needs_whole_groups_on_every_process(tmp_path):
    # 2 processes x 6 rows: TRL accepts groups of 4 straddling the processes, the probe does not
    from lze_trl.method.validation import validate_lze_args

    args = lze_args(tmp_path, generation_rounds=[2, 4], round_policy="probe", per_device_train_batch_size=8)
    args.per_device_train_batch_size = 6  # as on 2 processes (TRL checks the 12 rows of both)
    with pytest.raises(ValueError, match="whole groups.*6 rows is not a multiple of num_generations=4"):
        validate_lze_args(args)
    args.steps_per_generation = 2
    validate_lze_args(args)
