"""Column addition with a graded number of carries: the embedded task on which the selectors can be told apart.

A prompt is `a+b=` with two operands of the same number of digits, e.g. `"473+259="`, and the completion is the sum,
`"732"`. The difficulty of a prompt is the number of **carries** its column-by-column addition makes (a column carries
when its digits plus the incoming carry reach 10). Every level is the same skill; a level only says how many times
the carry has to be remembered.

The warm start (see [`warm_start_examples`]) shows sums written by a solver that forgets each carry, independently,
with probability `carry_drop_prob` (`q`). A policy that copies that solver solves a prompt with `k` carries with
probability `(1 - q) ** k` when it samples, so the training prompts spread over the whole pass-rate range by their
number of carries, and RL, by lowering the slip probability, has something general to learn.

Levels (both operands of `d` digits, drawn uniformly and redrawn until the column addition makes exactly `k` carries):

| level | 0 | 1 | 2 | 3 | 4 | 5 | 6 |
|---|---|---|---|---|---|---|---|
| digits `d` | 2 | 2 | 2 | 3 | 3 | 3 | 3 |
| carries `k` | 0 | 1 | 2 | 0 | 1 | 2 | 3 |

The RL prompts (train and test) are levels 0-3 **outside the OOD operand range**: no two-digit sum whose operands are
both at least `OOD_MIN_OPERAND` (80) is ever trained or tested in domain. The OOD split is every level-2 sum (two
digits, two carries) inside that range, 180 prompts such as `"87+96="`: the carry rule RL trains on, at operands it
never shows (the tens column never holds two digits of 8 or 9 in RL). The warm start saw sums of every range (with
slips), so the OOD prompts are a setting the policy knows but RL never trains on; its greedy accuracy there starts
at 0.28. Levels 4-6 (carries in three-digit sums) are the warm start's and the first splits' (BENCHMARKS.md,
appendices): RL specialised away from them.

Train and test prompts are separated by the seed-independent rule of [`~lze_examples.tasks.shared.is_test_prompt`];
the warm start only sees train-side prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from datasets import Dataset

from .shared import draw_problems


TRAIN_LEVELS: tuple[int, ...] = (0, 1, 2, 3)
OOD_LEVELS: tuple[int, ...] = (2,)
OOD_MIN_OPERAND: int = 80
"""The OOD operand range: two-digit sums whose operands are both at least this; RL never trains on one."""
WARM_START_LEVELS: tuple[int, ...] = (0, 1, 2)
"""For the warm start, a level is a number of carries, with operands of 2 or 3 digits (uniformly): levels 0-2 cover
task levels 0-5, never three carries."""
DEAD_MASS_LEVELS: tuple[int, ...] = (0, 0, 1, 2, 6, 6)
"""Train levels of the dead-mass regime: a third soon always solved, a third never, a third learnable."""
DEAD_MASS_TEST_LEVELS: tuple[int, ...] = (1, 2)
"""Test levels of the dead-mass regime: the learnable ones, so that in-domain accuracy can move."""
NUM_LEVELS: int = 7
DEFAULT_N_OOD: int = 180
"""OOD prompts a demo evaluates by default: the whole OOD range."""
_STREAMS: dict[str, int] = {"train": 10, "test": 11, "ood": 12, "warm_start": 13, "slip": 14}
_MAX_DRAWS: int = 100_000


def column_sum(a: int, b: int, slips: Sequence[bool] | None = None) -> tuple[int, int]:
    """
    `a + b` computed column by column, least significant first.

    Args:
        a (`int`), b (`int`):
            Non-negative operands.
        slips (`Sequence[bool]`, *optional*):
            For the `i`-th carry made (in order), whether it is forgotten (not added to the next column). `None`
            forgets none.

    Returns:
        `tuple[int, int]`: the (possibly slipped) sum and the number of carries made.
    """
    if a < 0 or b < 0:
        raise ValueError(f"Operands must be non-negative, got {a} and {b}.")
    digits_a, digits_b = str(a)[::-1], str(b)[::-1]
    width = max(len(digits_a), len(digits_b))
    carry, carries, out = 0, 0, []
    for i in range(width):
        x = int(digits_a[i]) if i < len(digits_a) else 0
        y = int(digits_b[i]) if i < len(digits_b) else 0
        total = x + y + carry
        out.append(total % 10)
        carry = total // 10
        if carry:
            if slips is not None and carries < len(slips) and slips[carries]:
                carry = 0
            carries += 1
    if carry:
        out.append(carry)
    return int("".join(str(d) for d in reversed(out))), carries


def count_carries(a: int, b: int) -> int:
    """Number of carries of the exact column addition of `a + b` (e.g. `count_carries(95, 17) == 2`)."""
    return column_sum(a, b)[1]


LEVELS: dict[int, tuple[int, int]] = {0: (2, 0), 1: (2, 1), 2: (2, 2), 3: (3, 0), 4: (3, 1), 5: (3, 2), 6: (3, 3)}
"""`level: (digits of each operand, carries)`."""


def _level_digits(rng: np.random.Generator, level: int) -> tuple[int, int]:
    """(number of digits, number of carries) of one draw of `level`."""
    if level not in LEVELS:
        raise ValueError(f"`difficulty` must be in [0, {NUM_LEVELS - 1}], got {level}.")
    return LEVELS[level]


def _warm_start_problem(rng: np.random.Generator, carries: int) -> dict[str, Any]:
    """A problem with `carries` carries and operands of 2 or 3 digits (uniformly): the warm start's draw."""
    digits = int(rng.integers(2, 4))
    return _draw(rng, digits, carries, difficulty=carries)


