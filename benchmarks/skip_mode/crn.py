"""Common random numbers for TRL's transformers generation: each rollout's sampling noise is a function of the run's
seed, the step, its prompt and its index in the group, whatever else the generation call holds.

Two arms that generate the same prompt at the same step with the same weights then draw the same rollouts, so that
their paired difference measures what they do differently, not the sampling's luck (BENCHMARKS.md section 16). A row
is sampled by the Gumbel-max trick: the next token is `argmax(logits / temperature + Gumbel noise)`, which is a draw
from `softmax(logits / temperature)`, with the noise of each row drawn from a generator of its own, seeded by
`(seed, step, prompt, rollout)`: one vocabulary-sized draw a token, in order. Only plain temperature sampling is
reproduced (TRL's `top_p=1`, `top_k=0`, no `min_p`, no repetition penalty): anything else is refused.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor, LogitsProcessorList


def row_seed(seed: int, step: int, prompt: int, rollout: int) -> int:
    """The noise seed of rollout `rollout` of prompt `prompt` at step `step` of a run of seed `seed`."""
    return int(np.random.SeedSequence([seed, step, prompt, rollout]).generate_state(1, dtype=np.uint64)[0] >> 1)


class GumbelNoise(LogitsProcessor):
    """Scores `logits / temperature + g`, `g` standard Gumbel noise drawn for each row from its own generator (seeded
    by `seeds`, one a row), one vocabulary-sized draw a call: greedy decoding of these scores samples each row at
    `temperature` with its own random numbers."""

    def __init__(self, seeds: list[int], temperature: float) -> None:
        self.generators = [torch.Generator().manual_seed(s) for s in seeds]
        self.temperature = temperature

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[0] != len(self.generators):
            raise RuntimeError(f"GumbelNoise has {len(self.generators)} rows' generators for {scores.shape[0]} rows.")
        vocab = scores.shape[1]
        u = torch.stack([torch.rand(vocab, generator=g, dtype=torch.float64) for g in self.generators])
        gumbel = -torch.log(-torch.log(u.clamp(1e-12, 1 - 1e-12)))
        return scores.float() / self.temperature + gumbel.to(scores.device, torch.float32)


def check_plain_sampling(config: Any) -> None:
    """Refuses a generation config that samples otherwise than at a temperature (what [`GumbelNoise`] reproduces)."""
    plain = (
        (config.top_p in (None, 1.0))
        and (config.top_k in (None, 0))
        and config.min_p is None
        and (config.repetition_penalty in (None, 1.0))
    )
    if not plain:
        raise ValueError(
            "Common random numbers reproduce plain temperature sampling only: top_p=1, top_k=0, min_p=None, "
            f"repetition_penalty=1; got {config.top_p}, {config.top_k}, {config.min_p}, {config.repetition_penalty}."
        )


@contextlib.contextmanager
def seeded_sampling(model: Any, seeds: list[int]) -> Iterator[None]:
    """While it lasts, `model.generate` decodes greedily the [`GumbelNoise`] scores of `seeds` (one a row) at the
    temperature of the `generation_config` it is called with."""
    original = model.generate

    def generate(*args, **kwargs):
        config = copy.deepcopy(kwargs.pop("generation_config"))
        check_plain_sampling(config)
        temperature = config.temperature or 1.0
        config.do_sample, config.temperature, config.top_p, config.top_k = False, None, None, None
        processors = LogitsProcessorList([*kwargs.pop("logits_processor", []), GumbelNoise(seeds, temperature)])
        return original(*args, generation_config=config, logits_processor=processors, **kwargs)

    model.generate = generate
    try:
        yield
    finally:
        del model.generate


class CommonRandomNumbers:
    """
    A mixin ahead of the study's trainer: TRL's `_generate` in training draws each rollout's noise from
    `(crn_seed, global_step, prompt index, rollout index within its prompt's group)`; evaluation and served calls are
    left alone. `crn_prompts` maps a prompt (its JSON) to its index in the training pool.
    """

    crn_seed: int = 0
    crn_prompts: dict[str, int] = {}

    def _generate(self, prompts):
        if not self.model.training:
            return super()._generate(prompts)
        seen: dict[int, int] = {}
        seeds = []
        for prompt in prompts:
            index = self.crn_prompts[json.dumps(prompt, sort_keys=True)]
            seeds.append(row_seed(self.crn_seed, self.state.global_step, index, seen.get(index, 0)))
            seen[index] = seen.get(index, 0) + 1
        with seeded_sampling(self.model, seeds):
            return super()._generate(prompts)


def with_common_random_numbers(trainer: Any, seed: int, pool: Any) -> Any:
    """`trainer` (built) generating with common random numbers: its class gains [`CommonRandomNumbers`] in front, with
    the run's `seed` and the training `pool`'s prompts."""
    trainer.__class__ = type(f"CRN{type(trainer).__name__}", (CommonRandomNumbers, type(trainer)), {})
    trainer.crn_seed = seed
    trainer.crn_prompts = {json.dumps(p, sort_keys=True): i for i, p in enumerate(pool["prompt"])}
    return trainer
