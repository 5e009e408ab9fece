"""Verifiable tasks for LZE-GRPO experiments."""

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


__all__ = [
    "CHARSET",
    "OOD_LEVELS",
    "TRAIN_LEVELS",
    "WARM_START_LEVELS",
    "arithmetic_reward",
    "is_test_prompt",
    "make_dataset",
    "make_problem",
    "make_splits",
    "parse_completion",
    "warm_start_examples",
]
