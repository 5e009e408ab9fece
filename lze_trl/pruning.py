"""Forward pruning with replay: stop rolling out prompts that stay solved, replay a few to catch forgetting.

Plain numpy with no TRL import. State is dense over the indices of a map-style dataset.
"""

from __future__ import annotations

import numpy as np


class PromptPruner:
    """
    Prune pool of a map-style dataset's prompts.

    A prompt whose pass rate is 1.0 on `solved_after` consecutive observations joins the prune pool and is no longer
    sent to rollout generation. At the start of every epoch, [`~PromptPruner.plan_epoch`] draws a fraction
    `replay_fraction` of the pool (at least one prompt) to be rolled out again; an observed prompt of the pool that
    is no longer fully solved returns to the active pool, one that still is stays pruned.

    Every decision is a deterministic function of the observations and of `(seed, epoch)`, so all processes, and a
    run resumed from a checkpoint, take the same ones.

    Args:
        num_prompts (`int`):
            Size of the dataset.
        solved_after (`int`, *optional*, defaults to `2`):
            Consecutive fully-solved observations after which a prompt is pruned.
        replay_fraction (`float`, *optional*, defaults to `0.1`):
            Fraction of the prune pool replayed each epoch.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the replay draws.
    """

    def __init__(self, num_prompts: int, solved_after: int = 2, replay_fraction: float = 0.1, seed: int = 0) -> None:
        if solved_after < 1:
            raise ValueError(f"solved_after must be >= 1, got {solved_after}.")
        if not 0.0 <= replay_fraction <= 1.0:
            raise ValueError(f"replay_fraction must be in [0, 1], got {replay_fraction}.")
        self.num_prompts = num_prompts
        self.solved_after = solved_after
        self.replay_fraction = replay_fraction
        self.seed = seed
        self.pruned = np.zeros(num_prompts, dtype=bool)
        self.solved_streak = np.zeros(num_prompts, dtype=np.int16)
        self.replayed = np.zeros(num_prompts, dtype=bool)
        self.returned_total = 0

    @property
    def num_pruned(self) -> int:
        return int(self.pruned.sum())

    @property
    def num_replayed(self) -> int:
        return int(self.replayed.sum())

    def observe(self, prompt_ids: np.ndarray, pass_rates: np.ndarray) -> None:
        """
        Updates the streaks and the pool with one observation of each prompt.

        Args:
            prompt_ids (`np.ndarray`):
                Prompt ids (dataset row indices) of the observed prompts.
            pass_rates (`np.ndarray`):
                Their pass rates; NaN (no scorable rollout) leaves a prompt untouched.
        """
        prompt_ids = np.asarray(prompt_ids, dtype=np.int64)
        p = np.asarray(pass_rates, dtype=np.float64)
        valid = ~np.isnan(p)
        prompt_ids, p = prompt_ids[valid], p[valid]
        solved = p >= 1.0
        # A prompt observed twice in one call counts once, solved only if solved every time.
        uniq, inverse = np.unique(prompt_ids, return_inverse=True)
        all_solved = np.bincount(inverse, weights=~solved, minlength=len(uniq)) == 0
        streak = self.solved_streak[uniq].astype(np.int64)
        self.solved_streak[uniq] = np.where(all_solved, np.minimum(streak + 1, np.iinfo(np.int16).max), 0)
        forgotten = self.pruned[uniq] & ~all_solved
        self.returned_total += int(forgotten.sum())
        self.pruned[uniq[forgotten]] = False
        self.pruned[uniq] |= self.solved_streak[uniq] >= self.solved_after

    def plan_epoch(self, epoch: int) -> np.ndarray:
        """
        Draws this epoch's replays and returns the mask of prompts to roll out (active pool plus replays).

        Args:
            epoch (`int`):
                Epoch number; with the seed it determines the replay draw.

        Returns:
            `np.ndarray`: boolean mask over the dataset.
        """
        pool = np.flatnonzero(self.pruned)
        self.replayed[:] = False
        if len(pool) > 0 and self.replay_fraction > 0:
            num = max(1, int(self.replay_fraction * len(pool)))
            rng = np.random.default_rng([self.seed, epoch])
            self.replayed[rng.choice(pool, size=num, replace=False)] = True
        return ~self.pruned | self.replayed

    def state_dict(self) -> dict[str, np.ndarray]:
        return {
            "pruned": self.pruned.copy(),
            "solved_streak": self.solved_streak.copy(),
            "replayed": self.replayed.copy(),
            "returned_total": np.asarray(self.returned_total),
        }

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        if len(state["pruned"]) != self.num_prompts:
            raise ValueError(
                f"The checkpoint's prune state covers {len(state['pruned'])} prompts but the train dataset has "
                f"{self.num_prompts}: resume with the dataset the checkpoint was trained on."
            )
        self.pruned = np.asarray(state["pruned"], dtype=bool).copy()
        self.solved_streak = np.asarray(state["solved_streak"], dtype=np.int16).copy()
        self.replayed = np.asarray(state["replayed"], dtype=bool).copy()
        self.returned_total = int(state["returned_total"])
