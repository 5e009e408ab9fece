"""Learning-Zone Energy of a prompt group ([`compute_energy`]), and the Bayesian decisions of generating in rounds.
Plain vectorised numpy, no TRL import."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


ENERGY_TERMS = ("anchor", "uncertainty", "momentum")
MOMENTUM_MODES = ("abs", "improve")


def compute_energy(
    pass_rate: np.ndarray,
    initial_pass_rate: np.ndarray,
    ema_pass_rate: np.ndarray,
    *,
    d_init_min: float = 0.05,
    momentum_weight: float = 0.3,
    momentum_mode: str = "abs",
    terms: Sequence[str] = ENERGY_TERMS,
) -> np.ndarray:
    """
    Learning-Zone Energy of prompt groups (the paper's Eq. 1-4; `docs/source/method.md`), float64:

        energy = max(1 - p0, d_init_min) * 4 p (1 - p) * (1 + momentum_weight * momentum)
        momentum = min(2 |p - ema|, 1) ("abs", the authors' release) or min(2 max(p - ema, 0), 1) ("improve")

    with `p` the group's `pass_rate` now, `p0` its prompt's first pass rate (`initial_pass_rate`) and `ema` the EMA of
    its past pass rates (`ema_pass_rate`, before it absorbs `p`); 0 for `p` in {0, 1} while the uncertainty term is on.
    The `terms` kept (ablations of the paper's Fig. 3) are among `anchor`, `uncertainty` and `momentum`; one left out
    takes its neutral value (1, or 0 for the momentum).
    """
    if momentum_mode not in MOMENTUM_MODES:
        raise ValueError(f"Unknown momentum mode {momentum_mode!r}; expected one of {MOMENTUM_MODES}.")
    p = np.asarray(pass_rate, dtype=np.float64)
    energy = np.ones_like(p)
    if "anchor" in terms:
        energy *= np.maximum(1.0 - np.asarray(initial_pass_rate, dtype=np.float64), d_init_min)
    if "uncertainty" in terms:
        energy *= 4.0 * p * (1.0 - p)
    if "momentum" in terms:
        delta = p - np.asarray(ema_pass_rate, dtype=np.float64)
        if momentum_mode == "improve":
            delta = np.maximum(delta, 0.0)
        energy *= 1.0 + momentum_weight * np.minimum(2.0 * np.abs(delta), 1.0)
    return energy


def history_prior(mean: np.ndarray, strength: float) -> tuple[np.ndarray, np.ndarray]:
    """Jeffreys' prior with a prompt's pass-rate history `mean` weighed `strength` rollouts:
    `Beta(1/2 + strength * mean, 1/2 + strength * (1 - mean))`."""
    mean = np.clip(np.asarray(mean, dtype=np.float64), 0.0, 1.0)
    return 0.5 + strength * mean, 0.5 + strength * (1.0 - mean)


def _posterior(successes: np.ndarray, trials: np.ndarray, prior_a: np.ndarray, prior_b: np.ndarray) -> tuple:
    """Successes `s`, trials `m` and the pass rate's posterior `Beta(prior_a + s, prior_b + m - s)`, float64."""
    s, m = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    return s, m, np.asarray(prior_a, dtype=np.float64) + s, np.asarray(prior_b, dtype=np.float64) + m - s


def expected_energy(
    successes: np.ndarray,
    trials: np.ndarray,
    remaining: int,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    initial_pass_rate: np.ndarray,
    ema_pass_rate: np.ndarray,
    **energy_kwargs,
) -> np.ndarray:
    """
    The energy a group would have once completed, expected from its rollouts so far: the probe's decision
    (`round_policy="probe"`).

    The group has `successes` of `trials` scorable rollouts and a `Beta(prior_a, prior_b)` prior. The `remaining`
    rollouts add `X ~ BetaBinomial(remaining, a, b)` successes under the posterior `Beta(a, b)`, and the completed
    group's pass rate is `p = (successes + X) / (trials + remaining)`. The result is `E[compute_energy(p, p0, ema)]`
    over `X` (`energy_kwargs` those of [`compute_energy`]), where a prompt without a first pass rate or a history (NaN
    `initial_pass_rate`, `ema_pass_rate`) takes `p` for it.
    """
    s, m, a, b = _posterior(successes, trials, prior_a, prior_b)
    pmf = np.empty((len(s), remaining + 1))  # BetaBinomial(remaining, a, b), by its ratio of successive terms
    pmf[:, 0] = np.prod([(b + j) / (a + b + j) for j in range(remaining)], axis=0) if remaining else 1.0
    for x in range(remaining):
        pmf[:, x + 1] = pmf[:, x] * (remaining - x) / (x + 1) * (a + x) / (b + remaining - x - 1)
    p = (s[:, None] + np.arange(remaining + 1)[None, :]) / np.maximum(m[:, None] + remaining, 1.0)
    p0 = np.asarray(initial_pass_rate, dtype=np.float64)[:, None]
    ema = np.asarray(ema_pass_rate, dtype=np.float64)[:, None]
    energies = compute_energy(p, np.where(np.isnan(p0), p, p0), np.where(np.isnan(ema), p, ema), **energy_kwargs)
    return (pmf * energies).sum(axis=1)


MIN_PRIOR_STRENGTH, MAX_PRIOR_STRENGTH = 1e-6, 1e6
"""The bounds of [`fit_beta_prior`]'s strength (in rollouts): its limits, an empty prior and a point one."""


def fit_beta_prior(successes: np.ndarray, trials: np.ndarray) -> tuple[float, float] | None:
    """
    A `Beta(a, b)` prior of a prompt's pass rate fitted to a batch's groups (`successes` of `trials` each) by the
    beta-binomial's method of moments, or `None` when the batch cannot tell (fewer than two groups of `n >= 2`).

    Only groups with all `n` rollouts scorable (`n` the most trials) count. The mean is their pooled pass rate
    `(sum(successes) + 1) / (n * groups + 2)`; the strength `a + b` follows from the variance of their successes,
    `Var = n p (1 - p) (a + b + n) / (a + b + 1)`: groups as spread as a binomial's (every prompt alike) give an
    (almost) point prior at the mean, groups all alike within (every prompt always or never solved) an (almost) empty
    one, so that a group of `n` failures is then taken for a prompt never solved.
    """
    s, m = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    n = m.max(initial=0.0)
    full = s[m == n]
    if n < 2 or len(full) < 2:
        return None
    mean = (full.sum() + 1.0) / (n * len(full) + 2.0)
    ratio = full.var() / (n * mean * (1.0 - mean))  # 1 for a binomial, n when every group is all alike
    strength = (n - ratio) / (ratio - 1.0) if ratio > 1.0 else MAX_PRIOR_STRENGTH
    strength = float(np.clip(strength, MIN_PRIOR_STRENGTH, MAX_PRIOR_STRENGTH))
    return mean * strength, (1.0 - mean) * strength


def learning_zone_probability(
    successes: np.ndarray, trials: np.ndarray, remaining: int, prior_a: np.ndarray, prior_b: np.ndarray
) -> np.ndarray:
    """
    The probability that a group is in the learning zone (neither all successes nor all failures) once `remaining`
    more rollouts complete it: the adaptive budget's decision (`round_policy="adaptive"`).

    The group has `successes` of `trials` scorable rollouts and a `Beta(prior_a, prior_b)` prior. A group already
    mixed is in it (1); one whose rollouts are all successes (failures) stays out only if the `remaining` ones are too,
    `P(all succeed) = prod_j (a + j) / (a + b + j)` over `j < remaining` under the posterior `Beta(a, b)`. A group
    with no scorable rollout yet may end either way.
    """
    s, m, a, b = _posterior(successes, trials, prior_a, prior_b)
    steps = np.arange(remaining, dtype=np.float64)[None, :]
    all_succeed = np.prod((a[:, None] + steps) / (a[:, None] + b[:, None] + steps), axis=1)
    all_fail = np.prod((b[:, None] + steps) / (a[:, None] + b[:, None] + steps), axis=1)
    saturated = np.where(s == m, all_succeed, 0.0) + np.where(s == 0, all_fail, 0.0)
    return 1.0 - saturated
