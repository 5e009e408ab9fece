r"""Predicting dead groups before generation: the Beta-binomial predictor and its online calibration.

Used by the experimental rollout filter ([`benchmarks.experimental.rollout_filter`]). A group is *dead* when it is not
live ([`lze_trl.selection.live_groups`]; for binary rewards, all `G` rollouts correct or all wrong).

Prediction for a prompt already rolled out, from the per-prompt table (pass rate `p_last`, EMA `ema`, dead streak
`k`):

    q  = clip(ema + mu * (p_last - ema), 0, 1)           (mu = `rollout_filter_momentum`; 1: the last pass rate)
    n  = G * min(max(|k|, 1), k_max),  k_max = 4         (a dead streak accumulates evidence, a live observation
                                                          counts once)
    a  = eps + n q,  b = eps + n (1 - q),  eps = 0.5
    pi = prod_{j<G} (b + j) / (a + b + j) + prod_{j<G} (a + j) / (a + b + j)   (Beta-binomial: all wrong + all right)

Online calibration: every generated group whose plan-time prediction came from the table gives a pair `(x, y)`, `x`
the raw `pi`, `y = 1` if it came back dead. With `B = 10` bins, bin centres `c_b`, `m = 2` pseudo-observations and
exponential forgetting with a half-life of 2048 pairs, the per-bin statistics `n_b, d_b, s_b` (count, dead, sum of
`x`) give anchors `x_b = (s_b + m c_b) / (n_b + m)` and `r_b = (d_b + m c_b) / (n_b + m)`; `y_b` is the weighted
isotonic (non-decreasing) regression of `r_b`, and the map is piecewise linear through `(x_b, y_b)` with slope 1
beyond the outer anchors. Without data it is the identity; it keeps the ranking of prompts by `pi` and moves only
where a threshold cuts. Plain numpy.
"""

from __future__ import annotations

import numpy as np


MAX_STREAK_EVIDENCE = 4  # k_max
PRIOR_EPS = 0.5  # eps
CALIBRATION_BINS = 10  # B
CALIBRATION_PRIOR = 2.0  # m, pseudo-observations per bin at the identity
CALIBRATION_HALF_LIFE = 2048.0  # in observed groups


def beta_binomial_dead(q: np.ndarray, n: np.ndarray, num_generations: int) -> np.ndarray:
    """
    Probability that `num_generations` rollouts are all wrong or all correct, under `Beta(eps + n q, eps + n (1 - q))`.

    Args:
        q (`np.ndarray`):
            Predicted pass rates, in [0, 1].
        n (`np.ndarray`):
            Evidence (pseudo-rollouts) behind each prediction, >= 0.
        num_generations (`int`):
            Group size `G`.

    Returns:
        `np.ndarray`: the probabilities, float64, in (0, 1].
    """
    q = np.asarray(q, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    a = PRIOR_EPS + n * q
    b = PRIOR_EPS + n * (1.0 - q)
    all_wrong = np.ones_like(a)
    all_right = np.ones_like(a)
    for j in range(num_generations):
        all_wrong *= (b + j) / (a + b + j)
        all_right *= (a + j) / (a + b + j)
    return np.minimum(all_wrong + all_right, 1.0)


def predict_dead_raw(table: dict[str, np.ndarray], momentum: float, num_generations: int) -> np.ndarray:
    """
    The uncalibrated `pi` of prompts with an observation, from their rows of the per-prompt table
    ([`~lze_trl.prompt_state.PromptState.get`]: `last_pass_rate`, `ema_pass_rate`, `saturated_streak`); NaN for prompts
    never observed.
    """
    last, ema = table["last_pass_rate"], table["ema_pass_rate"]
    seen = ~np.isnan(last)
    pi = np.full(len(last), np.nan)
    if seen.any():
        q = np.clip(ema[seen] + momentum * (last[seen] - ema[seen]), 0.0, 1.0)
        evidence = num_generations * np.clip(np.abs(table["saturated_streak"][seen]), 1, MAX_STREAK_EVIDENCE)
        pi[seen] = beta_binomial_dead(q, evidence, num_generations)
    return pi


def isotonic_increasing(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """
    Weighted least-squares non-decreasing fit of `values` (pool-adjacent-violators).

    Args:
        values (`np.ndarray`):
            The values, in order.
        weights (`np.ndarray`):
            Their weights, > 0.

    Returns:
        `np.ndarray`: the fitted values, float64, non-decreasing, same shape.
    """
    blocks: list[list[float]] = []  # [weighted mean, weight, length]
    for value, weight in zip(np.asarray(values, dtype=np.float64).tolist(), np.asarray(weights, np.float64).tolist()):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.asarray([v for v, _, n in blocks for _ in range(n)], dtype=np.float64)


class Calibration:
    """The online calibration map of predicted dead probabilities (see the module docstring)."""

    def __init__(self) -> None:
        self.count = np.zeros(CALIBRATION_BINS)
        self.dead = np.zeros(CALIBRATION_BINS)
        self.pred = np.zeros(CALIBRATION_BINS)

    def anchors(self) -> tuple[np.ndarray, np.ndarray]:
        """The anchors `(x_b, y_b)`: strictly increasing `x_b`, non-decreasing `y_b` (the identity's bin centres
        before any data)."""
        centres = (np.arange(CALIBRATION_BINS) + 0.5) / CALIBRATION_BINS
        weight = self.count + CALIBRATION_PRIOR
        x = (self.pred + CALIBRATION_PRIOR * centres) / weight
        r = (self.dead + CALIBRATION_PRIOR * centres) / weight
        return x, isotonic_increasing(r, weight)

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        """`f(raw)`: float64 in [0, 1], non-decreasing in `raw`."""
        raw = np.asarray(raw, dtype=np.float64)
        x, y = self.anchors()
        out = np.interp(raw, x, y)
        out = np.where(raw < x[0], y[0] + raw - x[0], out)
        out = np.where(raw > x[-1], y[-1] + raw - x[-1], out)
        return np.clip(out, 0.0, 1.0)

    def learn(self, raw: np.ndarray, dead: np.ndarray) -> None:
        """Forgets `0.5 ** (n / H)` of the statistics, then adds the `n` pairs `(raw, dead)`."""
        if len(raw) == 0:
            return
        forget = 0.5 ** (len(raw) / CALIBRATION_HALF_LIFE)
        for stat in (self.count, self.dead, self.pred):
            stat *= forget
        bins = np.minimum((np.asarray(raw) * CALIBRATION_BINS).astype(np.int64), CALIBRATION_BINS - 1)
        np.add.at(self.count, bins, 1.0)
        np.add.at(self.dead, bins, np.asarray(dead, dtype=np.float64))
        np.add.at(self.pred, bins, raw)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"count": self.count.copy(), "dead": self.dead.copy(), "pred": self.pred.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name in ("count", "dead", "pred"):
            setattr(self, name, np.asarray(state[name], dtype=np.float64).copy())
