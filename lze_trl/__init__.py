"""lze-trl: Learning-Zone Energy prompt selection for TRL's GRPO."""

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
    "LZERepeatSampler",
    "PromptPruner",
    "compute_energy",
    "group_pass_rates",
    "select_top_k",
]
