"""Backward selection: which prompt groups of a generation batch take part in the policy update.

Plain vectorised numpy: no torch or TRL import (a torch tensor of rewards is accepted and converted).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def group_pass_rates(rewards: np.ndarray, num_generations: int, pass_threshold: float) -> np.ndarray:
    """
    Pass rate of each group of `num_generations` consecutive rollouts.

    A rollout is correct when its reward is `>= pass_threshold`. Rollouts whose reward is NaN (a reward function that
    returned `None`) are left out of both the numerator and the denominator; a group with no scorable rollout gets
    a NaN pass rate.

    Args:
        rewards (`torch.Tensor` or `np.ndarray`):
            Rewards of shape `(num_groups * num_generations,)`, rows `[g * G, (g + 1) * G)` forming group `g`.
        num_generations (`int`):
            Group size `G`.
        pass_threshold (`float`):
            Reward at or above which a rollout counts as correct (the config's `pass_threshold`).

    Returns:
        `np.ndarray`: pass rates of shape `(num_groups,)`, float64, NaN for unscorable groups.
    """
    if hasattr(rewards, "detach"):  # a torch tensor (this module does not import torch)
        rewards = rewards.detach().float().cpu().numpy()
    rewards = np.asarray(rewards, dtype=np.float64).reshape(-1, num_generations)
    scorable = ~np.isnan(rewards)
    correct = (np.where(scorable, rewards, -np.inf) >= pass_threshold).sum(axis=1)
    counts = scorable.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, correct / np.maximum(counts, 1), np.nan)


def in_learning_zone(pass_rate: Any) -> np.ndarray:
    """Whether each pass rate is in the learning zone, strictly between 0 and 1 (NaN: no): some rollouts right, some
    wrong, a correctness signal for GRPO. Outside it a group is *saturated*: solved (1) or unsolved (0)."""
    p = np.asarray(pass_rate, dtype=np.float64)
    return (p > 0) & (p < 1)


SPREAD_TOLERANCE = 1e-8
"""Standard deviation of a group's total rewards above which they differ (TRL's zero-std tolerance)."""


def live_groups(pass_rates: Any, correctness: Any, totals: Any) -> np.ndarray:
    """
    Whether each group is *live*: GRPO can learn from it. The one definition across the trainer's metrics
    (`lze/dead_frac` is the share of scorable groups that are not live), the selectors, the guards and the benchmarks.

    - Binary correctness reward (every scorable value of the group 0 or 1): live when the pass rate is strictly
      between 0 and 1 (some rollouts right, some wrong), the paper's rule.
    - Non-binary correctness reward (a score, a length or format reward): a group all on one side of
      `pass_threshold` is still live when its total rewards (all reward functions, weighted, as GRPO's advantages see
      them) differ over at least two scorable rollouts (standard deviation `> SPREAD_TOLERANCE`).

    A group with no scorable rollout (NaN pass rate) is never live, and not dead either.

    Args:
        pass_rates (array-like):
            Pass rate of each group, shape `(num_groups,)`.
        correctness (array-like):
            Correctness reward of each rollout, shape `(num_groups, num_generations)`, NaN where unscorable.
        totals (array-like):
            Total (weighted) reward of each rollout, same shape.

    Returns:
        `np.ndarray`: boolean mask.
    """
    p = np.asarray(pass_rates, dtype=np.float64)
    correctness = np.asarray(correctness, dtype=np.float64).reshape(len(p), -1)
    binary = np.all(np.isnan(correctness) | (correctness == 0) | (correctness == 1), axis=1)
    at_ends = (p == 0) | (p == 1)
    return in_learning_zone(p) | (at_ends & ~binary & (reward_spread(totals, len(p)) > SPREAD_TOLERANCE))


def reward_spread(totals: Any, num_groups: int) -> np.ndarray:
    """Standard deviation of each group's finite total rewards; 0 for a group with fewer than two."""
    totals = np.asarray(totals, dtype=np.float64).reshape(num_groups, -1)
    finite = np.isfinite(totals)
    values = np.where(finite, totals, 0.0)
    count = finite.sum(axis=1)
    mean = values.sum(axis=1) / np.maximum(count, 1)
    var = (np.where(finite, values - mean[:, None], 0.0) ** 2).sum(axis=1) / np.maximum(count, 1)
    return np.where(count >= 2, np.sqrt(var), 0.0)


