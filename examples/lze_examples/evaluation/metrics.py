"""Grading completions and the pass@1 / avg@k metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .generation import Completion


def benchmark_metrics(correct: Sequence[Sequence[float]], completions: Sequence[Sequence[Completion]] = ()):
    """
    Metrics of one benchmark from the grades of its completions.

    With `c_i` correct completions out of `k` for problem `i` of `n`:

    - `pass@1 = mean_i c_i / k`: with `k = 1` the accuracy of the single (e.g. greedy) completion; with `k > 1` the
      unbiased pass@1 estimate from `k` samples, which is what "avg@k" names, so `avg@k` holds the same number;
    - `pass@k = mean_i [c_i > 0]`: the fraction of problems solved by at least one of the `k` completions.

    Args:
        correct (`Sequence[Sequence[float]]`):
            Per problem, the grade (1.0 / 0.0) of each of its `k` completions.
        completions (`Sequence[Sequence[Completion]]`, *optional*):
            The completions themselves, for their mean length and truncation rate.

    Returns:
        `dict[str, float | int]`: `n`, `k`, `pass@1`, `avg@k`, `pass@k`, and, with completions,
        `mean_completion_tokens` and `truncated_frac`.
    """
    n = len(correct)
    k = len(correct[0]) if n else 0
    if any(len(c) != k for c in correct):
        raise ValueError("Every problem must have the same number of graded completions.")
    per_problem = [sum(c) / k for c in correct] if k else []
    pass1 = sum(per_problem) / n if n else math.nan
    metrics: dict[str, float | int] = {
        "n": n,
        "k": k,
        "pass@1": pass1,
        "avg@k": pass1,
        "pass@k": sum(any(x > 0 for x in c) for c in correct) / n if n else math.nan,
    }
    flat = [c for row in completions for c in row]
    if flat:
        metrics["mean_completion_tokens"] = sum(c.num_tokens for c in flat) / len(flat)
        metrics["truncated_frac"] = sum(c.truncated for c in flat) / len(flat)
    return metrics


def _grade(
    completions: Sequence[Sequence[Completion]], solutions: Sequence[str], task: str | None = None
) -> tuple[list[list[float]], int]:
    """Grades completions with `math_accuracy` (an embedded `task`'s with its own reward,
    [`~lze_examples.tasks.TASK_REWARDS`]); returns the grades and the number of unparsable gold answers."""
    from lze_trl.rewards import math_accuracy

    from ..tasks import TASK_REWARDS

    texts = [c.text for row in completions for c in row]
    golds = [sol for row, sol in zip(completions, solutions) for _ in row]
    flat = TASK_REWARDS[task](texts, golds) if task is not None else math_accuracy(texts, golds)
    grades, unparsable, i = [], 0, 0
    for row in completions:
        grades.append([float(x or 0.0) for x in flat[i : i + len(row)]])
        unparsable += flat[i] is None if row else 0
        i += len(row)
    return grades, unparsable
