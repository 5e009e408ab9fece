"""lze-trl: Learning-Zone Energy prompt selection for TRL's GRPO."""

from .callbacks import LZEPlotCallback, add_plot_callback
from .config import LZEGRPOConfig
from .energy import EnergyScorer, compute_energy
from .pruning import PromptPruner
from .sampler import LZERepeatSampler
from .selection import group_pass_rates, select_top_k
from .trainer import LZEGRPOTrainer


__version__ = "0.1.0"

__all__ = [
    "EnergyScorer",
    "LZEGRPOConfig",
    "LZEGRPOTrainer",
    "LZEPlotCallback",
    "LZERepeatSampler",
    "PromptPruner",
    "add_plot_callback",
    "compute_energy",
    "group_pass_rates",
    "select_top_k",
]
