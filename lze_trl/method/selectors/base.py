"""The selector interface: how the groups of a generation batch are chosen (and weighted) for the policy update."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..checks import Registry
from ..settings import LZESettings


@dataclass
class GroupBatch:
    """
    What a selector sees of one generation batch: one entry per prompt group, all processes together.

    Attributes:
        prompt_keys (`np.ndarray`):
            Key of each group's prompt ([`~lze_trl.method.prompt_keys.PromptKeys`]).
        pass_rates (`np.ndarray`):
            Pass rate of each group; NaN when no rollout could be scored.
        rewards (`np.ndarray`):
            Correctness reward of each rollout, shape `(num_groups, rollouts)`, NaN where unscorable.
        energies (`np.ndarray`):
            Energy of each group (before the per-prompt table absorbs this observation).
        live (`np.ndarray`):
            Whether each group is live (GRPO can learn from it, [`~lze_trl.method.selection.live_groups`]): the groups
            a selector may choose.
        ema_pass_rates (`np.ndarray`):
            Each prompt's pass-rate EMA after this observation.
        rng (`np.random.Generator`):
            Seeded from `(seed, generation batch)`: the same on every process and on resume.
    """

    prompt_keys: np.ndarray
    pass_rates: np.ndarray
    rewards: np.ndarray
    energies: np.ndarray
    live: np.ndarray
    ema_pass_rates: np.ndarray
    rng: np.random.Generator

    @property
    def num_groups(self) -> int:
        return len(self.prompt_keys)

    def with_dead(self, count: int) -> GroupBatch:
        """The batch with `count` more groups after its own, none live (prompt key -1, no pass rate, energy 0):
        groups of its prompts that were not generated because they were predicted dead (skip mode), which count in a
        quota as the dead groups of a batch that generated them do."""
        if count <= 0:
            return self
        num_generations = self.rewards.shape[1]
        return dataclasses.replace(
            self,
            prompt_keys=np.concatenate([self.prompt_keys, np.full(count, -1, dtype=np.int64)]),
            pass_rates=np.concatenate([self.pass_rates, np.full(count, np.nan)]),
            rewards=np.concatenate([self.rewards, np.full((count, num_generations), np.nan)]),
            energies=np.concatenate([self.energies, np.zeros(count)]),
            live=np.concatenate([self.live, np.zeros(count, dtype=bool)]),
            ema_pass_rates=np.concatenate([self.ema_pass_rates, np.full(count, np.nan)]),
        )

    @classmethod
    def concatenate(cls, parts: list[GroupBatch]) -> GroupBatch:
        """One batch of several scored in turn (the first one's noise source, seeded by the generation batch)."""
        if len(parts) == 1:
            return parts[0]
        names = ("prompt_keys", "pass_rates", "rewards", "energies", "live", "ema_pass_rates")
        return cls(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in names}, rng=parts[0].rng)


class Selector:
    """
    Base class of selectors, built from the run's config (`args`), from which it reads its own settings.

    Subclasses set `name` and implement [`~Selector.select`]; optionally `state_dict` / `load_state_dict` (saved in
    checkpoints), [`~Selector.plan_epoch`] (with `plans_rollouts = True`: which prompts an epoch rolls out, asked
    after forward pruning) and [`~Selector.metrics`]. Every decision must be a deterministic function of what the
    selector is given and of its state, so that all processes take the same one.
    """

    name: ClassVar[str] = ""
    #: Whether [`~Selector.select`] reads pass rates (then `num_generations >= 2` is required).
    needs_pass_rates: ClassVar[bool] = True
    #: Whether [`~Selector.plan_epoch`] changes the epochs: the trainer then requires a map-style train dataset and,
    #: with `max_steps`, runs as many (shorter) epochs as it takes.
    plans_rollouts: ClassVar[bool] = False

    def __init__(self, args: LZESettings) -> None:
        self.args = args

    @classmethod
    def check_args(cls, args: LZESettings) -> None:
        """Validates this selector's own settings in the config `args` (a config subclass's, for a selector from
        outside the package), raising a `ValueError` that names the setting and the fix; [`LZEGRPOConfig`] calls it
        for every registered selector."""

    def select(self, batch: GroupBatch) -> np.ndarray:
        """
        The weight of each group in the update: 0 removes its rows, 1 keeps them, another positive value scales their
        advantages.

        Args:
            batch ([`GroupBatch`]):
                The generation batch's groups.

        Returns:
            `np.ndarray`: float weights of shape `(batch.num_groups,)`.
        """
        raise NotImplementedError

    def plan_epoch(self, epoch: int, order: np.ndarray, keys: np.ndarray, state: Any) -> np.ndarray:
        """The dataset indices `epoch` rolls out, one per group, from `order` (its permutation of the indices forward
        pruning left) with their prompt `keys` and the per-prompt table `state`: a subset skips prompts, a repeated
        index rolls its prompt out again."""
        return order

    def metrics(self) -> dict[str, float]:
        """Values to log (as `lze/<key>`) with each generation batch; identical on every process."""
        return {}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        pass


SELECTORS: Registry[type[Selector]] = Registry("selector")
"""The selectors by name (what `selector` names)."""
register_selector = SELECTORS.register
"""Class decorator adding a selector to [`SELECTORS`] under `cls.name`."""
get_selector = SELECTORS.lookup
"""The selector class registered as a name (a `ValueError` naming `selector` otherwise)."""
