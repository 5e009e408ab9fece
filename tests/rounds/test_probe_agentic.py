"""Probe-then-complete and the adaptive budget where rollouts come from a `rollout_func`, `tools` or an
`environment_factory`: a group completed over several generation rounds reaches the update exactly as the same
rollouts generated at once (rows, tool masks, rewards, advantages, loss), the rollout_func's extra fields and the
environments' own rewards reach the reward functions once per rollout, and such runs generate fewer rollouts."""

import re
from collections import Counter

import pytest
import torch
from datasets import Dataset
from test_drop_in import CountingEnv, chat_reward, tool_tokenizer
from testing_utils import logged, make_trainer, prompt_dataset, prompt_number

from lze_examples.tiny import tiny_qwen2
from lze_trl import LZEGRPOTrainer


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
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.updates = []

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
        trainer.train()
        return trainer, calls, tags

    at_once, calls, tags = run(tmp_path / "at_once")
    serial = dict(fuse_rounds=False)  # each batch complete in its own step (fused: test_fused_rounds.py)
    probe = dict(generation_rounds=[2, 4], round_policy="probe", **serial)
    probed, probe_calls, probe_tags = run(tmp_path / "probed", **probe)
    assert calls == [16] and probe_calls[0] == 8 and len(probe_calls) == 2  # the probe, then the completions
    assert sorted(probe_tags) == sorted(set(probe_tags)) and len(probe_tags) == sum(probe_calls)  # rewarded once
    assert logged(probed, "lze/completed_groups") == [4.0]
    assert sorted(probe_tags) == sorted(tags)  # every rollout of every group, each with its own extra field
    # the same rows, environment masks and TRL advantages over the whole group, and the same loss
    assert rows_of(probed.updates) == rows_of(at_once.updates) and rows_of(at_once.updates)
    assert logged(probed, "loss") == logged(at_once, "loss")
    # the adaptive budget in three rounds, every group going on: the same again
    rounds, round_calls, round_tags = run(
        tmp_path / "rounds", generation_rounds=[1, 2, 4], learning_zone_threshold=1e-9, **serial
    )
    assert round_calls == [4, 4, 8] and sorted(round_tags) == sorted(tags)
    assert rows_of(rounds.updates) == rows_of(at_once.updates) and logged(rounds, "loss") == logged(at_once, "loss")


