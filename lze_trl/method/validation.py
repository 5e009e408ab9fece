"""The LZE settings' validation, above what it reads: each setting's own check, beside its field
([`~lze_trl.method.settings.setting_errors`]), and the checks that read several settings or the selector registry (each
registered selector validating its own settings). Both trainers' configs call [`validate_lze_args`] in
`__post_init__`; [`as_config`] converts a config of TRL's."""

from __future__ import annotations

import copy
import difflib
import functools
from dataclasses import MISSING, fields
from typing import Any

from .selectors import SELECTORS
from .settings import LZESettings, prunes, setting_errors


def validate_lze_args(args: LZESettings) -> None:
    """Raises a `ValueError` naming the setting and the fix for any out-of-range LZE setting of the config `args` (its
    fields' own checks, then those across settings); changes nothing."""
    SELECTORS.lookup(args.selector)
    for error in setting_errors(args):
        raise ValueError(error)
    SELECTORS.check(args)  # each selector validates its own settings
    num_generations, needs_pass_rates = args.num_generations, SELECTORS[args.selector].needs_pass_rates
    if num_generations is not None and num_generations < 2 and (needs_pass_rates or prunes(args)):
        raise ValueError(
            f"num_generations={num_generations} is invalid with selector={args.selector!r}: pass rates need a group "
            "of rollouts per prompt; set num_generations >= 2 (the paper uses 8)."
        )
    steps = getattr(args, "steps_per_generation", None)  # None: the async trainer, which keeps groups whole
    rows = args.per_device_train_batch_size * (steps or 1)
    if (
        not args.prune_refill
        and prunes(args)
        and steps is not None
        and num_generations is not None
        and rows % num_generations != 0
    ):
        raise ValueError(
            f"prune_refill=False cannot run: a step skips whole groups on every process, but "
            f"per_device_train_batch_size x steps_per_generation = {rows} rows is not a multiple of "
            f"num_generations={num_generations}. Change that, or set prune_refill=True."
        )
    if args.shadow and prunes(args):
        setting = "prune_solved" if args.prune_solved else "prune_unsolved"
        raise ValueError(
            f"shadow=True trains exactly as GRPOTrainer and measures what LZE would skip, but {setting} changes what "
            f"is generated. Set {setting}=False, or shadow=False."
        )


def as_config(args: Any, config_class: type, settings: tuple[str, ...], output_dir: str) -> Any:
    """
    A copy of `args` as a `config_class` (the trainer's own: the caller's object is never changed), for both
    trainers: a `config_class` is copied; `None` gives `config_class(output_dir)`; another config of TRL's keeps its
    values and gets `config_class`'s defaults of `settings` (LZE's), then `validate_lze_args`.
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
    validate_lze_args(converted)
    return converted


def parse_lze_lists(args: LZESettings) -> None:
    """Parses the list settings given as text (a command line or a recipe: `energy_terms="anchor,uncertainty"`) into
    lists, as `TrainingArguments.__post_init__` parses its own: the one
    place that rewrites a config's LZE values (both configs' `__post_init__`)."""
    if isinstance(args.energy_terms, str):
        args.energy_terms = [t.strip() for t in args.energy_terms.split(",")]


def hint_misspelled_keywords(config_class: type) -> type:
    """Makes `config_class(...)` (a dataclass) answer a keyword it has no field for with the nearest field's name, as
    the recipe path does, instead of the dataclass's bare `TypeError`; the class, changed in place."""
    init = config_class.__init__
    names = sorted(f.name for f in fields(config_class))

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            close = difflib.get_close_matches(unknown[0], names, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            raise TypeError(f"{config_class.__name__} got an unexpected keyword argument {unknown[0]!r}{hint}.")
        init(self, *args, **kwargs)

    config_class.__init__ = __init__
    return config_class
