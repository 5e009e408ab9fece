"""The workload of the GPU timing script (`benchmarks/gpu/run.py`), built in code: nothing comes from the Hub.

- [`Size`]: the model's shape and the run's sizes (`SIZES["h100"]`: Qwen2.5-1.5B's shape in bf16 on the GPU;
  `SIZES["tiny"]`: a few-layer model on the CPU, for the tests).
- [`full_vocab_tokenizer`]: the project's character tokenizer (`lze_examples.tiny`) grown to the model's vocabulary, so
  that every id the model samples decodes.
- [`EOSHazard`]: a forward hook on the LM head that, while generating, forces the EOS token at each sequence's decode
  step with a fixed probability, so completion lengths are geometric (mean ~1/hazard) and truncated at
  `max_completion_length`, as real ones vary; it works with the KV cache and with continuous batching (every position
  whose logits the LM head returns is decided independently).
- [`prompt_rows`] and [`pass_fail_reward`]: prompts of random length, each with a fixed pass rate (a mix of 0, 1 and
  rates in between), and a reward that passes each rollout with its prompt's rate, so that groups come out dead,
  solved or mixed and LZE has real decisions to make.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from lze_examples.tiny import DEFAULT_CHARSET, SPECIAL_TOKENS


@dataclass(frozen=True)
class Size:
    """
    The model's shape and the run's sizes.

    Attributes:
        hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size, vocab_size, rope_theta:
            The Qwen2 shape (tied embeddings).
        device (`str`): `"cuda"` or `"cpu"`; `dtype` (`str`): the model's dtype, `"bfloat16"` or `"float32"`.
        prompts_per_step (`int`): prompts of a generation batch (one optimizer step).
        num_generations (`int`): GRPO's group size (the half-group arm uses half).
        micro_batch (`int`): `per_device_train_batch_size`; the optimizer step accumulates the generation batch.
        max_completion_length (`int`): the truncation of completions.
        hazard (`float`): the probability that a decode step ends its sequence (mean length about 1 / hazard).
        prompt_tokens (`tuple[int, int]`): the shortest and longest prompt, in tokens.
        warmup_steps (`int`): each arm's first steps, not counted.
        timed_steps (`int`): the steps counted after them.
        budget_s (`float`): no arm starts that is predicted to end after this many seconds of the run.
        deadline_s (`float`): an arm running past this many seconds of the run stops after its current step.
    """

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    rope_theta: float
    device: str
    dtype: str
    prompts_per_step: int
    num_generations: int
    micro_batch: int
    max_completion_length: int
    hazard: float
    prompt_tokens: tuple[int, int]
    warmup_steps: int
    timed_steps: int
    budget_s: float
    deadline_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


SIZES = {
    # Qwen2.5-1.5B's shape (random weights) on one H100/H200: 16 prompts x 8 rollouts a step, completions up to 1,024
    # tokens (mean ~290), micro-batches of 16 rows (8 per optimizer step for GRPO). One timed step per arm: a step
    # there is one to three generation calls of up to 1,024 decode steps each, and the whole run must fit one call of
    # 8 minutes (the budget leaves room for the install, the imports and the last step).
    "h100": Size(
        name="h100",
        hidden_size=1536,
        num_layers=28,
        num_heads=12,
        num_kv_heads=2,
        intermediate_size=8960,
        vocab_size=151936,
        rope_theta=1e6,
        device="cuda",
        dtype="bfloat16",
        prompts_per_step=16,
        num_generations=8,
        micro_batch=16,
        max_completion_length=1024,
        hazard=1 / 300,
        prompt_tokens=(64, 192),
        warmup_steps=1,
        timed_steps=1,
        budget_s=330.0,
        deadline_s=390.0,
    ),
    # The same script on a 2-core CPU in well under a minute (the tests): 2 layers, completions up to 24 tokens.
    "tiny": Size(
        name="tiny",
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=128,
        vocab_size=384,
        rope_theta=1e6,
        device="cpu",
        dtype="float32",
        prompts_per_step=8,
        num_generations=8,
        micro_batch=16,
        max_completion_length=24,
        hazard=1 / 8,
        prompt_tokens=(6, 14),
        warmup_steps=1,
        timed_steps=1,
        budget_s=300.0,
        deadline_s=400.0,
        # continuous batching sized to the tiny model (its defaults size the cache from memory: 15 s a call on a CPU)
        extra={"continuous_batching_config": {"num_blocks": 64, "max_batch_tokens": 512}},
    ),
}


def full_vocab_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """
    The character tokenizer of `lze_examples.tiny` (pad, eos, unk, then one token per character) with filler tokens
    `<t{i}>` up to `vocab_size`, so that any id a model of that vocabulary samples decodes to text.

    Args:
        vocab_size (`int`):
            The model's vocabulary size; at least the character tokenizer's.

    Returns:
        `PreTrainedTokenizerFast`: left-padding, with `pad_token` and `eos_token` set; `len(tokenizer) == vocab_size`.
    """
    chars = list(dict.fromkeys(DEFAULT_CHARSET))
    base = [*SPECIAL_TOKENS, *chars]
    if vocab_size < len(base):
        raise ValueError(f"vocab_size={vocab_size} is smaller than the character tokenizer's {len(base)} tokens.")
    tokens = base + [f"<t{i}>" for i in range(vocab_size - len(base))]
    tokenizer = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", padding_side="left"
    )


def build_model(size: Size, tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 of `size`'s shape, created on `size.device` in `size.dtype` (no CPU init of a
    large model), its generation config ending at the tokenizer's EOS."""
    config = Qwen2Config(
        vocab_size=size.vocab_size,
        hidden_size=size.hidden_size,
        intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_layers,
        num_attention_heads=size.num_heads,
        num_key_value_heads=size.num_kv_heads,
        max_position_embeddings=max(4096, size.prompt_tokens[1] + size.max_completion_length),
        rope_theta=size.rope_theta,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    dtype = getattr(torch, size.dtype)
    with torch.random.fork_rng(devices=[]), torch.device(size.device):
        torch.manual_seed(seed)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            model = Qwen2ForCausalLM(config)
        finally:
            torch.set_default_dtype(previous)
    model.tie_weights()  # transformers 5.0 leaves a model built from its config untied (5.24 ties it)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


class EOSHazard:
    """
    A forward hook on `model`'s LM head that, while `active`, replaces the logits of each position it returns, with
    probability `hazard`, by logits that put all the mass on `eos_token_id`. The generated sequence then ends at each
    decode step with that probability: lengths are geometric with mean about `1 / hazard`, truncated by the trainer's
    `max_completion_length`. Inactive (the training forwards), it changes nothing.
    """

    def __init__(self, model: torch.nn.Module, eos_token_id: int, hazard: float) -> None:
        self.eos_token_id, self.hazard, self.active = eos_token_id, hazard, False
        self.handle = model.get_output_embeddings().register_forward_hook(self._hook)

    def _hook(self, module: torch.nn.Module, inputs: Any, logits: torch.Tensor) -> torch.Tensor | None:
        if not self.active:
            return None
        # Device-side only (no host copy, no sync): safe inside the CUDA graphs that continuous batching may capture.
        stop = torch.rand(logits.shape[:-1], device=logits.device) < self.hazard
        is_eos = torch.arange(logits.shape[-1], device=logits.device) == self.eos_token_id
        eos_only = torch.where(is_eos, 0.0, torch.finfo(logits.dtype).min).to(logits.dtype)
        return torch.where(stop.unsqueeze(-1), eos_only, logits)

    def remove(self) -> None:
        self.handle.remove()


def prompt_rows(size: Size, num_prompts: int, seed: int = 0) -> dict[str, list]:
    """
    `num_prompts` prompts of random characters, `size.prompt_tokens` long (one token a character), each with its fixed
    pass rate: 30% of the prompts 0 (dead groups), 20% 1 (solved), the rest uniform in [0.05, 0.95].

    Returns:
        `dict[str, list]`: the columns `prompt` and `pass_rate`.
    """
    rng = np.random.default_rng(seed)
    chars = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 +-*/=?"))
    low, high = size.prompt_tokens
    prompts = ["".join(rng.choice(chars, size=int(n))) for n in rng.integers(low, high + 1, size=num_prompts)]
    kind = rng.choice(3, size=num_prompts, p=[0.3, 0.2, 0.5])
    rates = np.where(kind == 0, 0.0, np.where(kind == 1, 1.0, rng.uniform(0.05, 0.95, size=num_prompts)))
    return {"prompt": prompts, "pass_rate": rates.tolist()}


def pass_fail_reward(seed: int = 0):
    """A reward function (named `pass_fail`) that passes each rollout (1.0, else 0.0) with its prompt's `pass_rate`
    (a dataset column TRL hands over), drawn from its own generator seeded by `seed`."""
    rng = np.random.default_rng(seed)

    def pass_fail(completions: list, pass_rate: list[float], **kwargs: Any) -> list[float]:
        return (rng.random(len(completions)) < np.asarray(pass_rate)).astype(float).tolist()

    return pass_fail
