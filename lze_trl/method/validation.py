"""The LZE settings' validation, above what it reads: the settings' own checks ([`~lze_trl.method.settings`]) and
the selector registry, each registered selector validating its own settings. Both trainers'
configs call [`validate_lze_args`] in `__post_init__`; [`as_config`] converts a config of TRL's."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from .checks import check_setting as _check
from .energy import ENERGY_TERMS
from .selectors import SELECTORS
from .settings import SETTING_CHECKS, LZESettings, prunes


def validate_lze_args(args: LZESettings) -> None:
    """Raises a `ValueError` naming the setting and the fix for any out-of-range LZE setting; changes nothing."""
    SELECTORS.lookup(args.selector)
    for name, valid, fix in SETTING_CHECKS:
        _check(valid(getattr(args, name)), name, getattr(args, name), fix)
    terms = list(args.energy_terms)
    fix = f"use a non-empty subset of {list(ENERGY_TERMS)}."
    _check(len(terms) > 0 and set(terms) <= set(ENERGY_TERMS), "energy_terms", args.energy_terms, fix)
    SELECTORS.check(args)  # each selector validates its own settings
    G, needs_pass_rates = args.num_generations, SELECTORS[args.selector].needs_pass_rates
    if G is not None and G < 2 and (needs_pass_rates or prunes(args)):
        raise ValueError(
            f"num_generations={G} is invalid with selector={args.selector!r}: pass rates need a group of rollouts per "
            "prompt; set num_generations >= 2 (the paper uses 8)."
        )
    _check(isinstance(args.shadow, bool), "shadow", args.shadow, "use True (measure, train as GRPO) or False.")
    fix = "use True (steps refilled from the epoch's other prompts) or False (skip, generating fewer rollouts)."
    _check(isinstance(args.prune_refill, bool), "prune_refill", args.prune_refill, fix)
    steps = getattr(args, "steps_per_generation", None)  # None: the async trainer, which keeps groups whole
    rows = args.per_device_train_batch_size * (steps or 1)
    if not args.prune_refill and prunes(args) and steps is not None and G is not None and rows % G != 0:
        raise ValueError(
            f"prune_refill=False cannot run: a step skips whole groups on every process, but "
            f"per_device_train_batch_size x steps_per_generation = {rows} rows is not a multiple of "
            f"num_generations={G}. Change that, or set prune_refill=True."
        )
    _check(isinstance(args.thread_policy, bool), "thread_policy", args.thread_policy, "use True or False.")
    if args.shadow and prunes(args):
        setting = "prune_solved" if args.prune_solved else "prune_unsolved"
        raise ValueError(
            f"shadow=True trains exactly as GRPOTrainer and measures what LZE would skip, but {setting} changes what "
            f"is generated. Set {setting}=False, or shadow=False."
        )


def as_config(
    args: Any, config_class: type, settings: tuple[str, ...], output_dir: str, checks: tuple[Callable, ...] = ()
) -> Any:
    """
    A copy of `args` as a `config_class` (the trainer's own: the caller's object is never changed), for both
    trainers: a `config_class` is copied; `None` gives `config_class(output_dir)`; another config of TRL's keeps its
    values and gets `config_class`'s defaults of `settings` (LZE's), then `validate_lze_args` and `checks`.
    """
    if isinstance(args, config_class):
        return copy.copy(args)
    if args is None:
        return config_class(output_dir)
    # Copy the already post-initialised values: running TRL's __post_init__ twice is not idempotent.
    converted = config_class.__new__(config_class)
    converted.__dict__.update(args.__dict__)
    for f in fields(config_class):
        if f.name in settings:
            setattr(converted, f.name, f.default_factory() if f.default is MISSING else f.default)
    for check in (*checks, validate_lze_args):
        check(converted)
    return converted