class ScriptedToolCaller(UpdateRecorder):
    """
    A trainer whose model turns are scripted, so that TRL's real tool loop (its response parsing, tool calls, tool
    masks and environments) runs on a tiny model: the `j`-th first turn of a prompt `a+b=` calls `add(a, b)` when `j`
    is even and answers `a+b+1` (wrong) when it is odd, the same whichever generation round draws it; after a tool
    response the turn answers the tool's result. `calls_tool(a, j)` can be changed in a subclass.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.drawn, self.model_turns = Counter(), 0

    @staticmethod
    def calls_tool(a: int, j: int) -> bool:
        return j % 2 == 0

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        tok, completions = self.processing_class, []
        for ids in prompt_ids:
            text = tok.decode(ids)
            if "<tool_response>" in text:
                turn = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text)[-1]
            else:
                a, b = map(int, re.findall(r"(\d+)\+(\d+)=", text)[-1])
                j = self.drawn[tuple(ids)]
                self.drawn[tuple(ids)] += 1
                call = f'<tool_call>\n{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}\n</tool_call>'
                turn = call if self.calls_tool(a, j) else str(a + b + 1)
            completions.append(tok(turn)["input_ids"] + [tok.eos_token_id])
        self.model_turns += len(prompt_ids)
        return completions, None


class SometimesCallsTool(ScriptedToolCaller):
    """Calls the tool on the `j`-th rollout of `a+b=` when `(a + j) % 3 == 0`: some groups' first rollouts agree (all
    wrong), some do not."""

    @staticmethod
    def calls_tool(a: int, j: int) -> bool:
        return (a + j) % 3 == 0


class AddingEnv(CountingEnv):
    """An environment that owns the prompt (`a+b=`), the `add` tool and the reward: 1 once its tool has run."""

    def reset(self, question=None, **kwargs):
        self.added = False
        return super().reset(question=question, **kwargs)

    def add(self, a: int, b: int) -> int:
        self.added = True
        return super().add(a, b)

    add.__doc__ = CountingEnv.add.__doc__  # the tool's schema

    def get_reward(self) -> float:
        return float(self.added)


def tool_answer_reward(prompts, completions, **kwargs):
    """1 when the last assistant turn is the sum asked in the prompt."""
    rewards = []
    for prompt, completion in zip(prompts, completions):
        a, b = map(int, re.findall(r"(\d+)\+(\d+)=", prompt[-1]["content"])[-1])
        rewards.append(float(completion[-1]["content"].strip() == str(a + b)))
    return rewards


ROUNDS = {
    "at_once": {},
    "probe": dict(generation_rounds=[2, 4], round_policy="probe", fuse_rounds=False),
    # the adaptive budget in three rounds, every group going on
    "rounds": dict(generation_rounds=[1, 2, 4], learning_zone_threshold=1e-9, fuse_rounds=False),
    # fused rounds: the first step's batch completed in its second call (nothing drawn ahead: it is the last step)
    "fused": dict(generation_rounds=[2, 4], round_policy="probe", fuse_rounds=True),
}


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["tools", "environment"])
def test_a_tool_or_environment_group_completed_over_rounds_reaches_the_update_as_one_generated_at_once(
    tmp_path, agent
):
    def run(name: str):
        tokenizer = tool_tokenizer()
        if agent == "tools":
            data = {"prompt": [[{"role": "user", "content": f"{i}+{i % 7}="}] for i in range(8)]}
            reward, kwargs = tool_answer_reward, dict(tools=[CountingEnv().add])
        else:
            data = {"question": [f"{i}+{i % 7}" for i in range(8)]}
            reward, kwargs = [], dict(environment_factory=AddingEnv)  # the environment's get_reward only
        trainer = make_trainer(
            tmp_path / name,
            reward=reward,
            dataset=Dataset.from_dict(data),
            model=tiny_qwen2(tokenizer, max_position_embeddings=4096),
            tokenizer=tokenizer,
            max_completion_length=256,
            per_device_train_batch_size=16,  # 4 prompts x 4 rollouts, one generation batch per step
            selection_ratio=1.0,
            max_steps=1,
            trainer_class=ScriptedToolCaller,
            trainer_kwargs=kwargs,
            **ROUNDS[name],
        )
        trainer.train()
        return trainer

    runs = {name: run(name) for name in ROUNDS}
    at_once = runs["at_once"]
    rows = rows_of(at_once.updates)
    assert len(rows) == 16 and sum(1 for r in rows if r[3] > 0) == 8  # the 8 tool-calling rollouts lead
    assert any(0 in r[2] for r in rows)  # tool responses are masked out of the loss
    assert logged(at_once, "tools/call_frequency") == [0.5]
    for name in ("probe", "rounds"):
        trainer = runs[name]
        # every rollout generated once (a tool call's second turn included), every group completed
        assert trainer.drawn == at_once.drawn and trainer.model_turns == at_once.model_turns == 16 + 8
        assert logged(trainer, "lze/completed_groups") == [4.0]
        # the same rows, tool masks, rewards (in the advantages) and loss
        assert rows_of(trainer.updates) == rows, name
        assert logged(trainer, "loss") == logged(at_once, "loss"), name
        assert logged(trainer, "tools/call_frequency") == [0.5]
    fused = runs["fused"]  # the first step trains on its batch, as the serial rounds do
    assert rows_of(fused.updates) == rows
    assert logged(fused, "loss") == logged(at_once, "loss") and logged(fused, "lze/completed_groups") == [4.0]


BUDGETS = {
    "probe": dict(generation_rounds=[2, 4], round_policy="probe", selection_ratio=0.25),
    # only groups already mixed go on: every group whose first rollouts agree stops
    "adaptive": dict(generation_rounds=[2, 3, 4], learning_zone_threshold=1.0),
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
        fuse_rounds=False,  # each batch complete in its own step
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
    fresh, probe = logged(trainer, "lze/fresh_rollouts"), logged(trainer, "lze/first_round_rollouts")
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


class AsyncAddingEnv(AddingEnv):
    """The environment's reward read through an async `get_reward`."""

    async def get_reward(self) -> float:
        return float(self.added)


