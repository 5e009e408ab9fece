"""The selector interface: how the groups of a generation batch are chosen (and weighted) for the policy update.

A selector is a small class registered by name; [`LZEGRPOTrainer`] looks it up from `args.selector` and needs no change
for a new one. Plain numpy with no TRL import.
"""

from __future__ import annotations

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


class Selector:
    """
    Base class of selectors.

    Subclasses set `name`, implement [`~Selector.select`] and, when they keep state, `state_dict` /
    `load_state_dict` (saved in checkpoints). A selector that stops rolling some prompts out implements
    [`~Selector.rollout_mask`], which the train sampler applies at the start of each epoch.

    Args:
        args ([`LZEGRPOConfig`]):
            The run's configuration; a selector reads its own settings from it.
    """

    name: ClassVar[str] = ""
    #: Whether [`~Selector.select`] reads pass rates (then `num_generations >= 2` is required).
    needs_pass_rates: ClassVar[bool] = True

    def __init__(self, args: Any) -> None:
        self.args = args

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

    def state_dict(self) -> dict[str, np.ndarray]:
        return {}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        pass


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
