"""Arithmetic reasoning task with verifiable answers and a graded difficulty spectrum.

This is the embedded CPU demo task: short integer expressions (prompts of at most 24 characters, answers of at most 8)
that a tiny character-level causal LM can learn on a laptop CPU. Everything is generated deterministically from a seed.

A prompt is an expression followed by `=`, e.g. `"12+7="`, and the expected completion is the integer answer, e.g.
`"19"`. Operands are never negative; answers may be. The answer of a prompt always equals Python's
`eval(prompt[:-1])`, but it is computed here by a separate evaluator so that the tests can use `eval` as ground truth.

Difficulty levels (all random draws are uniform over the stated range, inclusive, unless stated otherwise):

- **0**: `a+b` with `a, b` in [0, 9].
- **1**: with probability 1/2, `a-b` with `a, b` in [0, 9] (may be negative); otherwise `a+b` with two-digit
  `a, b` in [10, 99] and no carry in any column (drawn digit by digit).
- **2**: two-digit `a, b` in [10, 99] with a carry or borrow in the ones column: with probability 1/2 `a+b` with
  `a % 10 + b % 10 >= 10`, otherwise `a-b` with `a % 10 < b % 10` (may be negative).
- **3**: `a*b` with `b` in [2, 9] and, with probability 1/2, `a` in [2, 9], otherwise `a` in [10, 99].
- **4**: three terms `a o b o c` with `a, b, c` in [1, 99] and each operator `o` drawn from {`+`, `-`}.
- **5**: `a o b` with `o` drawn from {`+`, `-`}; each operand first draws 3 or 4 digits, then a value with exactly
  that many digits (so in [100, 9999]).
- **6** (out of distribution, longer operands): three terms `a o b o c` with four-digit `a, b, c` in [1000, 9999] and
  each `o` drawn from {`+`, `-`}.
- **7** (out of distribution, more steps): four terms `a o b o c o d` with `a, b, c, d` in [1, 99] and each `o` drawn
  from {`+`, `-`, `*`}, redrawn until at least one `*` and at least one `+`/`-` appear (so operator precedence
  matters); with probability 1/2 the first two terms are wrapped in parentheses, e.g. `(12+3)*4-5`.

Train and test prompts are separated by a seed-independent rule: a prompt belongs to the test split iff the SHA-256
hash of the prompt falls into a fixed 20% bucket (see [`is_test_prompt`]). Hence the train and test splits never share
a prompt, whatever seeds they were generated with.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from datasets import Dataset

from .shared import (  # noqa: F401  (the first task's names, as before the shared parts moved out)
    CHARSET,
    TEST_PERCENT,
    arithmetic_reward,
    draw_problems,
    is_test_prompt,
    parse_completion,
)


TRAIN_LEVELS: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
OOD_LEVELS: tuple[int, ...] = (6, 7)
WARM_START_LEVELS: tuple[int, ...] = (0, 1, 2, 3)
NUM_LEVELS: int = 8
DEFAULT_N_OOD: int = 200
"""OOD prompts a demo evaluates by default."""
_SPLIT_STREAMS: dict[str, int] = {"train": 0, "test": 1, "ood": 2, "warm_start": 3, "carry_drop": 4}
_TWO_TERMS = re.compile(r"^([0-9]+)([-+*])([0-9]+)=$")


def _randint(rng: np.random.Generator, low: int, high: int) -> int:
    """Uniform integer in [low, high], inclusive."""
    return int(rng.integers(low, high + 1))


def _choice(rng: np.random.Generator, options: str) -> str:
    return options[int(rng.integers(len(options)))]


def _apply(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    return a * b


def _evaluate(terms: Sequence[int], ops: Sequence[str], paren: bool) -> int:
    """Evaluates `terms[0] ops[0] terms[1] ...` with `*` binding tighter than `+`/`-`; `paren` groups the first two."""
    terms, ops = list(terms), list(ops)
    if paren:
        terms[:2] = [_apply(terms[0], ops[0], terms[1])]
        ops = ops[1:]
    # Collapse products first, then fold the remaining +/- left to right.
    sums, sum_ops = [terms[0]], []
    for op, term in zip(ops, terms[1:]):
        if op == "*":
            sums[-1] *= term
        else:
            sums.append(term)
            sum_ops.append(op)
    result = sums[0]
    for op, term in zip(sum_ops, sums[1:]):
        result = _apply(result, op, term)
    return result


def _render(terms: Sequence[int], ops: Sequence[str], paren: bool) -> str:
    text = str(terms[0])
    for i, (op, term) in enumerate(zip(ops, terms[1:])):
        text += f"{op}{term}"
        if paren and i == 0:
            text = f"({text})"
    return text


def _expression(rng: np.random.Generator, difficulty: int) -> tuple[list[int], list[str], bool]:
    """Draws `(terms, ops, paren)` for one problem of the given level (see the module docstring)."""
    if difficulty == 0:
        return [_randint(rng, 0, 9), _randint(rng, 0, 9)], ["+"], False
    if difficulty == 1:
        if rng.random() < 0.5:
            return [_randint(rng, 0, 9), _randint(rng, 0, 9)], ["-"], False
        a_tens, a_ones = _randint(rng, 1, 8), _randint(rng, 0, 9)
        b_tens, b_ones = _randint(rng, 1, 9 - a_tens), _randint(rng, 0, 9 - a_ones)
        return [10 * a_tens + a_ones, 10 * b_tens + b_ones], ["+"], False
    if difficulty == 2:
        op = "+" if rng.random() < 0.5 else "-"
        while True:
            a, b = _randint(rng, 10, 99), _randint(rng, 10, 99)
            if (op == "+" and a % 10 + b % 10 >= 10) or (op == "-" and a % 10 < b % 10):
                return [a, b], [op], False
    if difficulty == 3:
        a = _randint(rng, 2, 9) if rng.random() < 0.5 else _randint(rng, 10, 99)
        return [a, _randint(rng, 2, 9)], ["*"], False
    if difficulty == 4:
        return [_randint(rng, 1, 99) for _ in range(3)], [_choice(rng, "+-") for _ in range(2)], False
    if difficulty == 5:
        op = _choice(rng, "+-")
        terms = []
        for _ in range(2):
            digits = _randint(rng, 3, 4)
            terms.append(_randint(rng, 10 ** (digits - 1), 10**digits - 1))
        return terms, [op], False
    if difficulty == 6:
        return [_randint(rng, 1000, 9999) for _ in range(3)], [_choice(rng, "+-") for _ in range(2)], False
    if difficulty == 7:
        terms = [_randint(rng, 1, 99) for _ in range(4)]
        while True:
            ops = [_choice(rng, "+-*") for _ in range(3)]
            if "*" in ops and ("+" in ops or "-" in ops):
                return terms, ops, bool(rng.random() < 0.5)
    raise ValueError(f"`difficulty` must be in [0, {NUM_LEVELS - 1}], got {difficulty}.")


def make_problem(rng: np.random.Generator, difficulty: int) -> dict[str, Any]:
    """
    Draws one arithmetic problem of the given difficulty level.

    Args:
        rng (`np.random.Generator`):
            Random generator to draw from (advanced in place).
        difficulty (`int`):
            Difficulty level in [0, 7]; the generator of each level is documented in the module docstring.

    Returns:
        `dict[str, Any]`: `{"prompt": "12+7=", "answer": "19", "difficulty": 1}`-style problem, where `answer` is the
        decimal integer equal to `eval(prompt[:-1])`.

    Example:

    ```python
    >>> import numpy as np
    >>> problem = make_problem(np.random.default_rng(0), difficulty=0)
    >>> sorted(problem)
    ['answer', 'difficulty', 'prompt']
    ```
    """
    terms, ops, paren = _expression(rng, int(difficulty))
    return {
        "prompt": _render(terms, ops, paren) + "=",
        "answer": str(_evaluate(terms, ops, paren)),
        "difficulty": int(difficulty),
    }


def _generate(n: int, seed: int, levels: Sequence[int], stream: str, partition: str | None) -> list[dict[str, Any]]:
    """Draws `n` problems of this task from the split's own random stream (see [`draw_problems`])."""
    return draw_problems(n, np.random.default_rng([seed, _SPLIT_STREAMS[stream]]), levels, partition, make_problem)


