"""Selectors: which prompt groups of a generation batch take part in the policy update, chosen by name.

The package registers `"lze"` (top-k by energy), `"none"` (plain GRPO) and `"uniform_live"` (LZE's quota at random
among live groups, the control of its ranking); a selector from outside the package is
registered with `register_selector` (the repository's `benchmarks/peers/` registers the paper's peers so).
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
