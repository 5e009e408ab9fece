"""Backward selection: which prompt groups of a generation batch take part in the policy update.

Plain vectorised numpy/torch with no TRL import.
"""

from __future__ import annotations

import numpy as np
import torch


def group_pass_rates(rewards: torch.Tensor | np.ndarray, num_generations: int, threshold: float) -> np.ndarray:
    """
    Pass rate of each group of `num_generations` consecutive rollouts.

    A rollout is correct when its reward is `>= threshold`. Rollouts whose reward is NaN (a reward function that
    returned `None`) are left out of both the numerator and the denominator; a group with no scorable rollout gets
    a NaN pass rate.

    Args:
        rewards (`torch.Tensor` or `np.ndarray`):
            Rewards of shape `(num_groups * num_generations,)`, rows `[g * G, (g + 1) * G)` forming group `g`.
        num_generations (`int`):
            Group size `G`.
        threshold (`float`):
            Reward at or above which a rollout counts as correct.

    Returns:
        `np.ndarray`: pass rates of shape `(num_groups,)`, float64, NaN for unscorable groups.
    """
    if isinstance(rewards, torch.Tensor):
        rewards = rewards.detach().float().cpu().numpy()
    rewards = np.asarray(rewards, dtype=np.float64).reshape(-1, num_generations)
    scorable = ~np.isnan(rewards)
    correct = (np.where(scorable, rewards, -np.inf) >= threshold).sum(axis=1)
    counts = scorable.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, correct / np.maximum(counts, 1), np.nan)


def num_to_select(num_groups: int, num_active: int, ratio: float, min_ratio: float) -> int:
    """`k = min(max(int(n * ratio), int(n * min_ratio), 1), n_active)`, the quota of the spec."""
    if num_active == 0:
        return 0
    return min(max(int(num_groups * ratio), int(num_groups * min_ratio), 1), num_active)


def select_top_k(
    energies: np.ndarray,
    ratio: float = 0.4,
    min_ratio: float = 0.3,
    noise: float = 0.05,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """
    Top-`ratio` selection of groups by energy, with Gumbel exploration noise.

    Dead groups (energy 0, or NaN) are never selected and never take a place in the quota. Among the active groups,
    `k = min(max(int(n * ratio), int(n * min_ratio), 1), n_active)` are kept, ranked by `energy + g` with
    `g ~ Gumbel(0, s)` and `s = noise * max(max(E_active) - min(E_active), 0.01)`.

    Args:
        energies (`np.ndarray`):
            Energy of each group of the generation batch (all processes' groups together).
        ratio (`float`, *optional*, defaults to `0.4`):
            Fraction of the groups to keep.
        min_ratio (`float`, *optional*, defaults to `0.3`):
            Lower bound of the kept fraction.
        noise (`float`, *optional*, defaults to `0.05`):
            Scale of the Gumbel noise relative to the energy range; 0 ranks by energy alone.
        rng (`np.random.Generator`, *optional*):
            Source of the noise. Pass a generator seeded identically on every process so that all take the same
            decision. Defaults to a fresh unseeded generator.

    Returns:
        `np.ndarray`: boolean mask of the selected groups.
    """
    energies = np.asarray(energies, dtype=np.float64).reshape(-1)
    active = np.nan_to_num(energies, nan=0.0) > 0
    selected = np.zeros(len(energies), dtype=bool)
    k = num_to_select(len(energies), int(active.sum()), ratio, min_ratio)
    if k == 0:
        return selected
    active_idx = np.flatnonzero(active)
    keys = energies[active_idx]
    if noise > 0:
        rng = np.random.default_rng() if rng is None else rng
        scale = noise * max(keys.max() - keys.min(), 0.01)
        keys = keys + rng.gumbel(0.0, scale, size=len(keys))
    # Stable sort on -key: ties resolved by group order, identically on every process.
    chosen = active_idx[np.argsort(-keys, kind="stable")[:k]]
    selected[chosen] = True
    return selected
