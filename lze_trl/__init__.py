"""lze-trl: Learning-Zone Energy prompt selection for TRL's GRPO.

The public names are imported lazily (as TRL does): `import lze_trl.plotting` or `import lze_trl.checkpoint` loads
neither torch nor TRL; `from lze_trl import LZEGRPOTrainer` loads the trainer on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any


__version__ = "0.1.0"

_EXPORTS = {
    "LZEGRPOConfig": "config",
    "LZEGRPOTrainer": "trainer",
    "LZEPlotCallback": "plotting.callback",
    "LZERepeatSampler": "sampler",
    "LZERun": "run",
    "LZEWarning": "errors",
    "PromptPruner": "pruning",
    "PromptState": "prompt_state",
    "add_plot_callback": "plotting.callback",
    "compute_energy": "energy",
    "group_pass_rates": "selection",
    "live_groups": "selection",
    "select_top_k": "selection",
}

__all__ = [
    "LZEGRPOConfig",
    "LZEGRPOTrainer",
    "LZEPlotCallback",
    "LZERepeatSampler",
    "LZERun",
    "LZEWarning",
    "PromptPruner",
    "PromptState",
    "add_plot_callback",
    "compute_energy",
    "group_pass_rates",
    "live_groups",
    "select_top_k",
]

if TYPE_CHECKING:
    from .config import LZEGRPOConfig
    from .energy import compute_energy
    from .errors import LZEWarning
    from .plotting.callback import LZEPlotCallback, add_plot_callback
    from .prompt_state import PromptState
    from .pruning import PromptPruner
    from .run import LZERun
    from .sampler import LZERepeatSampler
    from .selection import group_pass_rates, live_groups, select_top_k
    from .trainer import LZEGRPOTrainer


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lze_trl' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
