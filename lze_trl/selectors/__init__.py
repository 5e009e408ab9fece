"""Selectors: which prompt groups of a generation batch take part in the policy update, chosen by name.

The package registers `"lze"` (top-k by energy) and `"none"` (plain GRPO) (`builtin`). The paper's peers and the
random controls measured in BENCHMARKS.md (`"uniform"`, `"uniform_live"`, `"dapo"`, `"reinforce_rej"`,
`"prefilter"`, `"softmax"`) lost their benchmarks or only serve them: they live in the repository's
`benchmarks/peers/`, registered with `register_selector`, as any selector from outside the package is.
"""

from . import builtin  # noqa: F401  (registers the selectors)
from .base import SELECTORS, GroupBatch, Selector, get_selector, register_selector


__all__ = [
    "SELECTORS",
    "GroupBatch",
    "Selector",
    "get_selector",
    "register_selector",
]