def make_dataset(n: int, seed: int = 0, levels: Sequence[int] | None = None, split: str = "train") -> Dataset:
    """
    Builds a dataset of arithmetic problems in TRL's standard (non-conversational) prompt format.

    Args:
        n (`int`):
            Number of rows. Rows are spread round-robin over `levels` (so each level gets `n // len(levels)` or one
            more rows) and then shuffled. Prompts may repeat within a split, especially on the small levels 0-1.
        seed (`int`, *optional*, defaults to `0`):
            Random seed; the same `(n, seed, levels, split)` always yields the same dataset.
        levels (`Sequence[int]`, *optional*):
            Difficulty levels to draw from. Defaults to `TRAIN_LEVELS` (0-5) for the `"train"` and `"test"` splits
            and to `OOD_LEVELS` (6-7) for the `"ood"` split.
        split (`str`, *optional*, defaults to `"train"`):
            One of `"train"`, `"test"` or `"ood"`. `"train"` and `"test"` only keep prompts on their side of
            [`is_test_prompt`], so they never share a prompt, even across seeds. Each split uses its own random
            stream.

    Returns:
        [`~datasets.Dataset`]: Columns `prompt` (`str`), `answer` (`str`) and `difficulty` (`int`).
    """
    if split not in ("train", "test", "ood"):
        raise ValueError(f"`split` must be one of 'train', 'test', 'ood', got {split!r}.")
    if levels is None:
        levels = OOD_LEVELS if split == "ood" else TRAIN_LEVELS
    partition = None if split == "ood" else split
    problems = _generate(n, seed, levels, stream=split, partition=partition)
    columns = {key: [problem[key] for problem in problems] for key in ("prompt", "answer", "difficulty")}
    return Dataset.from_dict(columns)


