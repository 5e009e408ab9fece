"""Selectors: which prompt groups of a generation batch take part in the policy update, chosen by name."""

from . import builtin, peers  # noqa: F401  (register the built-in selectors, the paper's peers and controls)
from .base import SELECTORS, GroupBatch, Selector, fit_groups, get_selector, register_selector
from .peers import PREFILTER_MODES


__all__ = ["PREFILTER_MODES", "SELECTORS", "GroupBatch", "Selector", "fit_groups", "get_selector", "register_selector"]
