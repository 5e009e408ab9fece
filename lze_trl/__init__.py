"""lze-trl: Learning-Zone Energy prompt selection for TRL's GRPO.

The public names are imported lazily (as TRL does): `import lze_trl.method.checkpoint` loads neither torch nor TRL;
`from lze_trl import LZEGRPOTrainer` loads the trainer on first use. The plots (`lze_trl.plotting`) are imported by
name, matplotlib from the `plot` extra (`pip install "lze-trl[plot]"`). The demo, the embedded tasks, the evaluation
and SmolLM2's loader are not in this package: they are the examples' (`lze_examples`, `pip install -e examples`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any


__version__ = "0.1.0"

_EXPORTS = {
    "LZEGRPOConfig": "grpo.config",
    "LZEGRPOTrainer": "grpo.trainer",
    "LZERepeatSampler": "grpo.sampler",
    "LZERun": "method.run",
    "LZEStateError": "method.errors",
    "LZEWarning": "method.errors",
    "PromptPruner": "method.pruning",
    "PromptState": "method.prompt_state",
    "compute_energy": "method.energy",
    "group_pass_rates": "method.selection",
    "live_groups": "method.selection",
    "select_top_k": "method.selection",
}

__all__ = [
    "LZEGRPOConfig",
    "LZEGRPOTrainer",
    "LZERepeatSampler",
    "LZERun",
    "LZEStateError",
    "LZEWarning",
    "PromptPruner",
    "PromptState",
    "compute_energy",
    "group_pass_rates",
    "live_groups",
    "select_top_k",
]

if TYPE_CHECKING:
    from .grpo.config import LZEGRPOConfig
    from .grpo.sampler import LZERepeatSampler
    from .grpo.trainer import LZEGRPOTrainer
    from .method.energy import compute_energy
    from .method.errors import LZEStateError, LZEWarning
    from .method.prompt_state import PromptState
    from .method.pruning import PromptPruner
    from .method.run import LZERun
    from .method.selection import group_pass_rates, live_groups, select_top_k


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lze_trl' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
