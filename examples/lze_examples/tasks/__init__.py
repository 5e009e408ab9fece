"""Verifiable tasks for LZE-GRPO experiments.

Three embedded tasks, chosen by name with [`get_task`]:

- `"carries"` (the demo's default): column addition graded by the number of carries, see
  [`~lze_examples.tasks.carries`].
- `"arithmetic"`: the first demo task (mixed expressions of levels 0-7), kept so that the older measurements in
  BENCHMARKS.md stay reproducible, see [`~lze_examples.tasks.arithmetic`].
- `"word_problems"`: arithmetic word problems in chat form with free-form answers, graded by their last number, for
  the real chat model of [`~lze_examples.smollm2`] (no warm start), see [`~lze_examples.tasks.word_problems`].

The first two share the character set, the prompt format (`expression=`), the train/test partition rule and the reward
([`arithmetic_reward`]), in [`~lze_examples.tasks.shared`].
"""

from collections.abc import Callable
from types import ModuleType

from . import arithmetic, carries, word_problems
from .arithmetic import (
    CHARSET,
    OOD_LEVELS,
    TRAIN_LEVELS,
    WARM_START_LEVELS,
    arithmetic_reward,
    is_test_prompt,
    make_dataset,
    make_problem,
    make_splits,
    parse_completion,
    warm_start_examples,
)


TASKS: dict[str, ModuleType] = {"carries": carries, "arithmetic": arithmetic, "word_problems": word_problems}
"""Embedded tasks by name: each module has `make_splits`, `make_dataset`, `TRAIN_LEVELS`, `OOD_LEVELS`,
`WARM_START_LEVELS` and (the first two) `warm_start_examples`."""


TASK_REWARDS: dict[str, Callable] = {
    "carries": arithmetic_reward,
    "arithmetic": arithmetic_reward,
    "word_problems": word_problems.word_problem_reward,
}
"""Each embedded task's reward (TRL's convention), which training and `lze-trl eval` grade it with."""


def get_task(name: str) -> ModuleType:
    """The task module registered as `name` (see [`TASKS`]); a `ValueError` lists the valid names."""
    if name not in TASKS:
        raise ValueError(f"task={name!r} is not an embedded task: use one of {sorted(TASKS)}.")
    return TASKS[name]


__all__ = [
    "CHARSET",
    "OOD_LEVELS",
    "TASKS",
    "TASK_REWARDS",
    "TRAIN_LEVELS",
    "WARM_START_LEVELS",
    "arithmetic_reward",
    "get_task",
    "is_test_prompt",
    "make_dataset",
    "make_problem",
    "make_splits",
    "parse_completion",
    "warm_start_examples",
]