class OtherAddingEnv(AddingEnv):
    """A second environment class, for a `dict` `environment_factory`."""


async def add(a: int, b: int) -> int:
    """
    Adds two numbers.

    Args:
        a: first number
        b: second number
    """
    return a + b


def tool_prompts(n: int = 16) -> dict:
    return {"prompt": [[{"role": "user", "content": f"{i}+{i % 7}="}] for i in range(n)]}


def questions(n: int = 16, **extra) -> dict:
    return {"question": [f"{i}+{i % 7}" for i in range(n)], **extra}


AGENT_VARIANTS = {
    "tools": (tool_prompts(), dict(tools=[CountingEnv().add]), {}),
    "async-tools": (tool_prompts(), dict(tools=[add]), {}),
    "one-tool-iteration": (tool_prompts(), dict(tools=[CountingEnv().add]), dict(max_tool_calling_iterations=1)),
    # the tool's call fits, its response does not: TRL takes the response back and the rollout ends at its call
    "truncated": (tool_prompts(), dict(tools=[CountingEnv().add]), dict(max_completion_length=100)),
    "environment": (questions(), dict(environment_factory=AddingEnv), {}),
    "async-get-reward": (questions(), dict(environment_factory=AsyncAddingEnv), {}),
    "several-environments": (
        questions(environment=["adding", "other"] * 8),
        dict(environment_factory={"adding": AddingEnv, "other": OtherAddingEnv}),
        {},
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("budget", list(BUDGETS))
@pytest.mark.parametrize("variant", list(AGENT_VARIANTS))
def test_every_tool_and_environment_variant_trains_with_the_budget_and_saves_rollouts(tmp_path, variant, budget):
    # TRL's tool loop runs the scripted caller's tool calls in each round; some groups stop after their first round
    data, kwargs, settings = AGENT_VARIANTS[variant]
    settings = {"max_completion_length": 256, **settings}  # config settings
    tokenizer = tool_tokenizer()
    trainer = make_trainer(
        tmp_path,
        reward=tool_answer_reward if "tools" in kwargs else [],  # an environment's reward is its own
        dataset=Dataset.from_dict(data),
        model=tiny_qwen2(tokenizer, max_position_embeddings=4096),
        tokenizer=tokenizer,
        max_steps=3,  # fused rounds: every step completes its batch (the first in R calls)
        fuse_rounds=True,
        per_device_train_batch_size=16,
        trainer_class=SometimesCallsTool,
        trainer_kwargs=kwargs,
        **settings,
        **BUDGETS[budget],
    )
    trainer.train()
    fresh, completed = logged(trainer, "lze/fresh_rollouts"), logged(trainer, "lze/completed_groups")
    assert trainer.state.global_step == 3 and len(fresh) == 3 and completed
    # the first step starts the batches in flight (R calls), then one call a step; nothing is drawn past the run's
    # 3 batches, whose rollouts are fewer than 3 x 16 (some groups stopped)
    R = len(BUDGETS[budget]["generation_rounds"])
    assert logged(trainer, "lze/generation_calls") == [float(R), 1.0, 1.0] and len(completed) == 3
    assert sum(fresh) < 3 * 16
    if variant == "truncated":  # no tool response fitted: no second turn
        assert trainer.model_turns == sum(fresh)
    else:  # tool calls took a second turn
        assert trainer.model_turns > sum(fresh)
    calls = logged(trainer, "tools/call_frequency")  # the last step's few rollouts may call none
    assert calls and calls[0] > 0
