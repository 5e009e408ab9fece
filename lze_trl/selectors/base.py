"""The selector interface: how the groups of a generation batch are chosen (and weighted) for the policy update.

A selector is a small class registered by name; [`LZEGRPOTrainer`] looks it up from `args.selector` and needs no change
for a new one. Plain numpy with no TRL import.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np


@dataclass
class GroupBatch:
    """
    What a selector sees of one generation batch: one entry per prompt group, all processes together.

    Attributes:
        prompt_ids (`np.ndarray`):
            Id of each group's prompt (`lze_prompt_id`: dataset index or content hash).
        pass_rates (`np.ndarray`):
            Pass rate of each group; NaN when no rollout could be scored.
        rewards (`np.ndarray`):
            Correctness reward of each rollout, shape `(num_groups, num_generations)`, NaN where unscorable.
        energies (`np.ndarray`):
            Learning-Zone Energy of each group (the trainer's [`EnergyScorer`], scored before its update).
        rng (`np.random.Generator`):
            Generator seeded from `(seed, generation index)`: identical on every process and on resume.
    """

    prompt_ids: np.ndarray
    pass_rates: np.ndarray
    rewards: np.ndarray
    energies: np.ndarray
    rng: np.random.Generator

    @property
    def num_groups(self) -> int:
        return len(self.prompt_ids)


@dataclass
class TrainContext:
    r"""
    What a selector may use before training ([`Selector.on_train_begin`]): callables built by the trainer, never the
    trainer itself, so that the method layer stays free of TRL.

    Args:
        num_prompts (`int`):
            Rows of the train dataset.
        output_dir (`str`):
            The run's output directory.
        judge_pass_rates (`Callable[[], np.ndarray]`):
            Rolls every prompt out `num_generations` times with the current policy and the run's generation settings
            and returns each prompt's pass rate under the correctness reward (NaN if unscorable), the same array on
            every process. Collective: every process must call it.
        judge_key (`Callable[[], str]`):
            A hash of everything the judged pass rates depend on (model weights, dataset, group size, seed,
            generation settings, correctness reward), to key a cache.
        all_processes (`Callable[[bool], bool]`):
            Whether a flag is true on every process. Collective.
        is_main_process (`bool`):
            Whether this process writes shared files.
    """

    num_prompts: int
    output_dir: str
    judge_pass_rates: Callable[[], np.ndarray]
    judge_key: Callable[[], str]
    all_processes: Callable[[bool], bool]
    is_main_process: bool = True


class Selector:
    """
    Base class of selectors.

    Subclasses set `name`, implement [`~Selector.select`] and, when they keep state, `state_dict` /
    `load_state_dict` (saved in checkpoints). The other hooks are optional:

    - [`~Selector.rollout_mask`]: stop rolling some prompts out (set `masks_rollouts = True`); the train sampler
      applies it at the start of each epoch.
    - [`~Selector.rollout_counts`]: roll some prompts out more than once per epoch and others not at all (also set
      `masks_rollouts = True`); the train sampler applies it at the start of each epoch, after `rollout_mask`.
    - [`~Selector.on_train_begin`]: work before the first step, through the callables of a [`TrainContext`] (e.g.
      judging prompts with the initial policy).
    - `refill_rounds`: ask the trainer to replace the groups weighted 0 by groups from up to that many extra
      generation rounds per generation batch (DAPO's dynamic sampling).
    - [`~Selector.metrics`]: values logged as `lze/<name>` with each generation batch.

    Every decision must be a deterministic function of what the selector is given (and of its state), so that all
    processes take the same one.

    Args:
        args ([`LZEGRPOConfig`]):
            The run's configuration; a selector reads its own settings from it.

    Attributes:
        refill_rounds (`int`):
            Extra generation rounds the trainer may run for one generation batch to replace the groups this selector
            weighted 0 by fresh groups it weights positively, bounded so that no process holds more rows than a
            plain generation batch. 0 (the default): no extra rollouts.
    """

    name: ClassVar[str] = ""
    #: Whether [`~Selector.select`] reads pass rates (then `num_generations >= 2` is required).
    needs_pass_rates: ClassVar[bool] = True
    #: Whether [`~Selector.rollout_mask`] may remove prompts: the trainer then requires a map-style train dataset and,
    #: with `max_steps`, runs as many (shorter) epochs as it takes.
    masks_rollouts: ClassVar[bool] = False
    refill_rounds: int = 0

    def __init__(self, args: Any) -> None:
        self.args = args

    @classmethod
    def check_args(cls, args: Any) -> None:
        """
        Validates this selector's own settings in `args`, raising a `ValueError` that names the setting and the fix.

        Called by [`LZEGRPOConfig`] for every registered selector (their settings are config fields whichever selector
        runs, so a bad value is caught even when unused). A selector registered outside the package reads its
        settings from `args.selector_kwargs` (a dict) and checks them here: adding one touches neither the trainer nor
        the config.

        Args:
            args ([`LZEGRPOConfig`]):
                The run's configuration.
        """

    def select(self, batch: GroupBatch) -> np.ndarray:
        """
        Weight of each group in the update: 0 removes the group's rows from the update's forward/backward, 1 keeps
        them as they are, any other positive value scales their advantages (a weighted loss).

        Args:
            batch ([`GroupBatch`]):
                The generation batch's groups.

        Returns:
            `np.ndarray`: float weights of shape `(batch.num_groups,)`.
        """
        raise NotImplementedError

    def rollout_mask(self, num_prompts: int, epoch: int) -> np.ndarray | None:
        """Prompts (dataset indices) to roll out in `epoch`, or `None` for all of them."""
        return None

    def rollout_counts(self, num_prompts: int, epoch: int) -> np.ndarray | None:
        """
        Groups of `num_generations` rollouts of each prompt (dataset index) in `epoch`: non-negative integers of
        shape `(num_prompts,)`, or `None` for one each. Prompts removed by `rollout_mask` or pruning get none.
        """
        return None

    def on_train_begin(self, context: TrainContext) -> None:
        """
        Called by [`LZEGRPOTrainer.train`] before training starts, after a resumed run restored the selector's state
        and before the train dataloader (hence the sampler's first pool) is built. Must make the same collective calls
        on every process.

        Args:
            context ([`TrainContext`]):
                The train dataset's size, the output directory and the collective callables the trainer provides.
        """

    def metrics(self) -> dict[str, float]:
        """Values to log (as `lze/<key>`) with each generation batch; identical on every process."""
        return {}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        pass


def check_setting(condition: bool, setting: str, value: object, requirement: str) -> None:
    """Raises a `ValueError` `"<setting>=<value> is invalid: <requirement>"` unless `condition` holds."""
    if not condition:
        raise ValueError(f"{setting}={value!r} is invalid: {requirement}")


def is_finite_number(x: object) -> bool:
    """Whether `x` is a finite `int` or `float` (not a `bool`)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fit_groups(
    weights: np.ndarray, rows_used: np.ndarray, num_generations: int, rows_per_process: int
) -> tuple[np.ndarray, np.ndarray]:
    """
    Which positively weighted groups of one generation round fit in what the processes have left of a batch.

    A round's rows are laid out as the trainer generates them: group `g` is the global rows `[g * G, (g + 1) * G)`,
    and process `p` holds the rows `[p * L, (p + 1) * L)`. Groups are taken in order; one is kept when every process
    holding some of its rows has room for them (`rows_used + its rows <= L`), else its weight becomes 0. Used by the
    trainer to merge the rounds of a refilled generation batch (DAPO) without growing any process's batch.

    Args:
        weights (`np.ndarray`):
            The selector's weights of the round's groups.
        rows_used (`np.ndarray`):
            Rows already kept on each process, shape `(num_processes,)`.
        num_generations (`int`):
            Group size `G`.
        rows_per_process (`int`):
            Rows per process of a generation batch, `L`.

    Returns:
        `tuple[np.ndarray, np.ndarray]`: the weights with the groups that do not fit set to 0, and the updated rows
        used per process.
    """
    weights = np.asarray(weights, dtype=np.float64).copy()
    rows_used = np.asarray(rows_used, dtype=np.int64).copy()
    for g in np.flatnonzero(weights > 0):
        owners = np.arange(g * num_generations, (g + 1) * num_generations) // rows_per_process
        rows = np.bincount(owners, minlength=len(rows_used))[: len(rows_used)]
        if np.all(rows_used + rows <= rows_per_process):
            rows_used += rows
        else:
            weights[g] = 0.0
    return weights, rows_used


SELECTORS: dict[str, type[Selector]] = {}


def register_selector(cls: type[Selector]) -> type[Selector]:
    """Class decorator adding a selector to the registry under `cls.name`."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} must set a `name` to be registered.")
    SELECTORS[cls.name] = cls
    return cls


def get_selector(name: str) -> type[Selector]:
    """The selector class registered as `name`."""
    if name not in SELECTORS:
        raise ValueError(f"selector={name!r} is invalid: use one of {sorted(SELECTORS)}.")
    return SELECTORS[name]
