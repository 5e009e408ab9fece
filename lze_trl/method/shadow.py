"""Shadow mode (`shadow=True`) as one object: the update takes every group, exactly as `GRPOTrainer`'s, while the
run's selector and forward pruning's rule decide only what is logged (`lze/shadow_*`). Plain numpy, no TRL."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .pruning import SIDES, PromptPruner
from .selectors import GroupBatch


if TYPE_CHECKING:
    from .prompt_state import PromptState
    from .settings import LZESettings


class Decision(NamedTuple):
    """A generation batch's decision: each group's `weights` in the update, the batch's `lze/` `metrics`, and in shadow
    mode the groups the selector would have kept (`shadow_kept`, `None` otherwise)."""

    weights: np.ndarray
    metrics: dict[str, float]
    shadow_kept: np.ndarray | None = None


class Shadow:
    """
    What a shadow run measures beside GRPO's update, decided in one place for both trainers: the groups the selector
    would keep (and, from the rows each trainer holds, their loss tokens: [`Shadow.update_tokens`]), and, per side,
    the groups whose prompt forward pruning's rule (`prune_solved_after`, `prune_unsolved_after`, both sides, no
    exploration) would have skipped before generating them, and how many of those turned out live: the rule's exact
    precision on the run, which only a run that generates every group can measure.
    """

    def __init__(self, args: LZESettings, num_generations: int) -> None:
        self.pruner = PromptPruner(args.prune_solved_after, unsolved_after=args.prune_unsolved_after)
        self.num_generations = num_generations
        self.sides: list[np.ndarray] = []  # each group scored since the last decision: the side the rule predicted

    def predict(self, keys: np.ndarray, prompts: PromptState) -> None:
        """Records what the rule predicts of the groups of `keys`, from their prompts' history before they are
        scored (what it would have known before generating them)."""
        self.sides.append(self.pruner.side_of(keys, prompts)[0])

    def decide(self, batch: GroupBatch, weights: np.ndarray) -> Decision:
        """The update's weights (every group), the `lze/shadow_*` metrics of the scored `batch` and the selector's
        `weights`, and the groups it would have kept."""
        sides, self.sides = np.concatenate(self.sides), []
        kept = np.asarray(weights) > 0
        out = {
            "lze/shadow_selected_frac": float(kept.mean()),
            "lze/shadow_update_rows": float(kept.sum() * self.num_generations),
            "lze/shadow_prunable_frac": float((sides >= 0).mean()),
        }
        for s, side in enumerate(SIDES):
            predicted = sides == s
            out[f"lze/shadow_prunable_{side}"] = float(predicted.sum())
            out[f"lze/shadow_prunable_live_{side}"] = float((predicted & batch.live).sum())
        return Decision(np.ones(len(kept)), out, kept)

    @staticmethod
    def update_tokens(tokens: np.ndarray, kept: np.ndarray) -> dict[str, float]:
        """`lze/shadow_update_tokens`: the loss tokens of the groups the selector would have kept, from each group's
        loss `tokens` (every process's, as each trainer counts them in its rows)."""
        return {"lze/shadow_update_tokens": float(np.asarray(tokens)[np.asarray(kept, dtype=bool)].sum())}


__all__ = ["Decision", "Shadow"]
