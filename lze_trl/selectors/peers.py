"""Deprecated location of the paper's peers and controls; each selector now has its own module (see `selectors`)."""

import warnings

from ..selection import group_reward_std
from .dapo import DAPOSelector
from .prefilter import PREFILTER_MODES, PrefilterSelector
from .reinforce_rej import ReinforceRejSelector
from .softmax import SoftmaxSelector
from .uniform import UniformLiveSelector, UniformSelector


warnings.warn(
    "`lze_trl.selectors.peers` is deprecated: import the selectors from `lze_trl.selectors.<name>` (uniform, dapo, "
    "reinforce_rej, prefilter, softmax) and `group_reward_std` from `lze_trl.selection`.",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "PREFILTER_MODES",
    "DAPOSelector",
    "PrefilterSelector",
    "ReinforceRejSelector",
    "SoftmaxSelector",
    "UniformLiveSelector",
    "UniformSelector",
    "group_reward_std",
]