def num_to_select(num_groups: int, num_active: int, selection_ratio: float) -> int:
    """`quota = min(max(int(n * selection_ratio), 1), n_active)`, the paper's quota (its floor `rho_min` <= `rho`
    never changes it)."""
    if num_active == 0:
        return 0
    return min(max(int(num_groups * selection_ratio), 1), num_active)


def select_top_k(
    energies: np.ndarray,
    live: np.ndarray,
    selection_ratio: float = 0.4,
    selection_noise: float = 0.05,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """
    Top-`selection_ratio` selection of groups by energy, with Gumbel exploration noise (the parameters are the
    config's fields of the same names).

    Only live groups ([`live_groups`]) are selected, and only they count against the quota. Among them,
    `quota = min(max(int(n * selection_ratio), 1), n_live)` are kept, ranked by
    `energy + g` with `g ~ Gumbel(0, s)` and `s = selection_noise * max(max(E_live) - min(E_live), 0.01)`.

    Args:
        energies (`np.ndarray`):
            Energy of each group of the generation batch (all processes' groups together).
        live (`np.ndarray`):
            Whether each group is live.
        selection_ratio (`float`, *optional*, defaults to `0.4`):
            Fraction of the groups to keep.
        selection_noise (`float`, *optional*, defaults to `0.05`):
            Scale of the Gumbel noise relative to the energy range; 0 ranks by energy alone.
        rng (`np.random.Generator`, *optional*):
            Source of the noise. Pass a generator seeded identically on every process so that all take the same
            decision. Defaults to a fresh unseeded generator.

    Returns:
        `np.ndarray`: boolean mask of the selected groups.
    """
    energies = np.nan_to_num(np.asarray(energies, dtype=np.float64).reshape(-1), nan=0.0)
    active = np.asarray(live, dtype=bool).reshape(-1)
    selected = np.zeros(len(energies), dtype=bool)
    quota = num_to_select(len(energies), int(active.sum()), selection_ratio)
    if quota == 0:
        return selected
    active_idx = np.flatnonzero(active)
    keys = energies[active_idx]
    if selection_noise > 0:
        rng = np.random.default_rng() if rng is None else rng
        scale = selection_noise * max(keys.max() - keys.min(), 0.01)
        keys = keys + rng.gumbel(0.0, scale, size=len(keys))
    # Stable sort on -key: ties resolved by group order, identically on every process.
    chosen = active_idx[np.argsort(-keys, kind="stable")[:quota]]
    selected[chosen] = True
    return selected


SPREAD_ENERGY_MAX = 0.01
"""Highest energy given to a group kept alive only by the spread of its total rewards ([`spread_energies`]): below
the lowest energy a group in the learning zone can have with up to 16 rollouts (`0.05 * 4 * (1/16) * (15/16)` =
0.0117), so such groups rank after every learning-zone group."""


def spread_energies(energies: np.ndarray, pass_rates: np.ndarray, live: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """
    Energies of the live groups whose pass rate is 0 or 1 (live by the spread of their total rewards under a
    non-binary correctness reward, see [`live_groups`]): the energy formula gives them 0, so they get
    `SPREAD_ENERGY_MAX * s_g / max_h s_h`, `s_g` the standard deviation of their total rewards over the batch's such
    groups `h`: they rank after every group in the learning zone, and among their kind by how much their rewards
    differ. Other energies are returned as they are (a new array).
    """
    energies = np.asarray(energies, dtype=np.float64).copy()
    p = np.asarray(pass_rates, dtype=np.float64)
    candidates = np.asarray(live, dtype=bool) & ((p == 0) | (p == 1)) & (energies <= 0)
    if candidates.any():
        spread = reward_spread(totals, len(p))
        energies[candidates] = SPREAD_ENERGY_MAX * spread[candidates] / spread[candidates].max()
    return energies
