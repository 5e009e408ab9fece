r"""Rollout-side selection: predict, before generation, which prompts will come back dead, and skip them.

Over 400 lines on purpose: a hundred of them are this docstring, the predictor's model in formulas (the issue asked
for it here), and the filter's state, plan, observation and calibration share one per-prompt state.

A prompt group is *dead* when all `G` rollouts are correct or all are wrong (pass rate 0 or 1): its GRPO advantages
are all zero and its rollouts teach nothing. [`RolloutFilter`] keeps a small state per prompt (dataset index) from
the groups observed so far and decides which prompts are rolled out, so every generation batch is full and mostly
alive; the prompts skipped cost no generation at all. Two granularities (config `rollout_filter_granularity`):

- `"batch"` (default, [`~RolloutFilter.plan_batch`]): each generation batch is decided when the data loader asks for
  it, from the state as it is then (the groups scored up to one or two batches earlier: the loader reads ahead).
  The sampler walks the epoch's order and the batch takes the next candidates that are not skipped; the skipped
  ones are consumed, so skipping shortens the epoch. The first observations of an epoch thus act on its later
  batches: the prior of unseen prompts is learned within the first epoch, where the epoch-level plan is blind.
- `"epoch"` ([`~RolloutFilter.plan_epoch`]): the epoch's pool is decided once, at its start.

The model (all per prompt `i`, `G` = rollouts per group):

    state after each observation (pass rate p of a scored group):
        p_last <- p
        ema    <- beta * ema + (1 - beta) * p         (ema <- p at the first observation), beta = 0.9
        k      <- k + 1 if p in {0, 1} and the previous observation was dead on the same side, 1 if p in {0, 1}
                  (a new streak), 0 otherwise          (consecutive dead observations)

    predicted pass rate (the last observation by default; mu < 1 pulls it toward the long-run EMA, so one dead
    observation after a live history is not written off; mu > 1 extrapolates the trend past it):
        q = clip(ema + mu * (p_last - ema), 0, 1),  mu = 1 (`rollout_filter_momentum`; it was 0.5 until the
            per-batch measurement of BENCHMARKS.md section 7c: with 0.5 a prompt being learned is predicted below its
            last pass rate and comes back all-correct, 39% dead groups in the last quarter against 14.5% with 1)

    evidence: the streak accumulates it, an alive observation counts once:
        n = G * min(max(k, 1), k_max),  k_max = 4
        a = eps + n * q,  b = eps + n * (1 - q),  eps = 0.5        (a Beta(a, b) belief about the pass rate)

    predicted probability that the next group is dead (Beta-binomial, all wrong + all correct):
        pi = B(a, b + G) / B(a, b) + B(a + G, b) / B(a, b)
           = prod_{j<G} (b + j) / (a + b + j) + prod_{j<G} (a + j) / (a + b + j)

    prompts never observed (prior): the running share of dead FIRST observations, per value of a difficulty
    column when one is given (`prior_buckets`), else over all prompts, with a Laplace prior:
        pi = (dead_first[bucket] + 1) / (first[bucket] + 2)
    Only a bucket's prior skips an unseen prompt: the pooled prior (no column) is logged as its prediction but never
    skips it, since it says nothing about that prompt; skipping on it made per-batch runs recycle the prompts already
    seen alive instead of exploring the dataset (measured: BENCHMARKS.md section 7c).

With a dead streak of `k` and `q = 0`, `pi ~ sqrt(k G / (k G + G)) = sqrt(k / (k + 1))` grows in `k`, as GRESO's skip
probability does; a prompt dead once after a live history keeps part of its EMA in `q`, and one observed alive
again (audit, retry) restarts at `k = 0`.

Skipping shortens epochs, so "epochs" below are passes' worth of generation: `progress` counts the prompt groups
planned so far divided by the dataset size `N` (a full epoch adds 1, an epoch that keeps a quarter adds 0.25), and
`visit_i` is the progress when prompt `i` was last rolled out. Decision at the start of epoch `e` (mode `"lze"`),
with `u` uniform draws seeded by `(seed, e)` and `h_i` a fixed per-prompt draw in [0, 1) seeded by `seed`:

    skip_i   = pi_i > threshold
    retry_i  = progress - visit_i >= M * (1 + h_i) / 2   (exploration floor: every prompt at least every M passes,
                                                          staggered so the skipped prompts do not all return at once)
    audit_i  = skip_i and not retry_i and u_i < audit * kept / N
                                                        (generated anyway, to count wrong skips: `audit` of the
                                                         skipped prompts per pass of generation)
    keep_i   = not skip_i or retry_i or audit_i

Per batch (`"batch"`), the same `skip_i` and `retry_i` for each candidate `i` of the epoch's order from the cursor
on, with the draws seeded by `(seed, epoch, batch)`; the audit takes `a ~ Binomial(size, audit)` slots of the batch:
`audit_i` for the first `a` candidates with `skip_i and not retry_i` in the walk (a uniform sample of the skipped
prompts, the order being a random permutation), so about `audit` of the generated groups are audited skips, however
many candidates a batch walks past (a per-candidate draw would make audits most of a batch when most candidates are
skipped); the batch is the first `size` candidates with `keep_i`, and the cursor moves past the last of them.

Mode `"greso"` (the GRESO-like baseline, no energy state): `skip_i = u'_i < 1 - max(base ** k_i, 0.01)`, base 0.5,
with the same floor and audit. Both modes log the same `pi` as their prediction, so their calibration compares.

Cap: when fewer than `min_pool` prompts would be kept (a generation batch needs `min_pool` distinct prompts), the
skipped prompts with the lowest `pi` are put back until it holds; per batch, the epoch's first batch is always
filled so (a later batch that cannot be filled ends the epoch, so an epoch never generates nothing). Every decision
is a function of the state and of `(seed, epoch)` (and the batch), so all processes take the same one, and
[`~RolloutFilter.state_dict`] resumes it exactly.

Online recalibration (`calibration=True`, config `rollout_filter_calibration`): the Beta-binomial `pi` of a prompt
with a state is miscalibrated, and in a task-specific direction: after one dead observation it says ~0.7, where ~0.9
come back dead among synthetic prompts dead for good, but only ~0.3 in the `carries` task's GRPO logs. Every
generated group whose plan-time prediction came from the state gives a pair `(x, y)`: `x` its raw `pi` at planning,
`y = 1` if it came back dead. Kept prompts fill the low-`x` region; retries, audits and the cap's put-backs the
high-`x` region, so the audit share sets how fast the skipped region is learned. With `B = 10`
bins `b(x) = min(floor(B x), B - 1)`, bin centres `c_b = (b + 1/2) / B`, `m = 2` pseudo-observations and a
half-life of `H = 2048` groups:

    statistics (exponentially forgotten: before a call to `observe` with `n` pairs, all three are multiplied by
    0.5 ** (n / H)):
        n_b <- n_b + 1,  d_b <- d_b + y,  s_b <- s_b + x          for each pair in bin b(x)

    per bin, smoothed toward the identity (a Beta(m c_b, m (1 - c_b)) prior on the dead rate at raw c_b):
        x_b = (s_b + m c_b) / (n_b + m),   r_b = (d_b + m c_b) / (n_b + m),   w_b = n_b + m

    monotone: y_b = the weighted isotonic (non-decreasing) regression of r_b with weights w_b (pool-adjacent-
    violators);

    map (piecewise linear through the anchors (x_b, y_b), slope 1 beyond the outer ones):
        f(x) = interp(x; x_b, y_b)      for x_0 <= x <= x_{B-1}
        f(x) = clip(y_0 + x - x_0, 0, 1)  for x < x_0,   clip(y_{B-1} + x - x_{B-1}, 0, 1)  for x > x_{B-1}

    and the prediction the threshold, the cap and the metrics use is pi = f(pi_raw) for prompts with a state (the
    prior of unseen prompts is already an observed frequency and stays as is).

Without data `f` is the identity (`x_b = y_b = c_b`); `x_b` lies inside bin `b`, so the anchors are strictly
increasing and `f` is non-decreasing: the ranking of prompts by `pi` is kept, only where the threshold cuts moves.
The statistics are updated from the gathered groups every process sees, so the map is the same on all of them, and
they are part of the state dict. `rollout_filter/brier_raw` logs the Brier score of the uncalibrated `pi` next to
`rollout_filter/brier` (the one used), so a run shows what the map bought.

Plain numpy, no TRL or torch import.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .selection import is_dead


ROLLOUT_FILTER_MODES = ("none", "lze", "greso")
ROLLOUT_FILTER_GRANULARITIES = ("batch", "epoch")
MOMENTUM = 1.0  # mu
MAX_STREAK_EVIDENCE = 4  # k_max
PRIOR_EPS = 0.5  # eps
GRESO_BASE = 0.5
GRESO_MIN_KEEP = 0.01
CALIBRATION_BINS = 10  # B
CALIBRATION_PRIOR = 2.0  # m, pseudo-observations per bin at the identity (Beta(1, 1) at c = 1/2)
CALIBRATION_HALF_LIFE = 2048.0  # H, in observed groups


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


class RolloutFilter:
    """
    Per-prompt dead-group predictor and the epoch-level skip decision of rollout-side selection (see the module
    docstring for the model).

    Args:
        num_prompts (`int`):
            Size of the (map-style) train dataset; prompts are dataset indices.
        num_generations (`int`):
            Rollouts per group `G`.
        mode (`str`, *optional*, defaults to `"lze"`):
            `"lze"`: skip prompts whose predicted dead probability exceeds `threshold`; `"greso"`: skip with
            probability `1 - max(0.5 ** k, 0.01)` from the dead streak `k` only.
        threshold (`float`, *optional*, defaults to `0.6`):
            `"lze"`: a prompt is skipped when `pi > threshold`.
        retry_epochs (`int`, *optional*, defaults to `8`):
            Exploration floor `M`: a prompt not rolled out for `M` passes' worth of generation is rolled out again.
        audit_fraction (`float`, *optional*, defaults to `0.02`):
            Share of the skipped prompts generated anyway (per pass of generation) to measure wrong skips.
        min_pool (`int`, *optional*, defaults to `1`):
            Fewest prompts an epoch keeps (the distinct prompts of one generation batch).
        prior_buckets (`np.ndarray`, *optional*):
            Integer bucket of each prompt (e.g. a difficulty column's value codes) for the prior of unseen prompts.
        ema_decay (`float`, *optional*, defaults to `0.9`):
            Decay `beta` of the pass-rate EMA.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the audit and GRESO draws (with the epoch).
        calibration (`bool`, *optional*, defaults to `True`):
            Recalibrate the predicted dead probability of prompts with a state online, with a monotone map fitted
            to the run's own (prediction, outcome) pairs (see the module docstring); `"greso"` mode then only logs
            the calibrated prediction (its decisions do not use it).
        momentum (`float`, *optional*, defaults to `1.0`):
            `mu` of the predicted pass rate `q = ema + mu * (p_last - ema)`: below 1 between the EMA and the last
            observation, 1 the last observation, above 1 the trend extrapolated past it.
    """

    def __init__(
        self,
        num_prompts: int,
        num_generations: int,
        mode: str = "lze",
        threshold: float = 0.6,
        retry_epochs: int = 8,
        audit_fraction: float = 0.02,
        min_pool: int = 1,
        prior_buckets: np.ndarray | None = None,
        ema_decay: float = 0.9,
        seed: int = 0,
        calibration: bool = True,
        momentum: float = MOMENTUM,
    ) -> None:
        if mode not in ROLLOUT_FILTER_MODES[1:]:
            raise ValueError(f"Unknown rollout filter mode {mode!r}; expected one of {ROLLOUT_FILTER_MODES[1:]}.")
        self.num_prompts = num_prompts
        self.num_generations = num_generations
        self.mode = mode
        self.threshold = threshold
        self.retry_epochs = retry_epochs
        self.audit_fraction = audit_fraction
        self.min_pool = min_pool
        self.ema_decay = ema_decay
        self.seed = seed
        self.calibration = bool(calibration)
        self.momentum = float(momentum)
        # Without buckets the prior of unseen prompts is one pooled rate: no evidence about any prompt in particular,
        # so it is logged but never skips one (skipping on it would stop the run from exploring the dataset).
        self.skip_unseen = prior_buckets is not None
        if prior_buckets is None:
            prior_buckets = np.zeros(num_prompts, dtype=np.int64)
        prior_buckets = np.asarray(prior_buckets, dtype=np.int64)
        if prior_buckets.shape != (num_prompts,) or (prior_buckets < 0).any():
            raise ValueError(f"prior_buckets must hold {num_prompts} non-negative integers.")
        self.prior_buckets = prior_buckets
        num_buckets = int(prior_buckets.max(initial=0)) + 1
        # Per-prompt state
        self.last_pass_rate = np.full(num_prompts, np.nan)
        self.ema_pass_rate = np.zeros(num_prompts)
        self.dead_streak = np.zeros(num_prompts, dtype=np.int64)
        self.last_epoch = np.full(num_prompts, -1, dtype=np.int64)  # last epoch that rolled the prompt out
        self.progress = 0.0  # groups planned so far / num_prompts
        self.visit = np.zeros(num_prompts)  # progress when the prompt was last rolled out
        self.stagger = np.random.default_rng([seed, 0x57A6]).random(num_prompts)  # h_i
        # Prior of unseen prompts: first observations per bucket
        self.first_dead = np.zeros(num_buckets, dtype=np.int64)
        self.first_seen = np.zeros(num_buckets, dtype=np.int64)
        # The current epoch's plan: prediction and audit flags (for metrics)
        self.epoch_prediction = np.full(num_prompts, np.nan)
        self.epoch_audit = np.zeros(num_prompts, dtype=bool)
        self.epoch_raw = np.full(num_prompts, np.nan)  # uncalibrated pi at planning
        self.epoch_seen = np.zeros(num_prompts, dtype=bool)  # pi came from the prompt's state (not the prior)
        # Online calibration statistics per bin (forgotten with half-life H): n_b, d_b, s_b
        self.calibration_count = np.zeros(CALIBRATION_BINS)
        self.calibration_dead = np.zeros(CALIBRATION_BINS)
        self.calibration_pred = np.zeros(CALIBRATION_BINS)
        self.brier_raw = np.zeros(2)  # squared errors of the uncalibrated pi: this batch, the run
        # Run totals
        self.totals = dict.fromkeys(("skipped", "audited", "audited_alive", "observed", "brier_sum"), 0.0)
        self._batch: dict[str, float] = {}
        self._reset_batch()

    # ----------------------------------------------------------------------------------------------- prediction
    def predict_pass_rate(self) -> np.ndarray:
        """Predicted pass rate `q` of every prompt (NaN for prompts never observed)."""
        trend = self.last_pass_rate - self.ema_pass_rate
        return np.clip(self.ema_pass_rate + self.momentum * trend, 0.0, 1.0)

    def predict_dead(self, raw: bool = False) -> np.ndarray:
        """
        Predicted probability `pi` that each prompt's next group is dead.

        Args:
            raw (`bool`, *optional*, defaults to `False`):
                Skip the online calibration map (when `calibration` is on): the Beta-binomial / prior `pi` itself.

        Returns:
            `np.ndarray`: the probabilities, float64, shape `(num_prompts,)`.
        """
        seen = ~np.isnan(self.last_pass_rate)
        prior = (self.first_dead + 1.0) / (self.first_seen + 2.0)
        pi = prior[self.prior_buckets].astype(np.float64)
        if seen.any():
            evidence = self.num_generations * np.clip(self.dead_streak[seen], 1, MAX_STREAK_EVIDENCE)
            pi[seen] = beta_binomial_dead(self.predict_pass_rate()[seen], evidence, self.num_generations)
            if self.calibration and not raw:
                pi[seen] = self.calibrate(pi[seen])
        return pi

    def calibration_map(self) -> tuple[np.ndarray, np.ndarray]:
        """
        The anchors `(x_b, y_b)` of the online calibration map (the identity's bin centres before any data).

        Returns:
            `tuple[np.ndarray, np.ndarray]`: strictly increasing `x_b` and non-decreasing `y_b`, `B` each.
        """
        centres = (np.arange(CALIBRATION_BINS) + 0.5) / CALIBRATION_BINS
        weight = self.calibration_count + CALIBRATION_PRIOR
        x = (self.calibration_pred + CALIBRATION_PRIOR * centres) / weight
        r = (self.calibration_dead + CALIBRATION_PRIOR * centres) / weight
        return x, isotonic_increasing(r, weight)

    def calibrate(self, raw: np.ndarray) -> np.ndarray:
        """
        Applies the online calibration map `f` to raw predicted dead probabilities.

        Args:
            raw (`np.ndarray`):
                Raw probabilities in [0, 1].

        Returns:
            `np.ndarray`: `f(raw)`, float64, in [0, 1], non-decreasing in `raw`.
        """
        raw = np.asarray(raw, dtype=np.float64)
        x, y = self.calibration_map()
        out = np.interp(raw, x, y)
        out = np.where(raw < x[0], y[0] + raw - x[0], out)
        out = np.where(raw > x[-1], y[-1] + raw - x[-1], out)
        return np.clip(out, 0.0, 1.0)

    def _learn_calibration(self, raw: np.ndarray, dead: np.ndarray) -> None:
        """Forgets `0.5 ** (n / H)` of the calibration statistics, then adds the `n` pairs `(raw, dead)`."""
        if len(raw) == 0:
            return
        forget = 0.5 ** (len(raw) / CALIBRATION_HALF_LIFE)
        for stat in (self.calibration_count, self.calibration_dead, self.calibration_pred):
            stat *= forget
        bins = np.minimum((raw * CALIBRATION_BINS).astype(np.int64), CALIBRATION_BINS - 1)
        np.add.at(self.calibration_count, bins, 1.0)
        np.add.at(self.calibration_dead, bins, dead.astype(np.float64))
        np.add.at(self.calibration_pred, bins, raw)

    # ----------------------------------------------------------------------------------------------- decision
    def _skip_rule(
        self, idx: np.ndarray, u_skip: np.ndarray, exempt: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """
        The skip rule shared by [`~RolloutFilter.plan_epoch`] and [`~RolloutFilter.plan_batch`], before the audit and
        the cap: the mode's rule on the (calibrated) prediction, unseen prompts kept unless a prior column is given,
        the retry floor, and the exemptions.

        Args:
            idx (`np.ndarray`):
                The candidate prompts.
            u_skip (`np.ndarray`):
                One uniform draw per candidate (the `"greso"` mode's coin).
            exempt (`np.ndarray`, *optional*):
                Boolean mask over all prompts never skipped.

        Returns:
            `tuple[np.ndarray, ...]`: per candidate, the raw prediction, whether its state has an observation, the
            prediction used (`pi`, calibrated when on) and the skip mask.
        """
        raw = self.predict_dead(raw=True)[idx]
        seen = ~np.isnan(self.last_pass_rate[idx])
        pi = raw.copy()
        if self.calibration and seen.any():
            pi[seen] = self.calibrate(raw[seen])
        if self.mode == "lze":
            skip = pi > self.threshold
        else:
            skip = u_skip < 1.0 - np.maximum(GRESO_BASE ** self.dead_streak[idx], GRESO_MIN_KEEP)
        if not self.skip_unseen:
            skip &= seen
        skip &= ~(self.progress - self.visit[idx] >= self.retry_epochs * (1.0 + self.stagger[idx]) / 2.0)
        if exempt is not None:
            skip &= ~np.asarray(exempt, dtype=bool)[idx]
        return raw, seen, pi, skip

    def plan_epoch(
        self, epoch: int, available: np.ndarray | None = None, exempt: np.ndarray | None = None
    ) -> np.ndarray:
        """
        The prompts epoch `epoch` rolls out.

        Args:
            epoch (`int`):
                The epoch (seeds the draws with `seed`).
            available (`np.ndarray`, *optional*):
                Prompts still eligible (e.g. not pruned); `None` for all.
            exempt (`np.ndarray`, *optional*):
                Prompts never skipped (e.g. forward pruning's replays).

        Returns:
            `np.ndarray`: boolean keep mask of shape `(num_prompts,)`, a subset of `available`.
        """
        n = self.num_prompts
        available = np.ones(n, dtype=bool) if available is None else np.asarray(available, dtype=bool)
        rng = np.random.default_rng([self.seed, epoch, 0x5F17])
        u_audit, u_skip = rng.random(n), rng.random(n)
        raw, seen, pi, skip = self._skip_rule(np.arange(n), u_skip, exempt)
        skip &= available
        kept_share = int((available & ~skip).sum()) / max(n, 1)
        audit = skip & (u_audit < self.audit_fraction * kept_share)
        skip &= ~audit
        keep = available & ~skip
        short = min(self.min_pool, int(available.sum())) - int(keep.sum())
        if short > 0:  # cap: put back the skipped prompts least likely dead
            candidates = np.flatnonzero(skip)
            back = candidates[np.lexsort((candidates, raw[candidates], pi[candidates]))[:short]]
            keep[back], skip[back] = True, False
        self.epoch_prediction = pi
        self.epoch_raw = raw
        self.epoch_seen = seen
        self.epoch_audit = audit
        self.last_epoch[keep] = epoch
        self.visit[keep] = self.progress
        self.progress += int(keep.sum()) / max(n, 1)
        self.totals["skipped"] += int(skip.sum())
        self.totals["audited"] += int(audit.sum())
        self._epoch_skipped = int(skip.sum())
        return keep

    def plan_batch(
        self,
        epoch: int,
        batch: int,
        order: list[int] | np.ndarray,
        cursor: int,
        size: int,
        exempt: np.ndarray | None = None,
    ) -> tuple[list[int] | None, int]:
        """
        The next generation batch of `size` prompts, decided now from the current state (granularity `"batch"`).

        Walks the epoch's candidate `order` from `cursor` and takes, in order, the first `size` candidates that are
        not skipped (same skip and retry floor rules as [`~RolloutFilter.plan_epoch`]; the audit takes
        `Binomial(size, audit_fraction)` of the batch's slots for the first skipped candidates of the walk, so about
        `audit_fraction` of the generated groups are audited skips); the skipped candidates before the last one taken
        are consumed. The draws are seeded by `(seed, epoch, batch)`, so every process takes the same decision. Cap:
        the epoch's first batch (`batch == 0`) is always full when `order` holds `size` prompts: the skipped candidates
        least likely dead fill it. A later batch that cannot be filled ends the epoch (the candidates left are not
        generated, as TRL drops an incomplete last batch).

        Args:
            epoch (`int`):
                The epoch (with `batch`, seeds the draws).
            batch (`int`):
                Index of this generation batch in the epoch.
            order (`list[int]` or `np.ndarray`):
                The epoch's candidate prompts in sampling order (its pool, pruned prompts already removed).
            cursor (`int`):
                Position in `order` of the first candidate not yet consumed.
            size (`int`):
                Distinct prompts a generation batch needs.
            exempt (`np.ndarray`, *optional*):
                Boolean mask over all prompts never skipped (e.g. forward pruning's replays).

        Returns:
            `tuple[list[int] | None, int]`: the batch's prompts (`None` when the epoch ends) and the new cursor.
        """
        order = np.asarray(order, dtype=np.int64)
        rest = order[cursor:]
        if len(rest) < size or size <= 0:
            return None, len(order)
        rng = np.random.default_rng([self.seed, epoch, batch, 0xB47C])
        u_skip = rng.random(len(rest))
        raw, seen, pi, skip = self._skip_rule(rest, u_skip, exempt)
        # Audit: Binomial(size, audit_fraction) slots of the batch go to the first skipped candidates of the walk
        # (a uniform sample of the skipped prompts: the order is a random permutation).
        audit = np.zeros(len(rest), dtype=bool)
        audit[np.flatnonzero(skip)[: rng.binomial(size, self.audit_fraction)]] = True
        skip &= ~audit
        kept = np.flatnonzero(~skip)
        if len(kept) >= size:
            take = kept[:size]
            consumed = int(take[-1]) + 1
        elif batch == 0:  # cap: the epoch's first batch is full, topped up with the skips least likely dead
            candidates = np.flatnonzero(skip)
            back = candidates[np.lexsort((candidates, raw[candidates], pi[candidates]))[: size - len(kept)]]
            skip[back] = False
            take = np.sort(np.concatenate([kept, back]))
            consumed = len(rest)
        else:
            return None, len(order)
        chosen = rest[take]
        if batch == 0:
            self._epoch_skipped = 0
        skipped = int(skip[:consumed].sum())
        self.epoch_prediction[chosen] = pi[take]
        self.epoch_raw[chosen] = raw[take]
        self.epoch_seen[chosen] = seen[take]
        self.epoch_audit[chosen] = audit[take]
        self.last_epoch[chosen] = epoch
        self.visit[chosen] = self.progress
        self.progress += len(chosen) / max(self.num_prompts, 1)
        self.totals["skipped"] += skipped
        self.totals["audited"] += int(audit[take].sum())
        self._epoch_skipped = getattr(self, "_epoch_skipped", 0) + skipped
        return chosen.tolist(), cursor + consumed

    # ----------------------------------------------------------------------------------------------- observation
    def observe(self, prompt_ids: np.ndarray, pass_rates: np.ndarray) -> None:
        """Updates the state with scored groups (all processes' groups; NaN pass rates are ignored) and the metrics."""
        idx = np.asarray(prompt_ids, dtype=np.int64).reshape(-1)
        p = np.asarray(pass_rates, dtype=np.float64).reshape(-1)
        valid = ~np.isnan(p) & (idx >= 0) & (idx < self.num_prompts)
        idx, p = idx[valid], p[valid]
        if len(idx) == 0:
            return
        dead = is_dead(p)
        pi, raw, from_state = self.epoch_prediction[idx], self.epoch_raw[idx], self.epoch_seen[idx]
        unplanned = np.isnan(pi)
        if unplanned.any():  # observed without a plan (e.g. before the first epoch's): the current prediction
            pi = np.where(unplanned, self.predict_dead()[idx], pi)
            raw = np.where(unplanned, self.predict_dead(raw=True)[idx], raw)
            from_state = np.where(unplanned, ~np.isnan(self.last_pass_rate[idx]), from_state)
        raw = np.where(np.isnan(raw), pi, raw)
        if self.calibration:
            self._learn_calibration(raw[from_state], dead[from_state])
        raw_squared_error = float(((raw - dead) ** 2).sum())
        self.brier_raw += raw_squared_error
        audited = self.epoch_audit[idx]
        b = self._batch
        b["groups"] += len(idx)
        b["observed_dead"] += int(dead.sum())
        b["predicted_dead"] += float(pi.sum())
        b["brier"] += float(((pi - dead) ** 2).sum())
        b["audited"] += int(audited.sum())
        b["audited_alive"] += int((audited & ~dead).sum())
        self.totals["observed"] += len(idx)
        self.totals["brier_sum"] += float(((pi - dead) ** 2).sum())
        self.totals["audited_alive"] += int((audited & ~dead).sum())
        self.epoch_audit[idx] = False  # an audit counts once

        # Prior: first observations per bucket (first occurrence in this call wins)
        first_idx, first_pos = np.unique(idx, return_index=True)
        new = np.isnan(self.last_pass_rate[first_idx])
        np.add.at(self.first_seen, self.prior_buckets[first_idx[new]], 1)
        np.add.at(self.first_dead, self.prior_buckets[first_idx[new]], dead[first_pos[new]].astype(np.int64))
        for i, rate, was_dead in zip(idx.tolist(), p.tolist(), dead.tolist()):
            previous = self.last_pass_rate[i]
            if np.isnan(previous):
                self.ema_pass_rate[i] = rate
            else:
                self.ema_pass_rate[i] = self.ema_decay * self.ema_pass_rate[i] + (1.0 - self.ema_decay) * rate
            same_side = was_dead and not np.isnan(previous) and (previous >= 1.0) == (rate >= 1.0)
            self.dead_streak[i] = (self.dead_streak[i] + 1 if same_side else 1) if was_dead else 0
            self.last_pass_rate[i] = rate

    def _reset_batch(self) -> None:
        if hasattr(self, "brier_raw"):
            self.brier_raw[0] = 0.0
        self._batch = dict.fromkeys(
            ("groups", "observed_dead", "predicted_dead", "brier", "audited", "audited_alive"), 0.0
        )

    def metrics(self) -> dict[str, float]:
        """Metrics of the groups observed since the last call (one generation batch), then a reset."""
        b, t = self._batch, self.totals
        groups = max(b["groups"], 1.0)
        out = {
            "rollout_filter/predicted_dead_frac": b["predicted_dead"] / groups,
            "rollout_filter/observed_dead_frac": b["observed_dead"] / groups,
            "rollout_filter/brier": b["brier"] / groups,
            "rollout_filter/brier_raw": self.brier_raw[0] / groups,
            "rollout_filter/audited": b["audited"],
            "rollout_filter/audited_alive": b["audited_alive"],
            "rollout_filter/skipped_total": t["skipped"],
            "rollout_filter/epoch_skipped": float(getattr(self, "_epoch_skipped", 0)),
            "rollout_filter/audited_total": t["audited"],
            "rollout_filter/audited_alive_total": t["audited_alive"],
            "rollout_filter/wrong_skip_rate": t["audited_alive"] / t["audited"] if t["audited"] else 0.0,
            "rollout_filter/brier_total": t["brier_sum"] / t["observed"] if t["observed"] else 0.0,
            "rollout_filter/brier_raw_total": self.brier_raw[1] / t["observed"] if t["observed"] else 0.0,
        }
        self._reset_batch()
        return out

    # ----------------------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, np.ndarray]:
        """The state as plain arrays, for checkpoints."""
        return {
            "last_pass_rate": self.last_pass_rate.copy(),
            "ema_pass_rate": self.ema_pass_rate.copy(),
            "dead_streak": self.dead_streak.copy(),
            "last_epoch": self.last_epoch.copy(),
            "progress": np.asarray(self.progress),
            "visit": self.visit.copy(),
            "first_dead": self.first_dead.copy(),
            "first_seen": self.first_seen.copy(),
            "epoch_prediction": self.epoch_prediction.copy(),
            "epoch_audit": self.epoch_audit.copy(),
            "epoch_skipped": np.asarray(getattr(self, "_epoch_skipped", 0)),
            "totals": np.asarray([self.totals[k] for k in sorted(self.totals)], dtype=np.float64),
            "batch": np.asarray([self._batch[k] for k in sorted(self._batch)], dtype=np.float64),
            "epoch_raw": self.epoch_raw.copy(),
            "epoch_seen": self.epoch_seen.copy(),
            "calibration_count": self.calibration_count.copy(),
            "calibration_dead": self.calibration_dead.copy(),
            "calibration_pred": self.calibration_pred.copy(),
            "brier_raw": self.brier_raw.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a state produced by [`~RolloutFilter.state_dict`]."""
        if len(state["last_pass_rate"]) != self.num_prompts:
            raise ValueError(
                f"The saved rollout filter state covers {len(state['last_pass_rate'])} prompts, the train dataset "
                f"has {self.num_prompts}: resume with the same dataset."
            )
        self.last_pass_rate = np.asarray(state["last_pass_rate"], dtype=np.float64).copy()
        self.ema_pass_rate = np.asarray(state["ema_pass_rate"], dtype=np.float64).copy()
        self.dead_streak = np.asarray(state["dead_streak"], dtype=np.int64).copy()
        self.last_epoch = np.asarray(state["last_epoch"], dtype=np.int64).copy()
        self.progress = float(state["progress"])
        self.visit = np.asarray(state["visit"], dtype=np.float64).copy()
        self.first_dead = np.asarray(state["first_dead"], dtype=np.int64).copy()
        self.first_seen = np.asarray(state["first_seen"], dtype=np.int64).copy()
        self.epoch_prediction = np.asarray(state["epoch_prediction"], dtype=np.float64).copy()
        self.epoch_audit = np.asarray(state["epoch_audit"], dtype=bool).copy()
        self._epoch_skipped = int(state["epoch_skipped"])
        self.totals = dict(zip(sorted(self.totals), np.asarray(state["totals"], dtype=np.float64).tolist()))
        self._batch = dict(zip(sorted(self._batch), np.asarray(state["batch"], dtype=np.float64).tolist()))
        # States saved before the online calibration existed: no calibration data, raw = logged predictions.
        self.epoch_raw = np.asarray(state.get("epoch_raw", self.epoch_prediction), dtype=np.float64).copy()
        seen = state.get("epoch_seen", ~np.isnan(self.last_pass_rate))
        self.epoch_seen = np.asarray(seen, dtype=bool).copy()
        for name in ("calibration_count", "calibration_dead", "calibration_pred"):
            setattr(self, name, np.asarray(state.get(name, np.zeros(CALIBRATION_BINS)), dtype=np.float64).copy())
        brier_raw = state.get("brier_raw", [self._batch["brier"], self.totals["brier_sum"]])
        self.brier_raw = np.asarray(brier_raw, dtype=np.float64).copy()


def prior_buckets_from_column(values: list[Any]) -> np.ndarray:
    """Integer bucket codes of a dataset column's values (each distinct value its own bucket, in sorted order)."""
    keys = sorted({repr(v) for v in values})
    code = {k: i for i, k in enumerate(keys)}
    return np.asarray([code[repr(v)] for v in values], dtype=np.int64)


def build_rollout_filter(args: Any, train_dataset: Any, num_generations: int) -> RolloutFilter | None:
    """
    The [`RolloutFilter`] an [`LZEGRPOConfig`] asks for (`None` when `rollout_filter="none"` or without a dataset).

    Its `min_pool` is the distinct prompts of one generation batch (`generation_batch_size // num_generations`), and
    `rollout_filter_prior_column`, when set, must be a column of the (map-style) train dataset.
    """
    if args.rollout_filter == "none" or train_dataset is None:
        return None
    if not hasattr(train_dataset, "__len__") or not hasattr(train_dataset, "column_names"):
        raise ValueError(
            f"rollout_filter={args.rollout_filter!r} needs a map-style train dataset (it skips prompts by index); got "
            f"{type(train_dataset).__name__}. Pass a `datasets.Dataset` or set rollout_filter='none'."
        )
    buckets = None
    column = args.rollout_filter_prior_column
    if column is not None:
        if column not in train_dataset.column_names:
            raise ValueError(
                f"rollout_filter_prior_column={column!r} is not a column of the train dataset "
                f"{train_dataset.column_names}: name one of them or leave it unset."
            )
        buckets = prior_buckets_from_column(list(train_dataset[column]))
    return RolloutFilter(
        len(train_dataset),
        num_generations,
        mode=args.rollout_filter,
        threshold=args.rollout_filter_threshold,
        retry_epochs=args.rollout_filter_retry_epochs,
        audit_fraction=args.rollout_filter_audit,
        min_pool=max(1, args.generation_batch_size // num_generations),
        prior_buckets=buckets,
        ema_decay=args.energy_ema_decay,
        seed=args.seed,
        calibration=args.rollout_filter_calibration,
        momentum=args.rollout_filter_momentum,
    )
