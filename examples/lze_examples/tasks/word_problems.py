"""Arithmetic word problems in chat form, with free-form answers: the task of the real chat model
([`~lze_examples.smollm2`]).

A prompt is one user message, a short story with a question, e.g. `"Mia has 4 marbles and gets 7 more. How many
marbles does Mia have now? Give only the number."`; the answer is an integer and the completion is free text, graded
by its **last number** ([`word_problem_reward`]): `"4 + 7 = 11"`, `"Mia has 11 marbles."` and `"11"` are all
right. No warm start: the model is pretrained.

Levels (operands drawn uniformly, inclusive):

| level | question | operands |
|---|---|---|
| 0 | addition | `a` in [2, 9], `b` in [1, 9] |
| 1 | subtraction | `a` in [5, 18], `b` in [1, a - 1] |
| 2 | multiplication (times tables) | `a, b` in [2, 9] |
| 3 | two-digit addition | `a, b` in [10, 49] |
| 4 | two-digit subtraction | `a` in [30, 99], `b` in [10, a - 10] |
| 5 (OOD, two steps) | add then take away | `a, b` in [5, 30], `c` in [1, a + b - 1] |
| 6 (OOD, division) | equal sharing | `b` in [2, 9], quotient in [2, 12] |

The train and test splits hold levels 0-4 ([`TRAIN_LEVELS`]) and never share a question (the seed-independent rule of
[`~lze_examples.tasks.shared.is_test_prompt`] on the message's text); the OOD split holds levels 5 and 6
([`OOD_LEVELS`]), operations the train split never asks for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from datasets import Dataset

from .shared import _completion_text, draw_problems


TRAIN_LEVELS: tuple[int, ...] = (0, 1, 2, 3, 4)
OOD_LEVELS: tuple[int, ...] = (5, 6)
WARM_START_LEVELS: tuple[int, ...] = ()
"""No warm start: the task's model is pretrained."""
DEFAULT_N_OOD: int = 100
"""OOD prompts `lze-trl eval` grades by default."""
INSTRUCTION = "Give only the number."
"""Appended to every question."""
NAMES = ("Tom", "Mia", "Sam", "Lena", "Omar", "Ava", "Ben", "Zoe")
ITEMS = ("apples", "marbles", "stickers", "pencils", "cookies", "books", "shells", "cards")
_STREAMS: dict[str, int] = {"train": 20, "test": 21, "ood": 22}
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def _question(rng: np.random.Generator, level: int) -> tuple[str, int]:
    name, items = NAMES[rng.integers(len(NAMES))], ITEMS[rng.integers(len(ITEMS))]

    def draw(low: int, high: int) -> int:
        return int(rng.integers(low, high + 1))

    if level in (0, 3):
        a, b = (draw(2, 9), draw(1, 9)) if level == 0 else (draw(10, 49), draw(10, 49))
        return f"{name} has {a} {items} and gets {b} more. How many {items} does {name} have now?", a + b
    if level in (1, 4):
        a = draw(5, 18) if level == 1 else draw(30, 99)
        b = draw(1, a - 1) if level == 1 else draw(10, a - 10)
        return f"{name} has {a} {items} and gives {b} away. How many {items} does {name} have left?", a - b
    if level == 2:
        a, b = draw(2, 9), draw(2, 9)
        return f"There are {a} boxes with {b} {items} in each box. How many {items} are there in total?", a * b
    if level == 5:
        a, b = draw(5, 30), draw(5, 30)
        c = draw(1, a + b - 1)
        return (
            f"{name} has {a} {items}, gets {b} more, then gives {c} away. How many {items} does {name} have now?",
            a + b - c,
        )
    if level == 6:
        b, q = draw(2, 9), draw(2, 12)
        return f"{name} shares {b * q} {items} equally among {b} friends. How many {items} does each friend get?", q
    raise ValueError(f"level={level} is not a level of the word_problems task: use one of 0-6.")


def make_problem(rng: np.random.Generator, difficulty: int) -> dict[str, Any]:
    """
    One problem of level `difficulty`.

    Returns:
        `dict[str, Any]`: `prompt` (the question, instruction included, as text), `answer` (the integer as a
        string) and `difficulty`; [`make_dataset`] makes the prompt one user message.
    """
    question, answer = _question(rng, difficulty)
    return {"prompt": f"{question} {INSTRUCTION}", "answer": str(answer), "difficulty": int(difficulty)}


def make_dataset(n: int, seed: int = 0, levels: Sequence[int] | None = None, split: str = "train") -> Dataset:
    """
    Builds a dataset of word problems in TRL's conversational prompt format.

    Args:
        n (`int`):
            Number of rows, spread round-robin over `levels`, then shuffled.
        seed (`int`, *optional*, defaults to `0`):
            Random seed; the same `(n, seed, levels, split)` always yields the same dataset.
        levels (`Sequence[int]`, *optional*):
            Levels to draw from. Defaults to [`TRAIN_LEVELS`] for `"train"` and `"test"`, [`OOD_LEVELS`] for `"ood"`.
        split (`str`, *optional*, defaults to `"train"`):
            `"train"`, `"test"` (their questions never shared) or `"ood"` (either side of the partition).

    Returns:
        [`~datasets.Dataset`]: Columns `prompt`, `answer` and `difficulty` (the level).
    """
    if split not in _STREAMS:
        raise ValueError(f"`split` must be one of {list(_STREAMS)}, got {split!r}.")
    if levels is None:
        levels = OOD_LEVELS if split == "ood" else TRAIN_LEVELS
    rng = np.random.default_rng([seed, _STREAMS[split]])
    partition = None if split == "ood" else split
    problems = draw_problems(n, rng, levels, partition, make_problem)
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": p["prompt"]}] for p in problems],
            "answer": [p["answer"] for p in problems],
            "difficulty": [p["difficulty"] for p in problems],
        }
    )


def make_splits(n_train: int, n_test: int, n_ood: int, seed: int = 0) -> dict[str, Dataset]:
    """The train and test (levels 0-4, disjoint questions) and OOD (levels 5 and 6) datasets."""
    return {
        "train": make_dataset(n_train, seed, split="train"),
        "test": make_dataset(n_test, seed, split="test"),
        "ood": make_dataset(n_ood, seed, split="ood"),
    }


def last_number(text: str) -> float | None:
    """
    The last number written in `text` (thousands commas and a decimal part allowed), or `None`.

    Example:

    ```python
    >>> last_number("4 + 7 = 11."), last_number("1,250 cards"), last_number("none")
    (11.0, 1250.0, None)
    ```
    """
    numbers = _NUMBER.findall(text)
    return float(numbers[-1].replace(",", "")) if numbers else None


def word_problem_reward(
    completions: Sequence[str | list[dict[str, str]]], answer: Sequence[str], **kwargs: Any
) -> list[float]:
    """
    Verifiable reward in TRL's reward function convention: 1.0 when the completion's last number
    ([`last_number`]) equals the answer, else 0.0.

    Args:
        completions (`Sequence[str | list[dict[str, str]]]`):
            Completions, as strings or as messages (the last message's content is graded).
        answer (`Sequence[str]`):
            Reference answers, from the dataset's `answer` column.
        **kwargs:
            Other columns and trainer arguments (ignored).

    Returns:
        `list[float]`: One reward per completion.
    """
    if len(completions) != len(answer):
        raise ValueError(f"Got {len(completions)} completions but {len(answer)} answers.")
    return [
        1.0 if last_number(_completion_text(completion)) == float(ref) else 0.0
        for completion, ref in zip(completions, answer)
    ]
