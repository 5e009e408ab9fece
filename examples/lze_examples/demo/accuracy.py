"""Accuracy of a policy on an embedded task: batched greedy decoding graded by the task's verifier.

GRPO's `trainer.evaluate()` reports losses, not accuracies; [`AccuracyCallback`] evaluates the accuracy every few
optimizer steps instead and records it against the training wall-clock and FLOPs spent so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from transformers import TrainerCallback

from ..evaluation.generation import generate_transformers
from ..tasks.arithmetic import arithmetic_reward


def _generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    batch_size: int,
    num_samples: int = 1,
    temperature: float | None = None,
    seed: int = 0,
) -> list[str]:
    """
    Completions of `prompts` (each repeated `num_samples` times in a row), greedy when `temperature` is None: the
    generation routine of `lze-trl eval` ([`~lze_examples.evaluation.generate_transformers`]), with the prompts batched
    in their order (the sampled completions of a seed then stay those of the demo's measurements).
    """
    completions = generate_transformers(
        model,
        tokenizer,
        prompts,
        add_special_tokens=False,
        num_samples=num_samples,
        temperature=0.0 if temperature is None else temperature,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        seed=seed,
        sort_by_length=False,
    )
    return [completion.text for per_prompt in completions for completion in per_prompt]


def greedy_accuracy(
    model: Any,
    tokenizer: Any,
    dataset: Any,
    *,
    max_new_tokens: int = 8,
    batch_size: int = 512,
) -> dict[str, Any]:
    """
    Greedy-decoding accuracy of `model` on an arithmetic split, graded by [`arithmetic_reward`].

    Args:
        model (`PreTrainedModel`):
            Causal LM; its train/eval mode is restored afterwards.
        tokenizer (`PreTrainedTokenizerFast`):
            Left-padding tokenizer with `pad_token` and `eos_token`.
        dataset (`datasets.Dataset` or `dict`):
            Columns `prompt`, `answer` and optionally `difficulty`.
        max_new_tokens (`int`, *optional*, defaults to `8`):
            Longest completion.
        batch_size (`int`, *optional*, defaults to `512`):
            Prompts per `generate` call.

    Returns:
        `dict[str, Any]`: `accuracy` (mean over prompts), `num_prompts`, and `per_level` (`{level: accuracy}`) when the
        split has a `difficulty` column.
    """
    prompts, answers = list(dataset["prompt"]), list(dataset["answer"])
    completions = _generate(model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size)
    correct = np.asarray(arithmetic_reward(completions, answers), dtype=np.float64)
    result: dict[str, Any] = {"accuracy": float(correct.mean()) if len(correct) else 0.0, "num_prompts": len(prompts)}
    if "difficulty" in getattr(dataset, "column_names", dataset):
        levels = np.asarray(list(dataset["difficulty"]))
        result["per_level"] = {int(lv): float(correct[levels == lv].mean()) for lv in np.unique(levels)}
    return result


def sampled_pass_rates(
    model: Any,
    tokenizer: Any,
    dataset: Any,
    *,
    num_samples: int = 8,
    temperature: float = 1.0,
    max_new_tokens: int = 8,
    batch_size: int = 128,
    seed: int = 0,
) -> np.ndarray:
    """
    Pass rate of each prompt over `num_samples` sampled completions (the signal GRPO's groups see).

    Args:
        model (`PreTrainedModel`):
            Causal LM.
        tokenizer (`PreTrainedTokenizerFast`):
            Left-padding tokenizer.
        dataset (`datasets.Dataset` or `dict`):
            Columns `prompt` and `answer`.
        num_samples (`int`, *optional*, defaults to `8`):
            Completions per prompt.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature (top-k and top-p off, as in GRPO's defaults).
        max_new_tokens (`int`, *optional*, defaults to `8`):
            Longest completion.
        batch_size (`int`, *optional*, defaults to `128`):
            Prompts per `generate` call.
        seed (`int`, *optional*, defaults to `0`):
            Sampling seed (the global torch RNG is left untouched).

    Returns:
        `np.ndarray`: pass rates of shape `(len(dataset),)`, multiples of `1 / num_samples`.
    """
    prompts, answers = list(dataset["prompt"]), list(dataset["answer"])
    completions = _generate(
        model,
        tokenizer,
        prompts,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        num_samples=num_samples,
        temperature=temperature,
        seed=seed,
    )
    rewards = arithmetic_reward(completions, [a for a in answers for _ in range(num_samples)])
    return np.asarray(rewards, dtype=np.float64).reshape(len(prompts), num_samples).mean(axis=1)


def pass_rate_histogram(pass_rates: np.ndarray, num_samples: int) -> dict[str, Any]:
    """
    Counts of prompts at each pass rate `j / num_samples`, plus the dead (never / always solved) fractions.

    Args:
        pass_rates (`np.ndarray`):
            Per-prompt pass rates.
        num_samples (`int`):
            Rollouts per prompt (the histogram has `num_samples + 1` bins).

    Returns:
        `dict[str, Any]`: `bins` (the pass rates), `counts`, `never_solved_frac`, `always_solved_frac`,
        `learning_zone_frac` (strictly between 0 and 1) and `mean`.
    """
    p = np.asarray(pass_rates, dtype=np.float64)
    k = np.rint(p * num_samples).astype(int)
    counts = np.bincount(k, minlength=num_samples + 1)
    n = max(len(p), 1)
    return {
        "bins": [j / num_samples for j in range(num_samples + 1)],
        "counts": counts.tolist(),
        "never_solved_frac": float((k == 0).sum() / n),
        "always_solved_frac": float((k == num_samples).sum() / n),
        "learning_zone_frac": float(((k > 0) & (k < num_samples)).sum() / n),
        "mean": float(p.mean()) if len(p) else 0.0,
    }


class AccuracyCallback(TrainerCallback):
    """
    Evaluates accuracy every `eval_steps` optimizer steps (and before the first and after the last one).

    Each evaluation appends one record to `self.records`: `step`, `train_seconds` (wall-clock spent training so far,
    evaluations excluded), `train_cpu_seconds` (process CPU time, same exclusion), whatever `counters()` returns (e.g.
    cumulative tokens and FLOPs) and one `<split>_accuracy` per evaluated split.

    Args:
        evaluate (`Callable[[model], dict[str, float]]`):
            Returns `{split_name: accuracy}` for the current model.
        eval_steps (`int`):
            Evaluate every this many optimizer steps.
        counters (`Callable[[], dict[str, float]]`, *optional*):
            Cumulative counters to store with each record.
    """

    def __init__(
        self,
        evaluate: Callable[[Any], dict[str, float]],
        eval_steps: int,
        counters: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        if eval_steps < 1:
            raise ValueError(f"eval_steps={eval_steps} is invalid: use an integer >= 1.")
        self.evaluate = evaluate
        self.eval_steps = eval_steps
        self.counters = counters or dict
        self.records: list[dict[str, Any]] = []
        self.eval_seconds = 0.0
        self.eval_cpu_seconds = 0.0
        self._start: float | None = None
        self._start_cpu = 0.0

    def train_seconds(self) -> float:
        """Wall-clock since `on_train_begin`, evaluations excluded."""
        return 0.0 if self._start is None else time.perf_counter() - self._start - self.eval_seconds

    def train_cpu_seconds(self) -> float:
        """Process CPU time since `on_train_begin`, evaluations excluded."""
        return 0.0 if self._start is None else time.process_time() - self._start_cpu - self.eval_cpu_seconds

    def record(self, step: int, model: Any) -> dict[str, Any]:
        """Evaluates `model` now and appends the record (the record before any step counts zero seconds)."""
        first = not self.records and step == 0
        row: dict[str, Any] = {
            "step": int(step),
            "train_seconds": 0.0 if first else self.train_seconds(),
            "train_cpu_seconds": 0.0 if first else self.train_cpu_seconds(),
            **self.counters(),
        }
        t0, c0 = time.perf_counter(), time.process_time()
        for name, value in self.evaluate(model).items():
            row[f"{name}_accuracy"] = float(value)
        self.eval_seconds += time.perf_counter() - t0
        self.eval_cpu_seconds += time.process_time() - c0
        self.records.append(row)
        return row

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._start, self._start_cpu = time.perf_counter(), time.process_time()
        self.eval_seconds = self.eval_cpu_seconds = 0.0
        self.record(state.global_step, model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.eval_steps == 0:
            self.record(state.global_step, model)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if not self.records or self.records[-1]["step"] != state.global_step:
            self.record(state.global_step, model)
