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


def group_reward_std(rewards: np.ndarray) -> np.ndarray:
    """
    Population standard deviation of each group's scorable (non-NaN) rewards; NaN for a group with fewer than two.

    Args:
        rewards (`np.ndarray`):
            Rewards of shape `(num_groups, num_generations)`.

    Returns:
        `np.ndarray`: shape `(num_groups,)`.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    scorable = ~np.isnan(rewards)
    count = scorable.sum(axis=1)
    values = np.where(scorable, rewards, 0.0)
    mean = values.sum(axis=1) / np.maximum(count, 1)
    var = (np.where(scorable, values - mean[:, None], 0.0) ** 2).sum(axis=1) / np.maximum(count, 1)
    return np.where(count >= 2, np.sqrt(var), np.nan)


ZONES: tuple[str, ...] = ("unsolved", "learning zone", "solved")
"""The zones of a pass rate (see [`zone_state`])."""


def in_learning_zone(pass_rate: Any) -> np.ndarray:
    """
    Whether each pass rate is in the learning zone, strictly between 0 and 1 (NaN: no). Only such groups carry a
    correctness signal for GRPO: some rollouts right, some wrong.

    Args:
        pass_rate (array-like):
            Pass rates.

    Returns:
        `np.ndarray`: boolean mask.
    """
    p = np.asarray(pass_rate, dtype=np.float64)
    return (p > 0) & (p < 1)


def is_dead(pass_rate: Any) -> np.ndarray:
    """
    Whether each group is *dead*: pass rate 0 or 1, every scorable rollout wrong or every one right, so that its
    correctness rewards do not vary. NaN (no scorable rollout) is neither dead nor in the learning zone. The one
    meaning of "dead" across the trainer's `lze/dead_frac`, the rollout filter and the benchmarks' dead share (a
    dead group under a non-binary correctness reward may still be trained on, see [`reward_spread_energies`]).

    Args:
        pass_rate (array-like):
            Pass rates.

    Returns:
        `np.ndarray`: boolean mask.
    """
    p = np.asarray(pass_rate, dtype=np.float64)
    return (p <= 0) | (p >= 1)


def zone_state(pass_rate: Any) -> np.ndarray:
    """
    Names the zone of each pass rate: `"unsolved"` (0), `"learning zone"` (strictly between), `"solved"` (1).

    Args:
        pass_rate (array-like):
            Pass rates; NaN gives `"unknown"`.

    Returns:
        `np.ndarray`: array of strings.
    """
    p = np.asarray(pass_rate, dtype=np.float64)
    return np.select([p <= 0, p >= 1, in_learning_zone(p)], ["unsolved", "solved", "learning zone"], "unknown")


def num_to_select(num_groups: int, num_active: int, selection_ratio: float, min_selection_ratio: float) -> int:
    """`k = min(max(int(n * selection_ratio), int(n * min_selection_ratio), 1), n_active)`, the quota of the spec."""
    if num_active == 0:
        return 0
    return min(max(int(num_groups * selection_ratio), int(num_groups * min_selection_ratio), 1), num_active)


def select_top_k(
    energies: np.ndarray,
    selection_ratio: float = 0.4,
    min_selection_ratio: float = 0.3,
    selection_noise: float = 0.05,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """
    Top-`selection_ratio` selection of groups by energy, with Gumbel exploration noise (the parameters are the
    config's fields of the same names).

    Dead groups (energy 0, or NaN) are never selected and never take a place in the quota. Among the active groups,
    `k = min(max(int(n * selection_ratio), int(n * min_selection_ratio), 1), n_active)` are kept, ranked by
    `energy + g` with `g ~ Gumbel(0, s)` and `s = selection_noise * max(max(E_active) - min(E_active), 0.01)`.

    Args:
        energies (`np.ndarray`):
            Energy of each group of the generation batch (all processes' groups together).
        selection_ratio (`float`, *optional*, defaults to `0.4`):
            Fraction of the groups to keep.
        min_selection_ratio (`float`, *optional*, defaults to `0.3`):
            Lower bound of the kept fraction.
        selection_noise (`float`, *optional*, defaults to `0.05`):
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
    k = num_to_select(len(energies), int(active.sum()), selection_ratio, min_selection_ratio)
    if k == 0:
        return selected
    active_idx = np.flatnonzero(active)
    keys = energies[active_idx]
    if selection_noise > 0:
        rng = np.random.default_rng() if rng is None else rng
        scale = selection_noise * max(keys.max() - keys.min(), 0.01)
        keys = keys + rng.gumbel(0.0, scale, size=len(keys))
    # Stable sort on -key: ties resolved by group order, identically on every process.
    chosen = active_idx[np.argsort(-keys, kind="stable")[:k]]
    selected[chosen] = True
    return selected


SPREAD_ENERGY_MAX = 0.01
"""Highest energy given to a group kept alive only by the spread of its total rewards ([`reward_spread_energies`]):
below the lowest energy a group in the learning zone can have with up to 16 rollouts (`0.05 * 4 * (1/16) * (15/16)`
= 0.0117), so such groups rank after every learning-zone group."""


def reward_spread_energies(
    energies: np.ndarray,
    pass_rates: np.ndarray,
    correctness: np.ndarray,
    total_rewards: np.ndarray,
    max_energy: float = SPREAD_ENERGY_MAX,
) -> np.ndarray:
    """
    Energies with the non-binary rule applied: a group whose rewards still differ is never dead.

    A group is dead by its pass rate when it is 0 or 1 (every rollout on the same side of `pass_threshold`). With a
    binary correctness reward (every value of the group 0 or 1) that is the paper's rule and nothing changes: the
    group has no learning signal. With a non-binary correctness reward (a score, a length or format reward) a group can
    sit entirely on one side of the threshold while its total rewards (all reward functions, weighted, as GRPO's
    advantages see them) still differ, so GRPO would learn from it. Such a group gets the energy
    `max_energy * s_g / max_h s_h`, `s_g` the standard deviation of its total rewards over the batch's such groups
    `h`: it is live, ranks after every group in the learning zone, and among its kind by how much its rewards differ.
    Groups whose total rewards are all equal (zero advantage) stay dead.

    Args:
        energies (`np.ndarray`):
            Energies of the groups, shape `(num_groups,)`, from the pass rates.
        pass_rates (`np.ndarray`):
            Pass rates of the groups (NaN for unscorable groups, which stay as they are).
        correctness (`np.ndarray`):
            Correctness reward of each rollout, shape `(num_groups, num_generations)`, NaN where unscorable.
        total_rewards (`np.ndarray`):
            Total (weighted) reward of each rollout, same shape.
        max_energy (`float`, *optional*, defaults to `SPREAD_ENERGY_MAX`):
            Energy of the widest-spread such group.

    Returns:
        `np.ndarray`: the energies, a new array; identical to `energies` when every correctness reward is 0 or 1.
    """
    energies = np.asarray(energies, dtype=np.float64).copy()
    pass_rates = np.asarray(pass_rates, dtype=np.float64)
    correctness = np.asarray(correctness, dtype=np.float64).reshape(len(energies), -1)
    total_rewards = np.asarray(total_rewards, dtype=np.float64).reshape(len(energies), -1)
    binary = np.all(np.isnan(correctness) | (correctness == 0) | (correctness == 1), axis=1)
    at_ends = (pass_rates == 0) | (pass_rates == 1)
    candidates = at_ends & ~binary & (energies <= 0)
    if not candidates.any():
        return energies
    finite = np.isfinite(total_rewards)
    with np.errstate(invalid="ignore"):
        spread = np.nanstd(np.where(finite, total_rewards, np.nan), axis=1)
    alive = candidates & (finite.sum(axis=1) >= 2) & (np.nan_to_num(spread) > 1e-8)  # TRL's zero-std tolerance
    if alive.any():
        energies[alive] = max_energy * spread[alive] / spread[alive].max()
    return energies
