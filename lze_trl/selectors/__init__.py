"""Selectors: which prompt groups of a generation batch take part in the policy update, chosen by name.

One module per selector: `builtin` (`"lze"`, `"none"`), `uniform` (`"uniform"`, `"uniform_live"`), `dapo`,
`reinforce_rej`. Importing this package registers them all. The paper's other peers measured in BENCHMARKS.md
(`"prefilter"`, `"softmax"`) lost their benchmarks and live in the repository's `benchmarks/peers/`, registered by
the benchmark harness with `register_selector`, as any selector from outside the package is.
"""

from . import builtin, dapo, reinforce_rej, uniform  # noqa: F401  (registers the selectors)
from .base import SELECTORS, GroupBatch, Selector, get_selector, register_selector


__all__ = [
    "SELECTORS",
    "GroupBatch",
    "Selector",
    "get_selector",
    "register_selector",
]
