"""Verifiable tasks for LZE-GRPO experiments.

Two embedded tasks, chosen by name with [`get_task`]:

- `"carries"` (the demo's default): column addition graded by the number of carries, see
  [`~lze_trl.tasks.carries`].
- `"arithmetic"`: the first demo task (mixed expressions of levels 0-7), kept so that the older measurements in
  BENCHMARKS.md stay reproducible, see [`~lze_trl.tasks.arithmetic`].

Both share the character set, the prompt format (`expression=`), the train/test partition rule and the reward
([`arithmetic_reward`]), in [`~lze_trl.tasks.shared`].
"""

from types import ModuleType

from . import arithmetic, carries
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


TASKS: dict[str, ModuleType] = {"carries": carries, "arithmetic": arithmetic}
"""Embedded tasks by name: each module has `make_splits`, `make_dataset`, `warm_start_examples`, `TRAIN_LEVELS`,
`OOD_LEVELS` and `WARM_START_LEVELS`."""


def get_task(name: str) -> ModuleType:
    """The task module registered as `name` (see [`TASKS`]); a `ValueError` lists the valid names."""
    if name not in TASKS:
        raise ValueError(f"task={name!r} is not an embedded task: use one of {sorted(TASKS)}.")
    return TASKS[name]


__all__ = [
    "CHARSET",
    "OOD_LEVELS",
    "TASKS",
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
