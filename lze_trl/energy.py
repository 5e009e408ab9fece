"""Learning-Zone Energy: the energy score of a prompt group, and its expectation from a probe.

The energy of a prompt group in generation batch t (the paper's Eq. 1-4; `docs/source/method.md`) is

    energy = difficulty_anchor * uncertainty * (1 + momentum_weight * momentum)
    difficulty_anchor = max(1 - p0, d_init_min)
    uncertainty       = 4 * p * (1 - p)
    momentum          = min(2 * |p - ema|, 1)             ("abs")
                      = min(2 * max(p - ema, 0), 1)        ("improve")

where `p` is the group's pass rate now, `p0` the pass rate the first time the prompt was observed and `ema` the
exponential moving average of its past pass rates (both from the per-prompt table, [`lze_trl.prompt_state`]). The
energy is computed with the EMA *before* it absorbs `p`.

This module has no TRL import: it is plain vectorised numpy.
"""

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
    Learning-Zone Energy of prompt groups, vectorised.

    Args:
        pass_rate (`np.ndarray`):
            Pass rate `p` of each group at this observation, in [0, 1].
        initial_pass_rate (`np.ndarray`):
            Pass rate `p0` of each prompt at its first observation.
        ema_pass_rate (`np.ndarray`):
            EMA of each prompt's pass rate before this observation.
        d_init_min (`float`, *optional*, defaults to `0.05`):
            Floor of the difficulty anchor `max(1 - p0, d_init_min)`.
        momentum_weight (`float`, *optional*, defaults to `0.3`):
            Weight `alpha` of the momentum term.
        momentum_mode (`str`, *optional*, defaults to `"abs"`):
            `"abs"` (the authors' release) or `"improve"` (the paper's wording: only improvement counts).
        terms (`Sequence[str]`, *optional*, defaults to all three):
            Subset of `("anchor", "uncertainty", "momentum")` to keep; a term left out is replaced by its neutral
            value (1 for the anchor and the uncertainty, 0 for the momentum). Used for ablations.

    Returns:
        `np.ndarray`: the energies, float64, same shape as `pass_rate`. Zero for `p` in {0, 1} whenever the
        uncertainty term is on.
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


def beta_posterior(
    successes: np.ndarray, trials: np.ndarray, prior_mean: np.ndarray, prior_strength: float
) -> tuple[np.ndarray, ...]:
    """Successes `s`, trials `m` (float64) and the pass rate's `Beta(a, b)`: Jeffreys' prior, the prompt's history
    (`prior_mean`) weighed `prior_strength` rollouts, then `s` of `m` rollouts right."""
    s, m = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    a, b = history_prior(prior_mean, prior_strength)
    return s, m, a + s, b + m - s


def expected_energy(
    successes: np.ndarray,
    trials: np.ndarray,
    remaining: int,
    prior_mean: np.ndarray,
    prior_strength: float,
    initial_pass_rate: np.ndarray,
    ema_pass_rate: np.ndarray,
    **energy_kwargs,
) -> np.ndarray:
    """
    The energy a group would have once completed, expected from a probe of its first rollouts: the decision of
    probe-then-complete (`probe_generations`).

    A prompt's pass rate is `Beta(a, b)` with `a = 1/2 + prior_strength * prior_mean + successes` and
    `b = 1/2 + prior_strength * (1 - prior_mean) + trials - successes` (Jeffreys' prior, the prompt's pass-rate history
    weighed as `prior_strength` rollouts, then the probe). The `remaining` rollouts that complete the group add
    `X ~ BetaBinomial(remaining, a, b)` successes, and the completed group's pass rate is
    `p = (successes + X) / (trials + remaining)` (the probe's rollouts are part of the group). The result is
    `E[compute_energy(p, p0, ema)]` over `X`, where a prompt without a first pass rate (NaN `initial_pass_rate`, never
    completed) takes `p0 = p` (this group would be its first full observation) and one without history takes
    `ema = p` (no momentum).

    Args:
        successes (`np.ndarray`):
            Correct rollouts of each probe.
        trials (`np.ndarray`):
            Scorable rollouts of each probe.
        remaining (`int`):
            Rollouts that complete a group (`num_generations - probe_generations`).
        prior_mean (`np.ndarray`):
            Prior pass rate of each prompt (its EMA, or the batch's pooled probe pass rate for a new prompt).
        prior_strength (`float`):
            Weight of the prior in rollouts (0: the probe alone, with Jeffreys' prior).
        initial_pass_rate, ema_pass_rate (`np.ndarray`):
            The per-prompt table's, NaN where unknown.
        **energy_kwargs:
            Those of [`compute_energy`] (`d_init_min`, `momentum_weight`, `momentum_mode`, `terms`).

    Returns:
        `np.ndarray`: the expected energies, float64, shape `(num_groups,)`.
    """
    s, m, a, b = beta_posterior(successes, trials, prior_mean, prior_strength)
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
    A `Beta(a, b)` prior of a prompt's pass rate fitted to a batch of groups by the beta-binomial's method of moments:
    how spread the groups' successes are over `n` rollouts each tells how far apart the prompts' pass rates are.

    The mean is the pooled pass rate `(sum(successes) + 1) / (sum(trials) + 2)`; the strength `a + b` follows from the
    variance of the successes, `Var = n p (1 - p) (a + b + n) / (a + b + 1)`: groups as spread as a binomial's (every
    prompt alike) give an (almost) point prior at the mean, groups all alike within (every prompt always or never
    solved) an (almost) empty one, so that a group of `n` failures is then taken for a prompt never solved. Only
    groups with all `n` rollouts scorable (`n` the most trials) are used, for the mean too.

    Args:
        successes, trials (`np.ndarray`):
            Correct and scorable rollouts of each group of the batch's first round.

    Returns:
        `tuple[float, float]` or `None`: `(a, b)`, or `None` when the batch cannot tell (fewer than two groups with
        `n >= 2` scorable rollouts).
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


def live_probability(
    successes: np.ndarray, trials: np.ndarray, remaining: int, prior_a: np.ndarray, prior_b: np.ndarray
) -> np.ndarray:
    """
    The probability that a group is live (neither all successes nor all failures) once `remaining` more rollouts
    complete it, given its rollouts so far: the decision of the adaptive budget (`rollout_rounds`).

    The pass rate is `Beta(prior_a + successes, prior_b + trials - successes)`; a group already mixed is live (1), and
    one whose `trials` rollouts are all successes (failures) stays dead only if the `remaining` ones are too:
    `P(all succeed) = prod_j (a + j) / (a + b + j)` over `j < remaining`. A group with no scorable rollout yet may end
    either way.

    Args:
        successes, trials (`np.ndarray`):
            Correct and scorable rollouts of each group so far.
        remaining (`int`):
            Rollouts still to come if the group goes on to `num_generations`.
        prior_a, prior_b (`np.ndarray`):
            The `Beta` prior of each prompt's pass rate (> 0).

    Returns:
        `np.ndarray`: the live probabilities, float64, shape `(num_groups,)`.
    """
    s, m = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    a = np.asarray(prior_a, dtype=np.float64) + s
    b = np.asarray(prior_b, dtype=np.float64) + m - s
    steps = np.arange(remaining, dtype=np.float64)[None, :]
    all_succeed = np.prod((a[:, None] + steps) / (a[:, None] + b[:, None] + steps), axis=1)
    all_fail = np.prod((b[:, None] + steps) / (a[:, None] + b[:, None] + steps), axis=1)
    dead = np.where(s == m, all_succeed, 0.0) + np.where(s == 0, all_fail, 0.0)
    return 1.0 - dead