def _draw(rng: np.random.Generator, digits: int, carries: int, difficulty: int) -> dict[str, Any]:
    low, high = 10 ** (digits - 1), 10**digits
    for _ in range(_MAX_DRAWS):
        a, b = int(rng.integers(low, high)), int(rng.integers(low, high))
        if count_carries(a, b) == carries:
            return {"prompt": f"{a}+{b}=", "answer": str(a + b), "difficulty": int(difficulty)}
    raise RuntimeError(f"Could not draw a problem with {digits} digits and {carries} carries.")  # pragma: no cover


def in_ood_range(prompt: str) -> bool:
    """Whether `prompt` (`"a+b="`) is a two-digit sum with both operands at least `OOD_MIN_OPERAND`."""
    a, b = prompt.rstrip("=").split("+")
    return len(a) == len(b) == 2 and min(int(a), int(b)) >= OOD_MIN_OPERAND


def _in_domain_problem(rng: np.random.Generator, difficulty: int) -> dict[str, Any]:
    """[`make_problem`], redrawn while the prompt is in the OOD operand range (the train and test draw)."""
    for _ in range(_MAX_DRAWS):
        problem = make_problem(rng, difficulty)
        if not in_ood_range(problem["prompt"]):
            return problem
    raise RuntimeError(f"Could not draw a level-{difficulty} problem outside the OOD range.")  # pragma: no cover


def ood_problems(levels: Sequence[int] = OOD_LEVELS) -> list[dict[str, Any]]:
    """
    Every problem of the OOD operand range at the given two-digit levels, in increasing `(a, b)` order.

    Args:
        levels (`Sequence[int]`, *optional*, defaults to `OOD_LEVELS`):
            Two-digit levels (0-2); level 0 is empty there (the tens column always carries).

    Returns:
        `list[dict[str, Any]]`: `{"prompt", "answer", "difficulty"}` problems (180 for level 2).
    """
    if any(LEVELS.get(int(level), (0,))[0] != 2 for level in levels):
        raise ValueError(f"The OOD range holds two-digit sums: levels must be in [0, 2], got {list(levels)}.")
    wanted = {LEVELS[int(level)][1]: int(level) for level in levels}
    operands = range(OOD_MIN_OPERAND, 100)
    return [
        {"prompt": f"{a}+{b}=", "answer": str(a + b), "difficulty": wanted[count_carries(a, b)]}
        for a in operands
        for b in operands
        if count_carries(a, b) in wanted
    ]


def make_problem(rng: np.random.Generator, difficulty: int) -> dict[str, Any]:
    """
    Draws one addition problem of the given level (see the module docstring).

    Args:
        rng (`np.random.Generator`):
            Random generator to draw from (advanced in place).
        difficulty (`int`):
            Level in [0, 6] (see `LEVELS`).

    Returns:
        `dict[str, Any]`: `{"prompt": "473+259=", "answer": "732", "difficulty": 5}`-style problem.

    Example:

    ```python
    >>> import numpy as np
    >>> problem = make_problem(np.random.default_rng(0), difficulty=5)
    >>> a, b = map(int, problem["prompt"][:-1].split("+"))
    >>> len(str(a)), count_carries(a, b), int(problem["answer"]) == a + b
    (3, 2, True)
    ```
    """
    digits, carries = _level_digits(rng, int(difficulty))
    return _draw(rng, digits, carries, int(difficulty))


def _generate(
    n: int, seed: int, levels: Sequence[int], stream: str, partition: str | None, draw=None
) -> list[dict[str, Any]]:
    """Draws `n` problems with `draw(rng, level)` (default [`make_problem`]) from the stream's own random generator
    (see [`~lze_examples.tasks.shared.draw_problems`])."""
    rng = np.random.default_rng([seed, _STREAMS[stream]])
    return draw_problems(n, rng, levels, partition, draw or make_problem)


