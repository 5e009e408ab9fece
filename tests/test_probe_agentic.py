"""Probe-then-complete where rollouts come from a `rollout_func` or an `environment_factory`: a group completed over
two generation rounds reaches the update exactly as the same rollouts generated at once, the rollout_func's extra
fields reach the reward functions in every round, and environment runs generate fewer rollouts."""

from collections import Counter

import pytest
import torch
from datasets import Dataset
from test_drop_in import CountingEnv, chat_reward, tool_tokenizer
from testing_utils import logged, make_trainer, prompt_dataset, prompt_number

from lze_trl import LZEGRPOTrainer
from lze_trl.tiny import tiny_qwen2


def counting_rollout_func(calls: list):
    """A rollout_func whose `j`-th rollout of a prompt is the same whichever call generates it: its digit is
    `(prompt number + j) % 10`, with an environment mask and an extra field naming the rollout."""
    drawn = Counter()

    def rollout_func(prompts, trainer):
        calls.append(len(prompts))
        tok = trainer.processing_class
        prompt_ids, completion_ids, tags = [], [], []
        for prompt in prompts:
            j = drawn[prompt]
            drawn[prompt] += 1
            digit = str((prompt_number(prompt) + j * j) % 10)
            prompt_ids.append(tok(prompt)["input_ids"])
            completion_ids.append([tok.convert_tokens_to_ids(digit), tok.eos_token_id])
            tags.append(f"{prompt}#{j}")
        n = len(prompts)
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": [[0.0, 0.0]] * n,
            "env_mask": [[1, 0]] * n,  # the EOS is the environment's: no loss on it
            "tag": tags,
        }

    return rollout_func


class UpdateRecorder(LZEGRPOTrainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        keys = ("prompt_ids", "completion_ids", "completion_mask", "tool_mask", "advantages")
        self.updates.append({k: inputs[k].detach().clone() for k in keys})
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def rows_of(updates) -> list[tuple]:
    """The kept rows of the update (loss tokens left), as comparable tuples, in a fixed order."""
    rows = []
    for update in updates:
        kept = (update["completion_mask"] * update["tool_mask"]).sum(dim=1) > 0
        for i in torch.nonzero(kept).flatten().tolist():
            rows.append(
                (
                    tuple(update["prompt_ids"][i].tolist()),
                    tuple(update["completion_ids"][i].tolist()),
                    tuple(update["tool_mask"][i].tolist()),
                    round(float(update["advantages"][i]), 6),
                )
            )
    return sorted(rows)


@pytest.mark.slow
def test_a_rollout_func_group_completed_over_two_rounds_reaches_the_update_as_one_generated_at_once(tmp_path):
    def run(out, **probe):
        calls, tags = [], []

        def even_digit(completions, tag, **kwargs):  # reads the rollout_func's extra field, in every round
            tags.extend(tag)
            return [float(c[:1] in "02468") for c in completions]

        trainer = make_trainer(
            out,
            reward=even_digit,
            dataset=prompt_dataset(8),
            per_device_train_batch_size=16,  # 4 prompts x 4 rollouts, one generation batch per step
            selection_ratio=1.0,  # every live group: the probe completes every prompt with a chance of being live
            max_steps=1,
            trainer_class=UpdateRecorder,
            trainer_kwargs=dict(rollout_func=counting_rollout_func(calls)),
            **probe,
        )
        trainer.updates = []
        trainer.train()
        return trainer, calls, tags

    at_once, calls, tags = run(tmp_path / "at_once")
    probed, probe_calls, probe_tags = run(tmp_path / "probed", probe_generations=2)
    assert calls == [16] and probe_calls[0] == 8 and len(probe_calls) == 2  # the probe, then the completions
    assert sorted(probe_tags) == sorted(set(probe_tags)) and len(probe_tags) == sum(probe_calls)  # rewarded once
    assert logged(probed, "lze/completed_groups") == [4.0]
    assert sorted(probe_tags) == sorted(tags)  # every rollout of every group, each with its own extra field
    # the same rows, environment masks and TRL advantages over the whole group, and the same loss
    assert rows_of(probed.updates) == rows_of(at_once.updates) and rows_of(at_once.updates)
    assert logged(probed, "loss") == logged(at_once, "loss")
    # the adaptive budget in three rounds, every group going on: the same again
    rounds, round_calls, round_tags = run(tmp_path / "rounds", rollout_rounds=[1, 2, 4], rollout_live_threshold=1e-9)
    assert round_calls == [4, 4, 8] and sorted(round_tags) == sorted(tags)
    assert rows_of(rounds.updates) == rows_of(at_once.updates) and logged(rounds, "loss") == logged(at_once, "loss")


BUDGETS = {
    "probe": dict(probe_generations=2, selection_ratio=0.25),
    # only groups already mixed go on: every group whose first rollouts agree stops
    "adaptive": dict(rollout_rounds=[2, 3, 4], rollout_live_threshold=1.0),
}


def trained_probe_run(tmp_path, columns: dict, budget: str, **trainer_kwargs) -> LZEGRPOTrainer:
    """2 steps of 4 prompts x 4 rollouts, a first round of 2 (`BUDGETS`), on the tool-calling tiny model, trained."""
    tokenizer = tool_tokenizer()
    trainer = make_trainer(
        tmp_path,
        reward=chat_reward,
        dataset=Dataset.from_dict(columns),
        model=tiny_qwen2(tokenizer, max_position_embeddings=4096),
        tokenizer=tokenizer,
        max_steps=2,
        max_completion_length=4,
        per_device_train_batch_size=16,
        trainer_kwargs=trainer_kwargs,
        **BUDGETS[budget],
    )
    trainer.train()
    return trainer


@pytest.mark.slow
@pytest.mark.parametrize("budget", list(BUDGETS))
def test_an_environment_run_probes_and_completes_fewer_groups(tmp_path, budget):
    resets = Counter()

    class Env(CountingEnv):
        def reset(self, question=None, **kwargs):
            resets[question] += 1
            return super().reset(question=question, **kwargs)

    questions = {"question": [f"{i}+{i % 7}" for i in range(16)]}
    trainer = trained_probe_run(tmp_path, questions, budget, environment_factory=Env)
    fresh, probe = logged(trainer, "lze/fresh_rollouts"), logged(trainer, "lze/probe_rollouts")
    completed = logged(trainer, "lze/completed_groups")
    assert probe == [8.0, 8.0] and all(8 + 2 * c <= f < 16 for f, c in zip(fresh, completed))
    if budget == "probe":
        assert fresh == [8 + 2 * c for c in completed]
    # every rollout's environment is reset when it is generated; a completed group's rows once more when TRL makes
    # their update rows (it prepares the prompts again: docs/upstream/score-generated-rollouts.md)
    assert sum(resets.values()) == sum(fresh) + 4 * sum(completed)


@pytest.mark.slow
@pytest.mark.parametrize("budget", list(BUDGETS))
def test_a_tools_run_probes_and_completes_fewer_groups(tmp_path, budget):
    prompts = {"prompt": [[{"role": "user", "content": f"{i}+{i % 7}="}] for i in range(16)]}
    trainer = trained_probe_run(tmp_path, prompts, budget, tools=[CountingEnv().add])
    fresh, completed = logged(trainer, "lze/fresh_rollouts"), logged(trainer, "lze/completed_groups")
    assert all(8 + 2 * c <= f < 16 for f, c in zip(fresh, completed))
    if budget == "probe":
        assert fresh == [8 + 2 * c for c in completed]
    assert logged(trainer, "tools/call_frequency")  # TRL's tool loop ran in the generation rounds
