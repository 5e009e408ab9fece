"""Selectors: which prompt groups of a generation batch take part in the policy update, chosen by name.

One module per selector: `builtin` (`"lze"`, `"none"`), `uniform` (`"uniform"`, `"uniform_live"`), `dapo`,
`reinforce_rej`, `prefilter`, `softmax`. Importing this package registers them all.
"""

from . import builtin, dapo, prefilter, reinforce_rej, softmax, uniform  # noqa: F401  (registers the selectors)
from .base import SELECTORS, GroupBatch, Selector, TrainContext, get_selector, register_selector
from .prefilter import PREFILTER_MODES


__all__ = [
    "PREFILTER_MODES",
    "SELECTORS",
    "GroupBatch",
    "Selector",
    "TrainContext",
    "get_selector",
    "register_selector",
]
