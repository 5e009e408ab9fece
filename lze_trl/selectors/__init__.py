"""Selectors: which prompt groups of a generation batch take part in the policy update, chosen by name."""

from . import builtin  # noqa: F401  (registers the built-in selectors)
from .base import SELECTORS, GroupBatch, Selector, get_selector, register_selector


__all__ = ["SELECTORS", "GroupBatch", "Selector", "get_selector", "register_selector"]
