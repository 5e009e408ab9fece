"""Forward pruning: stop rolling out prompts that stay solved, revisit a few each epoch to catch forgetting.

Plain numpy with no TRL import. The streaks are the per-prompt table's ([`PromptState`]); the pruner keeps only the
epoch's revisits.
"""

from __future__ import annotations

import numpy as np

from .prompt_state import PromptState


class PromptPruner:
    """
    Forward pruning as an epoch planner.

    A prompt whose pass rate was 1.0 on its last `solved_after` consecutive observations (the table's
    `saturated_streak`) is in the prune pool and is not rolled out. At the start of every epoch,
    [`~PromptPruner.plan_epoch`] draws a fraction `revisit_fraction` of the pool (at least one prompt) to be rolled
    out again; a revisited prompt that is no longer fully solved ends its streak, and so leaves the pool; one that
    still is stays pruned.

    Every decision is a deterministic function of the table and of `(seed, epoch)`, so all processes, and a run
    resumed from a checkpoint, take the same ones.

    Args:
        solved_after (`int`, *optional*, defaults to `2`):
            Consecutive fully-solved observations after which a prompt is pruned.
        revisit_fraction (`float`, *optional*, defaults to `0.1`):
            Fraction of the prune pool revisited each epoch.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the revisit draws.
    """

    def __init__(self, solved_after: int = 2, revisit_fraction: float = 0.1, seed: int = 0) -> None:
        if solved_after < 1:
            raise ValueError(f"solved_after must be >= 1, got {solved_after}.")
        if not 0.0 <= revisit_fraction <= 1.0:
            raise ValueError(f"revisit_fraction must be in [0, 1], got {revisit_fraction}.")
        self.solved_after = solved_after
        self.revisit_fraction = revisit_fraction
        self.seed = seed
        self.revisited_ids = np.empty(0, dtype=np.int64)

    @property
    def num_revisited(self) -> int:
        return len(self.revisited_ids)

    def num_pruned(self, state: PromptState) -> int:
        """Prompts in the prune pool now."""
        return int((state.saturated_streak[: len(state)] >= self.solved_after).sum())

    def pruned(self, ids: np.ndarray, state: PromptState) -> np.ndarray:
        """Whether each prompt of `ids` is in the prune pool."""
        return state.get(ids)["saturated_streak"] >= self.solved_after

    def plan_epoch(self, epoch: int, order: np.ndarray, ids: np.ndarray, state: PromptState) -> np.ndarray:
        """
        Draws this epoch's revisits and returns the epoch's rows: `order` without the pruned prompts, but for the
        revisited ones.

        Args:
            epoch (`int`):
                Epoch number; with the seed it determines the revisit draw.
            order (`np.ndarray`):
                The epoch's rows in sampling order.
            ids (`np.ndarray`):
                Their prompt ids.
            state ([`PromptState`]):
                The per-prompt table.
        """
        pruned = self.pruned(ids, state)
        pool = np.unique(ids[pruned])
        self.revisited_ids = np.empty(0, dtype=np.int64)
        if len(pool) > 0 and self.revisit_fraction > 0:
            num = max(1, int(self.revisit_fraction * len(pool)))
            rng = np.random.default_rng([self.seed, epoch])
            self.revisited_ids = np.sort(rng.choice(pool, size=num, replace=False))
        return order[~pruned | np.isin(ids, self.revisited_ids)]

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"revisited_ids": self.revisited_ids.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.revisited_ids = np.asarray(state["revisited_ids"], dtype=np.int64).copy()
