"""Backward selection: which prompt groups of a generation batch take part in the policy update. Plain numpy."""

from __future__ import annotations

from typing import Any

import numpy as np


def pass_counts(correctness: Any, pass_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The correct (reward `>= pass_threshold`) and the scorable (not NaN: a reward function returned `None`, or not
    generated) rollouts of each group, `correctness` shaped `(num_groups, rollouts)`."""
    correctness = np.asarray(correctness, dtype=np.float64)
    scorable = ~np.isnan(correctness)
    return (np.where(scorable, correctness, -np.inf) >= pass_threshold).sum(axis=1), scorable.sum(axis=1)


def total_rewards(rewards: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Each rollout's total reward, over the last axis of `rewards` (reward functions; NaN where a function did not
    score it): their sum weighted by `weights` (TRL's `reward_weights`; 1 each by default, as TRL's async worker sums
    them), NaN where no function scored it."""
    rewards = np.asarray(rewards, dtype=np.float64)
    totals = np.nansum(rewards if weights is None else rewards * np.asarray(weights, dtype=np.float64), axis=-1)
    totals[np.isnan(rewards).all(axis=-1)] = np.nan
    return totals


def group_pass_rates(rewards: Any, num_generations: int, pass_threshold: float) -> np.ndarray:
    """Pass rate of each group of `num_generations` consecutive rollouts (`rewards`, a tensor or an array of the
    correctness rewards, NaN where unscorable): its correct over its scorable rollouts ([`pass_counts`]), NaN for a
    group with no scorable rollout."""
    if hasattr(rewards, "detach"):  # a torch tensor (this module does not import torch)
        rewards = rewards.detach().float().cpu().numpy()
    correct, counts = pass_counts(np.asarray(rewards, dtype=np.float64).reshape(-1, num_generations), pass_threshold)
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
    Whether each group is *live*: GRPO can learn from it (the one definition, for metrics, selectors and guards).

    A group of a binary correctness reward (0 or 1) is live when its pass rate is strictly between 0 and 1 (the
    paper's rule); under a non-binary one, a group all on one side of `pass_threshold` is live too when its total
    rewards differ (standard deviation `> SPREAD_TOLERANCE`). A group with nothing scorable is neither live nor dead.
    `correctness` and `totals` (the correctness and the total weighted reward of each rollout, what GRPO's advantages
    see) are shaped `(num_groups, rollouts)`, NaN where unscorable.
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
    The top-`selection_ratio` groups by energy, with Gumbel selection noise, as a boolean mask: among the `live`
    groups only, `quota = min(max(int(n * selection_ratio), 1), n_live)` are kept (`int` rounds down: 12 of 32
    groups at 0.4), ranked by `energy + g`, `g ~ Gumbel(0, s)`, `s = selection_noise * max(max(E) - min(E), 0.01)` over
    the live groups.

    `energies` and `live` describe every group of the generation batch (all processes'); `rng`, the noise's source,
    is seeded alike on every process, so that all take the same decision.
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
    The energies, with those of the live groups at pass rate 0 or 1 (live by the spread of their total rewards,
    [`live_groups`], energy 0 by the formula) set to `SPREAD_ENERGY_MAX * s_g / max_h s_h`, `s_g` their total rewards'
    standard deviation: after every learning-zone group, and among their kind by how much their rewards differ.
    """
    energies = np.asarray(energies, dtype=np.float64).copy()
    p = np.asarray(pass_rates, dtype=np.float64)
    candidates = np.asarray(live, dtype=bool) & ((p == 0) | (p == 1)) & (energies <= 0)
    if candidates.any():
        spread = reward_spread(totals, len(p))
        energies[candidates] = SPREAD_ENERGY_MAX * spread[candidates] / spread[candidates].max()
    return energies