def make_splits(n_train: int, n_test: int, n_ood: int, seed: int = 0) -> dict[str, Dataset]:
    """
    Builds the train (levels 0-5), test (levels 0-5, disjoint prompts) and OOD (levels 6-7) datasets.

    Args:
        n_train (`int`):
            Number of train rows.
        n_test (`int`):
            Number of test rows.
        n_ood (`int`):
            Number of out-of-distribution rows.
        seed (`int`, *optional*, defaults to `0`):
            Random seed shared by the three splits (each split uses its own stream).

    Returns:
        `dict[str, Dataset]`: Datasets under the keys `"train"`, `"test"` and `"ood"`.
    """
    return {
        "train": make_dataset(n_train, seed, split="train"),
        "test": make_dataset(n_test, seed, split="test"),
        "ood": make_dataset(n_ood, seed, split="ood"),
    }


def _digits(value: int) -> list[int]:
    """Decimal digits of a non-negative integer, least significant first."""
    return [int(c) for c in reversed(str(value))]


def _columns_without_carry(a: int, b: int, op: str) -> int:
    """`a op b` (`a >= b` for `-`) computed column by column, each column's carry or borrow thrown away."""
    if op == "*":
        return int("".join(str(d * b % 10) for d in reversed(_digits(a))))
    da, db = _digits(a), _digits(b) + [0] * (len(str(a)) - len(str(b)))
    columns = [(x + y) % 10 if op == "+" else (x - y) % 10 for x, y in zip(da, db)]
    return int("".join(str(c) for c in reversed(columns)))


def carry_dropped_answer(prompt: str) -> int | None:
    """
    The answer a solver that forgets every carry and borrow gives to a two-term prompt: the commonest arithmetic
    slip, used to make the warm start's supervision imperfect (see [`warm_start_examples`]).

    Each column is computed on its own and only its last digit kept (`38+25` -> `53`, `52-17` -> `45`, `47*3` ->
    `21`); for `a - b` with `a < b` it is minus that of `b - a`, and a product keeps the last digit of each digit of
    the multi-digit operand times the single-digit one.

    Args:
        prompt (`str`):
            A problem prompt such as `"38+25="`.

    Returns:
        `int` or `None`: The carry-dropped answer, equal to the true answer when no column carries or borrows;
        `None` for prompts that are not `a o b` with a single-digit factor for `*`.

    Example:

    ```python
    >>> carry_dropped_answer("38+25="), carry_dropped_answer("12+7="), carry_dropped_answer("3-8=")
    (53, 19, -5)
    ```
    """
    match = _TWO_TERMS.match(prompt)
    if match is None:
        return None
    a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
    if op == "*":
        if b > 9 and a > 9:
            return None
        return _columns_without_carry(max(a, b), min(a, b), "*") if min(a, b) <= 9 else None
    if op == "-" and a < b:
        return -_columns_without_carry(b, a, "-")
    return _columns_without_carry(max(a, b), min(a, b), "+") if op == "+" else _columns_without_carry(a, b, "-")


def warm_start_examples(
    n: int, seed: int = 0, levels: Sequence[int] = WARM_START_LEVELS, carry_drop_prob: float = 0.0
) -> list[str]:
    """
    Supervised strings `prompt + answer + "\\n"` for a short warm start of the language model.

    Only train-side prompts are used (see [`is_test_prompt`]), so the test split stays held out. With
    `carry_drop_prob > 0` the supervision is imperfect the way real pretraining data is: each example whose columns
    carry or borrow shows, with that probability, the [`carry_dropped_answer`] instead of the true one, so the warm
    start learns the right procedure and a common wrong one side by side. RL with the verifier then has something
    general to learn (which of the two procedures is rewarded) that carries over to held-out prompts.

    Args:
        n (`int`):
            Number of strings.
        seed (`int`, *optional*, defaults to `0`):
            Random seed (a stream distinct from the dataset splits).
        levels (`Sequence[int]`, *optional*, defaults to `WARM_START_LEVELS`):
            Difficulty levels to draw from; defaults to the easier levels 0-3.
        carry_drop_prob (`float`, *optional*, defaults to `0.0`):
            Probability, per example with a carry or borrow, of showing the carry-dropped answer, in [0, 1].

    Returns:
        `list[str]`: Strings such as `"12+7=19\\n"`.
    """
    if not 0.0 <= carry_drop_prob <= 1.0:
        raise ValueError(f"`carry_drop_prob` must be in [0, 1], got {carry_drop_prob}.")
    problems = _generate(n, seed, levels, stream="warm_start", partition="train")
    flips = np.random.default_rng([seed, _SPLIT_STREAMS["carry_drop"]]).random(n) < carry_drop_prob
    texts = []
    for problem, flip in zip(problems, flips):
        answer = problem["answer"]
        if flip:
            dropped = carry_dropped_answer(problem["prompt"])
            answer = answer if dropped is None else str(dropped)
        texts.append(problem["prompt"] + answer + "\n")
    return texts
