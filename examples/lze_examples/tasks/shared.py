"""What the two embedded tasks share: the character set, the seed-independent train/test partition rule, the
problem-drawing loop and the verifiable reward (the integer answered at the start of a completion).

Both tasks' prompts are an expression followed by `=` and their answers a decimal integer, so one tokenizer
([`CHARSET`]), one partition ([`is_test_prompt`]) and one reward ([`arithmetic_reward`]) serve both.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np


CHARSET: str = "0123456789+-*=() \n"
"""Every character that can appear in prompts, answers and warm-start strings (space is included for tokenizers)."""

TEST_PERCENT: int = 20
_MAX_DRAWS_PER_EXAMPLE: int = 1000
_COMPLETION_INT = re.compile(r" *(-?[0-9]+)")


def is_test_prompt(prompt: str) -> bool:
    """
    Seed-independent train/test partition rule: whether `prompt` belongs to the held-out test split.

    Args:
        prompt (`str`):
            Problem prompt, e.g. `"12+7="`.

    Returns:
        `bool`: `True` for (deterministically) about `TEST_PERCENT`% of all distinct prompts.
    """
    return int(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8], 16) % 100 < TEST_PERCENT


def draw_problems(
    n: int, rng: np.random.Generator, levels: Sequence[int], partition: str | None, draw
) -> list[dict[str, Any]]:
    """
    Draws `n` problems with `draw(rng, level)`, balanced round-robin over `levels` then shuffled with `rng`, keeping
    only prompts of `partition` (`"train"`, `"test"` by [`is_test_prompt`], or `None` for any). Shared by the tasks.
    """
    if n < 0:
        raise ValueError(f"`n` must be non-negative, got {n}.")
    levels = [int(level) for level in levels]
    if not levels:
        raise ValueError("`levels` must not be empty.")
    problems = []
    for i in range(n):
        level = levels[i % len(levels)]
        for _ in range(_MAX_DRAWS_PER_EXAMPLE):
            problem = draw(rng, level)
            if partition is None or is_test_prompt(problem["prompt"]) == (partition == "test"):
                problems.append(problem)
                break
        else:
            raise RuntimeError(f"Could not draw a {partition} problem of level {level}.")
    order = rng.permutation(n)
    return [problems[i] for i in order]


def parse_completion(text: str) -> int | None:
    """
    Extracts the integer answered in a completion (the text generated after `=`).

    Leading spaces are skipped, then an optional `-` and the digits up to the first non-digit are read. Anything
    after is ignored. Other leading characters (letters, newlines, `+`, ...) mean no answer.

    Args:
        text (`str`):
            Completion text.

    Returns:
        `int` or `None`: The answered integer, or `None` if the completion does not start with one.

    Example:

    ```python
    >>> parse_completion("-3 junk"), parse_completion(" 7"), parse_completion("abc")
    (-3, 7, None)
    ```
    """
    match = _COMPLETION_INT.match(text)
    return int(match.group(1)) if match else None


def _completion_text(completion: str | list[dict[str, str]]) -> str:
    if isinstance(completion, str):
        return completion
    # Conversational format: list of messages; the last one holds the generated answer.
    return completion[-1]["content"] if completion else ""


def arithmetic_reward(
    completions: Sequence[str | list[dict[str, str]]], answer: Sequence[str], **kwargs: Any
) -> list[float]:
    """
    Verifiable reward following TRL's reward function convention: 1.0 for a correct answer, 0.0 otherwise.

    Args:
        completions (`Sequence[str | list[dict[str, str]]]`):
            Generated completions, as strings (standard format) or lists of message dicts (conversational format,
            the content of the last message is graded).
        answer (`Sequence[str]`):
            Reference answers, passed by the trainer from the dataset's `answer` column.
        **kwargs:
            Other columns and trainer arguments (ignored).

    Returns:
        `list[float]`: One reward per completion: `1.0` if [`parse_completion`] equals `int(answer)`, else `0.0`.
    """
    if len(completions) != len(answer):
        raise ValueError(f"Got {len(completions)} completions but {len(answer)} answers.")
    return [
        1.0 if parse_completion(_completion_text(completion)) == int(ref) else 0.0
        for completion, ref in zip(completions, answer)
    ]
