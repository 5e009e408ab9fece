"""Forward pruning: stop rolling out prompts that stay solved, revisit a few each epoch to catch forgetting."""

from __future__ import annotations

import numpy as np

from .prompt_state import PromptState


class PromptPruner:
    """
    Forward pruning as an epoch planner (`solved_after` and `revisit_fraction`: the config's `prune_solved_after` and
    `prune_revisit_fraction`; `seed`: of the revisit draws).

    A prompt fully solved on its last `solved_after` observations (the per-prompt table's `saturated_streak`) is in the
    prune pool and is not rolled out. Each epoch, [`~PromptPruner.plan_epoch`] draws `revisit_fraction` of the pool (at
    least one prompt) to roll out again: one no longer fully solved ends its streak and leaves the pool. Every decision
    is a function of the table and of `(seed, epoch)`: the same on every process and on resume.
    """

    def __init__(self, solved_after: int = 2, revisit_fraction: float = 0.1, seed: int = 0) -> None:
        if solved_after < 1 or not 0.0 <= revisit_fraction <= 1.0:  # a public class: checked here too, not only by
            raise ValueError(  # LZEGRPOConfig (solved_after=0 would prune every prompt)
                f"PromptPruner needs solved_after >= 1 and revisit_fraction in [0, 1]; got {solved_after} and "
                f"{revisit_fraction}."
            )
        self.solved_after = solved_after
        self.revisit_fraction = revisit_fraction
        self.seed = seed
        self.revisited_keys = np.empty(0, dtype=np.int64)

    @property
    def num_revisited(self) -> int:
        return len(self.revisited_keys)

    def num_pruned(self, state: PromptState) -> int:
        """Prompts in the prune pool now."""
        return int((state.saturated_streak[: len(state)] >= self.solved_after).sum())

    def pruned(self, keys: np.ndarray, state: PromptState) -> np.ndarray:
        """Whether each prompt of `keys` is in the prune pool."""
        return state.get(keys)["saturated_streak"] >= self.solved_after

    def plan_epoch(self, epoch: int, order: np.ndarray, keys: np.ndarray, state: PromptState) -> np.ndarray:
        """Draws `epoch`'s revisits and returns its dataset indices: `order` (in sampling order, with their prompt
        `keys`) without the pruned prompts but the revisited ones."""
        pruned = self.pruned(keys, state)
        pool = np.unique(keys[pruned])
        self.revisited_keys = np.empty(0, dtype=np.int64)
        if len(pool) > 0 and self.revisit_fraction > 0:
            num = max(1, int(self.revisit_fraction * len(pool)))
            rng = np.random.default_rng([self.seed, epoch])
            self.revisited_keys = np.sort(rng.choice(pool, size=num, replace=False))
        return order[~pruned | np.isin(keys, self.revisited_keys)]

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"revisited_keys": self.revisited_keys.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.revisited_keys = np.asarray(state["revisited_keys"], dtype=np.int64).copy()
