"""A GRPOTrainer user cannot tell LZEGRPOTrainer apart except by the savings: inputs, reward kwargs, logs, losses."""

from __future__ import annotations

import zlib

import pytest
import torch
import transformers
from datasets import Dataset
from packaging.version import Version
from testing_utils import (
    always_right,
    count_grad_rows,
    logged,
    make_trainer,
    prompt_dataset,
    prompt_number,
    sided_reward,
    text_reward,
    tiny_config,
)
from trl import GRPOConfig, GRPOTrainer

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl import LZEGRPOConfig, LZEGRPOTrainer, LZEWarning


pytestmark = pytest.mark.slow

# The keyword arguments TRL itself passes to every reward function, besides the dataset's columns.
TRL_REWARD_KWARGS = {"completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
# Keys whose values are wall-clock measurements: present in both, equal only by chance.
TIMING_KEYS = {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second"}


def recording(trainer_cls):
    """A subclass of `trainer_cls` recording what user code sees: the inputs and outputs of the generation hook."""

    class Recording(trainer_cls):
        def _generate_and_score_completions(self, inputs):
            self.seen_inputs.append([dict(row) for row in inputs])
            output = super()._generate_and_score_completions(inputs)
            self.seen_outputs.append({k: v.clone() if torch.is_tensor(v) else v for k, v in output.items()})
            return output

    Recording.__name__ = trainer_cls.__name__
    return Recording


# The drop-in runs: `TINY_ARGS` with 3 steps at a higher learning rate, for TRL's `GRPOConfig` and ours alike.
BASE = dict(max_steps=3, learning_rate=1e-2)


def tiny_moe(tokenizer):
    """A tiny Qwen3-MoE: its router's auxiliary loss makes TRL log `aux_loss`."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        output_router_logits=True,
    )
    torch.manual_seed(0)
    return Qwen3MoeForCausalLM(config)


def run(tmp_path, trainer_cls, args_cls, reward, dataset=None, model_fn=tiny_qwen2, **extra):
    calls = []

    def reward_func(prompts, completions, **kwargs):
        calls.append({"prompts": list(prompts), "completions": list(completions), "kwargs": dict(kwargs)})
        return reward(completions)

    reward_func.__name__ = reward.__name__
    tokenizer = char_tokenizer()
    cls = recording(trainer_cls)
    trainer = cls(
        model=model_fn(tokenizer),
        reward_funcs=reward_func,
        args=tiny_config(tmp_path / trainer_cls.__name__, config_class=args_cls, **{**BASE, **extra}),
        train_dataset=prompt_dataset(8) if dataset is None else dataset,
        processing_class=tokenizer,
    )
    trainer.seen_inputs, trainer.seen_outputs = [], []
    trainer.train()
    trainer.reward_calls = calls
    return trainer


def test_selector_none_is_field_by_field_grpo_trainer(tmp_path):
    dataset = prompt_dataset(8).add_column("level", list(range(8)))
    grpo = run(tmp_path / "grpo", GRPOTrainer, GRPOConfig, text_reward, dataset=dataset)
    ours = run(tmp_path / "lze", LZEGRPOTrainer, LZEGRPOConfig, text_reward, dataset=dataset, selector="none")

    # What the generation hook (a subclass's override) sees: the same rows, the dataset's columns only.
    assert ours.seen_inputs == grpo.seen_inputs
    assert all(set(row) == {"prompt", "level"} for batch in ours.seen_inputs for row in batch)
    # What it returns: every field, bit for bit.
    assert len(ours.seen_outputs) == len(grpo.seen_outputs)
    for theirs, mine in zip(grpo.seen_outputs, ours.seen_outputs):
        assert set(mine) == set(theirs)
        for key, value in theirs.items():
            if torch.is_tensor(value):
                torch.testing.assert_close(mine[key], value, rtol=0, atol=0, msg=key)
            else:
                assert mine[key] == value, key
    # What the reward function sees: same prompts, completions and kwargs (the dataset's `level`, nothing added).
    assert len(ours.reward_calls) == len(grpo.reward_calls)
    for theirs, mine in zip(grpo.reward_calls, ours.reward_calls):
        assert mine["prompts"] == theirs["prompts"] and mine["completions"] == theirs["completions"]
        assert set(mine["kwargs"]) == set(theirs["kwargs"])
        assert "level" in mine["kwargs"]
        assert mine["kwargs"]["level"] == theirs["kwargs"]["level"]
    # The logs: every key stock TRL writes, with its value (LZE adds only its own `lze/` keys).
    assert len(ours.state.log_history) == len(grpo.state.log_history)
    for theirs, mine in zip(grpo.state.log_history, ours.state.log_history):
        assert set(theirs) <= set(mine)
        assert all(k.startswith("lze/") for k in set(mine) - set(theirs))
        assert {k: v for k, v in mine.items() if k in theirs and k not in TIMING_KEYS} == {
            k: v for k, v in theirs.items() if k not in TIMING_KEYS
        }
    for a, b in zip(grpo.model.parameters(), ours.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_lze_adds_nothing_to_the_rows_reward_functions_and_hooks_see(tmp_path):
    dataset = prompt_dataset(8).add_column("level", list(range(8)))
    ours = run(tmp_path, LZEGRPOTrainer, LZEGRPOConfig, text_reward, dataset=dataset, selector="lze")
    columns = {"prompt", "level"}
    assert ours.reward_calls and all(set(call["kwargs"]) >= {"level"} for call in ours.reward_calls)
    assert all(columns >= set(call["kwargs"]) - TRL_REWARD_KWARGS for call in ours.reward_calls)
    assert all(set(row) == columns for batch in ours.seen_inputs for row in batch)
    # the prompts' ids still reached the selection: the state holds exactly the prompts rolled out (3 steps x 2
    # groups), keyed by their row index
    rolled_out = {prompt_number(p) for call in ours.reward_calls for p in call["prompts"]}
    assert len(rolled_out) == 3 * 2
    assert sorted(ours.lze.prompts.table()["prompt_key"].tolist()) == sorted(rolled_out)


@pytest.mark.parametrize(
    "extra",
    [
        dict(entropy_coef=0.01),
        dict(entropy_coef=0.05, use_adaptive_entropy=True, entropy_coef_delta=0.01, entropy_coef_min=0.0),
        dict(loss_type="cispo"),
        dict(model_fn=tiny_moe),
    ],
    ids=["entropy-bonus", "adaptive-entropy", "cispo", "moe-aux-loss"],
)
def test_a_run_that_keeps_no_group_keeps_every_log_key(tmp_path, extra):
    if "model_fn" in extra and Version(transformers.__version__) < Version("5.18"):
        # stock GRPOTrainer fails too: transformers 5.17's Qwen3-MoE adds its router loss during generation with a
        # mask of another size (seen with TRL 1.12, 1.13 and 1.16; 5.18 fixed it)
        pytest.skip("transformers < 5.18 cannot generate with a Qwen3-MoE that outputs router logits")
    # Every group is all-correct: LZE keeps no group, so every micro-step runs on zero-weight rows only.
    grpo = run(tmp_path / "grpo", GRPOTrainer, GRPOConfig, always_right, **extra)
    ours = run(tmp_path / "lze", LZEGRPOTrainer, LZEGRPOConfig, always_right, **extra)
    assert logged(ours, "lze/selected_frac") == [0.0] * 3
    assert logged(ours, "lze/update_tokens") == [0] * 3
    stock_rows = [e for e in grpo.state.log_history if "loss" in e and "train_runtime" not in e]
    our_rows = [e for e in ours.state.log_history if "loss" in e and "train_runtime" not in e]
    assert len(our_rows) == len(stock_rows) == 3
    if "model_fn" in extra:
        assert all("aux_loss" in row for row in stock_rows)
    for theirs, mine in zip(stock_rows, our_rows):
        assert set(theirs) <= set(mine), sorted(set(theirs) - set(mine))
        for key in ("policy_loss", "clip_ratio/region_mean", "cispo_clip_ratio"):
            if key in theirs:
                assert mine[key] == 0.0, key
        if "model_fn" not in extra:  # a router's auxiliary loss is not a policy loss: it is not zero
            assert mine["loss"] == 0.0


def test_lze_still_updates_on_non_binary_rewards(tmp_path):
    # A length-like reward, always above pass_threshold: every group is "all-correct" by the threshold, yet its
    # rewards differ within groups, so GRPO learns from it. LZE must too (it used to remove every group, silently).
    def length_reward(completions, **kwargs):
        return [0.5 + 0.05 * len(c) + 0.01 * (zlib.crc32(c.encode()) % 3) for c in completions]

    model = tiny_qwen2(char_tokenizer())
    counter = count_grad_rows(model)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = make_trainer(tmp_path, reward=length_reward, model=model, max_steps=3)
    with pytest.warns(LZEWarning, match="no prompt group was in the learning zone"):
        trainer.train()
    # Every group is all-correct by the threshold (pass rate 1, hence the warning), yet its rewards vary: it is live
    # (not dead), and each step keeps its quota, 1 of its 2 groups, 4 rows.
    assert logged(trainer, "lze/dead_frac") == [0.0] * 3
    assert logged(trainer, "lze/pass_rate_mean") == [1.0] * 3
    assert logged(trainer, "lze/selected_frac") == [0.5] * 3
    assert counter["rows"] == 3 * 1 * 4
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_run_that_cannot_learn_says_so_once(tmp_path):
    trainer = make_trainer(tmp_path, reward=always_right, max_steps=5)
    with pytest.warns(LZEWarning) as record:
        trainer.train()
    messages = [str(w.message) for w in record if "learning zone" in str(w.message)]
    assert len(messages) == 1
    assert "pass_threshold=0.5" in messages[0] and "correctness_reward" in messages[0]
    assert "'always_right'" in messages[0] and "the constant 1" in messages[0]
    assert logged(trainer, "lze/dead_frac") == [1.0] * 5


def test_rollout_func_runs_with_lze(tmp_path):
    # TRL's rollout_func replaces generation; LZE keys its state by dataset row and needs nothing from it.
    seen = []

    def rollout_func(prompts, trainer):
        seen.append(list(prompts))
        tok = trainer.processing_class
        prompt_ids = [tok(p)["input_ids"] for p in prompts]
        completion_ids = [[tok.convert_tokens_to_ids(str(i % 10)), tok.eos_token_id] for i in range(len(prompts))]
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": [[0.0, 0.0]] * len(prompts)}

    def digit_reward(completions, **kwargs):
        return [float(c[:1] in "02468") for c in completions]

    trainer = make_trainer(tmp_path, reward=digit_reward, max_steps=2, trainer_kwargs=dict(rollout_func=rollout_func))
    trainer.train()
    # one rollout_func call per step, for its 2 prompts x 4 generations; the per-prompt table keyed them by dataset row
    assert [len(prompts) for prompts in seen] == [8, 8]
    assert sorted(trainer.lze.prompts.table()["prompt_key"].tolist()) == sorted(
        {prompt_number(p) for ps in seen for p in ps}
    )


def test_a_dataset_without_prompt_column_is_refused_only_without_an_environment(tmp_path):
    with pytest.raises(ValueError, match="no `prompt` column.*environment_factory.*rename_column"):
        make_trainer(tmp_path, reward=text_reward, dataset=Dataset.from_dict({"question": ["1+1="] * 8}))


def chat_reward(completions, **kwargs):
    return text_reward([c[-1]["content"] if isinstance(c, list) else c for c in completions])


class CountingEnv:
    """An environment that owns the prompts: `reset` returns the question of its example."""

    def reset(self, question=None, **kwargs):
        return f"{question}="

    def add(self, a: int, b: int) -> int:
        """
        Adds two numbers.

        Args:
            a: first number
            b: second number
        """
        return a + b


def tool_tokenizer():
    from trl.chat_template_utils import qwen2_5_chat_template

    charset = "".join(sorted(set(qwen2_5_chat_template) | set("0123456789+-*/=()., abcdefghijklmnopqrstuvwxyz")))
    tokenizer = char_tokenizer(charset.replace("\n", "") + "\n\"{}[]<>|_'")
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


@pytest.mark.parametrize("iterable", [False, True], ids=["map-style", "iterable"])
def test_environment_datasets_without_prompt_column(tmp_path, iterable, recwarn):
    # TRL trains on a dataset without `prompt` when an environment_factory owns the prompts. A map-style dataset still
    # gives LZE a stable identity (the row index); an iterable one does not: plain GRPO, with one warning.
    dataset = Dataset.from_dict({"question": [f"{i}+{i % 7}" for i in range(16)]})
    if iterable:
        dataset = dataset.to_iterable_dataset()
    tokenizer = tool_tokenizer()
    model = tiny_qwen2(tokenizer, max_position_embeddings=4096)
    trainer = make_trainer(
        tmp_path,
        reward=chat_reward,
        dataset=dataset,
        model=model,
        tokenizer=tokenizer,
        max_steps=2,
        max_completion_length=4,
        trainer_kwargs=dict(environment_factory=CountingEnv),
    )
    trainer.train()
    fallback = [w for w in recwarn if "stable identity" in str(w.message)]
    if iterable:
        assert len(fallback) == 1 and "plain GRPO" in str(fallback[0].message)
        assert not trainer.lze_enabled and len(trainer.lze.prompts) == 0  # its config keeps the selector it was given
    else:
        assert not fallback
        assert trainer.args.selector == "lze"
        assert len(trainer.lze.prompts) == 2 * 2  # 2 steps x 2 groups, different rows of the dataset's first epoch
    assert trainer.state.global_step == 2


def test_shadow_mode_trains_bit_for_bit_as_grpo_trainer_and_logs_what_lze_would_save(tmp_path):
    grpo = run(tmp_path / "grpo", GRPOTrainer, GRPOConfig, text_reward)
    shadow = run(tmp_path / "shadow", LZEGRPOTrainer, LZEGRPOConfig, text_reward, shadow=True)
    lze = run(tmp_path / "lze", LZEGRPOTrainer, LZEGRPOConfig, text_reward)
    for theirs, mine in zip(grpo.seen_outputs, shadow.seen_outputs, strict=True):
        for key, value in theirs.items():
            if torch.is_tensor(value):
                torch.testing.assert_close(mine[key], value, rtol=0, atol=0, msg=key)
    for a, b in zip(grpo.model.parameters(), shadow.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert all(w == 1.0 for w in shadow.selection_log.to_pandas()["weight"])  # the update took every group
    # what LZE would have kept on the shadow run's batches: the selector's choice on the batch GRPO trained on, the
    # same as an LZE run's on its first batch (the same start, so the same batch)
    logs = [e for e in shadow.state.log_history if "lze/shadow_selected_frac" in e]
    first_lze = next(e for e in lze.state.log_history if "lze/selected_frac" in e)
    assert logs[0]["lze/shadow_selected_frac"] == first_lze["lze/selected_frac"] < 1
    assert logs[0]["lze/shadow_update_rows"] == first_lze["lze/update_rows"]
    assert logs[0]["lze/shadow_update_tokens"] == first_lze["lze/update_tokens"]
    for e in logs:
        assert e["lze/shadow_update_tokens"] < e["lze/grpo_update_tokens"] == e["lze/update_tokens"]
        for side in ("solved", "unsolved"):  # the prunable groups, and the live ones among them
            assert 0 <= e[f"lze/shadow_prunable_live_{side}"] <= e[f"lze/shadow_prunable_{side}"]
    assert logs[0]["lze/shadow_prunable_unsolved"] == 0  # a first visit has no history


def test_shadow_mode_refuses_what_changes_the_rollouts(tmp_path):
    with pytest.raises(ValueError, match="shadow=True trains exactly as GRPOTrainer.*prune_unsolved"):
        tiny_config(tmp_path, shadow=True, prune_unsolved=True)


def test_shadow_mode_counts_the_groups_pruning_would_have_skipped_and_the_live_ones_among_them(tmp_path):
    # 6 prompts, 2 a step: each revisited every 3 steps; 0 and 3 always solved, 1 and 4 never, 2 and 5 mixed
    trainer = make_trainer(tmp_path, reward=sided_reward, dataset=prompt_dataset(6), max_steps=9, shadow=True,
                           prune_solved_after=1)  # fmt: skip
    trainer.train()
    log = trainer.selection_log.to_pandas().sort_values("batch", kind="stable")
    expected = {"solved": [0, 0], "unsolved": [0, 0]}
    last: dict[int, float] = {}
    for key, p, live in zip(log["prompt_key"], log["pass_rate"], log["live"]):
        side = {1.0: "solved", 0.0: "unsolved"}.get(last.get(key))
        if side is not None:  # its last group was dead: pruning (after 1 observation, each side) would skip this one
            expected[side][0] += 1
            expected[side][1] += int(live)
        last[key] = p
    for side, (prunable, live) in expected.items():
        assert sum(logged(trainer, f"lze/shadow_prunable_{side}")) == prunable >= 4  # 2 prompts x 2 revisits
        assert sum(logged(trainer, f"lze/shadow_prunable_live_{side}")) == live
    assert trainer.lze.position.groups_skipped(6) == 0  # nothing was skipped: every prompt was generated