def make_dataset(n: int, seed: int = 0, levels: Sequence[int] | None = None, split: str = "train") -> Dataset:
    """
    Builds a dataset of addition problems in TRL's standard prompt format.

    Args:
        n (`int`):
            Number of rows. `"train"` and `"test"`: spread round-robin over `levels`, then shuffled. `"ood"`: `n`
            distinct problems of the OOD range (all of them, 180 at level 2, when `n` is their number), in a seeded
            order.
        seed (`int`, *optional*, defaults to `0`):
            Random seed; the same `(n, seed, levels, split)` always yields the same dataset.
        levels (`Sequence[int]`, *optional*):
            Levels to draw from. Defaults to `TRAIN_LEVELS` (0-3) for `"train"` and `"test"`, `OOD_LEVELS` (2, in the
            OOD operand range) for `"ood"`.
        split (`str`, *optional*, defaults to `"train"`):
            `"train"`, `"test"` or `"ood"`; `"train"` and `"test"` never share a prompt and never hold a prompt of the
            OOD operand range.

    Returns:
        [`~datasets.Dataset`]: Columns `prompt`, `answer` and `difficulty` (the level).
    """
    if split not in ("train", "test", "ood"):
        raise ValueError(f"`split` must be one of 'train', 'test', 'ood', got {split!r}.")
    if levels is None:
        levels = OOD_LEVELS if split == "ood" else TRAIN_LEVELS
    if split == "ood":
        pool = ood_problems(levels)
        if not 0 <= n <= len(pool):
            raise ValueError(
                f"The carries task's OOD range holds {len(pool)} prompts at levels {list(levels)}, so `n_ood` must be "
                f"in [0, {len(pool)}], got {n}: lower `n_ood` (its default, None, takes them all)."
            )
        order = np.random.default_rng([seed, _STREAMS["ood"]]).permutation(len(pool))[:n]
        problems = [pool[i] for i in order]
    else:
        problems = _generate(n, seed, levels, stream=split, partition=split, draw=_in_domain_problem)
    return Dataset.from_dict({key: [p[key] for p in problems] for key in ("prompt", "answer", "difficulty")})


def make_splits(
    n_train: int,
    n_test: int,
    n_ood: int,
    seed: int = 0,
    train_levels: Sequence[int] | None = None,
    test_levels: Sequence[int] | None = None,
) -> dict[str, Dataset]:
    """
    The train (levels 0-3), test (levels 0-3, disjoint prompts) and OOD (level 2 in the OOD operand range) datasets.

    `train_levels` and `test_levels` change the levels of the train and test splits (a level repeated is drawn that
    many times as often). [`DEAD_MASS_LEVELS`] and [`DEAD_MASS_TEST_LEVELS`] make the dead-mass regime: a third of the
    prompts soon always solved (level 0), a third never (level 6, three carries, which the warm start never saw),
    and the test split on the levels RL can still move (1 and 2).
    """
    return {
        "train": make_dataset(n_train, seed, levels=train_levels, split="train"),
        "test": make_dataset(n_test, seed, levels=test_levels, split="test"),
        "ood": make_dataset(n_ood, seed, split="ood"),
    }


def warm_start_examples(
    n: int, seed: int = 0, levels: Sequence[int] = WARM_START_LEVELS, carry_drop_prob: float = 0.0
) -> list[str]:
    """
    Supervised strings `prompt + answer + "\\n"` written by a solver that forgets each carry with probability
    `carry_drop_prob`, independently per carry (train-side prompts only).

    Args:
        n (`int`):
            Number of strings.
        seed (`int`, *optional*, defaults to `0`):
            Random seed (streams distinct from the dataset splits).
        levels (`Sequence[int]`, *optional*, defaults to `WARM_START_LEVELS`):
            Numbers of carries to draw (round-robin), each with operands of 2 or 3 digits (uniformly); so the warm
            start covers task levels 0-5 and never shows three carries.
        carry_drop_prob (`float`, *optional*, defaults to `0.0`):
            Probability of forgetting each carry, in [0, 1].

    Returns:
        `list[str]`: Strings such as `"38+25=53\\n"` (the carry forgotten) or `"38+25=63\\n"`.
    """
    if not 0.0 <= carry_drop_prob <= 1.0:
        raise ValueError(f"`carry_drop_prob` must be in [0, 1], got {carry_drop_prob}.")
    if any(int(level) not in WARM_START_LEVELS for level in levels):
        raise ValueError(f"Warm-start levels are numbers of carries in {list(WARM_START_LEVELS)}, got {list(levels)}.")
    problems = _generate(n, seed, levels, stream="warm_start", partition="train", draw=_warm_start_problem)
    slips = np.random.default_rng([seed, _STREAMS["slip"]]).random((n, 8)) < carry_drop_prob
    texts = []
    for problem, row in zip(problems, slips):
        a, b = map(int, problem["prompt"][:-1].split("+"))
        texts.append(f"{problem['prompt']}{column_sum(a, b, row.tolist())[0]}\n")
    return texts
