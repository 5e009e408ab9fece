"""Configuration of [`LZEGRPOTrainer`]: `GRPOConfig` plus the LZE settings ([`~lze_trl.method.settings.LZESettings`],
each defined and checked there once, for both trainers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trl import GRPOConfig
from trl.trainer.utils import get_config_model_id

from ..common.coupling import checkpointing_renames_quiet
from ..method.settings import LZE_FIELDS, LZESettings
from ..method.validation import as_config, hint_misspelled_keywords, parse_lze_lists, validate_lze_args


@hint_misspelled_keywords
@dataclass
class LZEGRPOConfig(LZESettings, GRPOConfig):
    def __post_init__(self):
        with checkpointing_renames_quiet():  # TRL's default `gradient_checkpointing=True` reaches a renamed name
            super().__post_init__()  # GRPOConfig's: the LZE settings define none
        parse_lze_lists(self)
        validate_lze_args(self)


LZEGRPOConfig.__doc__ = """
    Configuration class for the [`LZEGRPOTrainer`].

    [`LZEGRPOConfig`] inherits every parameter of TRL's `GRPOConfig` and adds those of Learning-Zone Energy (LZE)
    selection ([`~lze_trl.method.settings.LZESettings`]): which prompt groups of a generation batch take part in the
    policy update (backward selection), and which prompts are still rolled out (forward pruning, off by default).
    Defaults are those of the authors' release.

""" + LZESettings.__doc__[LZESettings.__doc__.index("    Parameters:") :]


def default_output_dir(model: Any) -> str:
    """The output directory of a run without `args`: named as `GRPOTrainer` names it, with `-LZE` for `-GRPO`."""
    name = model if isinstance(model, str) else get_config_model_id(model.config)
    return f"{name.split('/')[-1]}-LZE"


def as_lze_config(args: GRPOConfig | None, model: Any) -> LZEGRPOConfig:
    """A copy of `args` as an [`LZEGRPOConfig`] ([`~lze_trl.method.validation.as_config`]): a plain `GRPOConfig` gets
    the LZE defaults."""
    return as_config(args, LZEGRPOConfig, LZE_FIELDS, default_output_dir(model))


__all__ = ["LZE_FIELDS", "LZEGRPOConfig", "as_lze_config", "default_output_dir"]
