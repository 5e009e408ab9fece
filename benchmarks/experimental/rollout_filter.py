r"""Experimental rollout-side selection (`rollout_filter`): predict, before generation, which prompts will come back
dead, and skip them.

Off by default: on the benchmark tasks it kept accuracy only with its online calibration and saved little (README,
"Rollout-side selection"; BENCHMARKS.md sections 7-7d). It plans the prompts of a map-style dataset (ids are row
indices, [`~lze_trl.prompt_ids.PromptIds`]) from the per-prompt table, through [`~lze_trl.run.LZERun`]'s planning:

- granularity `"batch"` ([`~RolloutFilter.plan_batch`]): each generation batch is decided when the data loader asks
  for it: the sampler walks the epoch's order from its cursor and the batch takes the next candidates not skipped
  (the skipped ones are consumed, so skipping shortens the epoch);
- granularity `"epoch"` ([`~RolloutFilter.plan_epoch`]): the epoch's prompts are decided once, at its start.

A prompt is skipped when its predicted dead probability `pi` ([`~benchmarks.experimental.dead_prediction`], calibrated
online) exceeds the threshold (mode `"lze"`), or with probability `1 - max(0.5 ** k, 0.01)` after a dead streak `k`
(mode `"greso"`, the GRESO-like baseline). A prompt never observed gets the prior `pi = (dead_first + 1) /
(first + 2)` of its bucket (a value of `rollout_filter_prior_column`), which skips it only when such a column is
given. Exploration floor: a prompt is kept when `progress - visit >= M (1 + h) / 2` (`progress`: groups planned so
far over the dataset size, `visit`: the progress at its last roll-out, `h` a fixed per-prompt draw, `M` =
`rollout_filter_retry_epochs`). Audits: about `rollout_filter_audit` of the generated groups are skipped prompts
rolled out anyway, to count wrong skips. Cap: an epoch (per batch: its first batch) is always filled with the
skipped prompts least likely dead. The draws are seeded by `(seed, epoch[, batch])`: every process decides the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lze_trl.prompt_state import PromptState

from .dead_prediction import Calibration, predict_dead_raw


ROLLOUT_FILTER_MODES = ("none", "lze", "greso")
ROLLOUT_FILTER_GRANULARITIES = ("batch", "epoch")
GRESO_BASE = 0.5
GRESO_MIN_KEEP = 0.01
TOTALS = ("skipped", "audited", "audited_alive", "observed", "brier_sum", "brier_raw_sum")
BATCH = ("groups", "observed_dead", "predicted_dead", "brier", "brier_raw", "audited", "audited_alive")


class RolloutFilter:
    """
    The rollout-side planner (see the module docstring).

    Args:
        row_ids (`np.ndarray`):
            The prompt id of every row of the train dataset (ids are row indices: the first row of each prompt).
        num_generations (`int`):
            Rollouts per group `G`.
        state ([`PromptState`]):
            The run's per-prompt table (read, never written).
        mode (`str`, *optional*, defaults to `"lze"`):
            `"lze"` or `"greso"`.
        threshold (`float`, *optional*, defaults to `0.6`):
            `"lze"`: skip when `pi > threshold`.
        retry_epochs (`int`, *optional*, defaults to `8`):
            Exploration floor `M`.
        audit_fraction (`float`, *optional*, defaults to `0.02`):
            Share of the generated groups that are audited skips.
        min_pool (`int`, *optional*, defaults to `1`):
            Distinct prompts of one generation batch (the cap).
        prior_buckets (`np.ndarray`, *optional*):
            Bucket of each row for the prior of unseen prompts; `None`: one pooled prior that never skips.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the draws.
        calibration (`bool`, *optional*, defaults to `True`):
            Recalibrate `pi` online (mode `"greso"`: only the logged prediction).
        momentum (`float`, *optional*, defaults to `1.0`):
            `mu` of the predicted pass rate.
    """

    def __init__(
        self,
        row_ids: np.ndarray,
        num_generations: int,
        state: PromptState,
        mode: str = "lze",
        threshold: float = 0.6,
        retry_epochs: int = 8,
        audit_fraction: float = 0.02,
        min_pool: int = 1,
        prior_buckets: np.ndarray | None = None,
        seed: int = 0,
        calibration: bool = True,
        momentum: float = 1.0,
    ) -> None:
        if mode not in ROLLOUT_FILTER_MODES[1:]:
            raise ValueError(f"Unknown rollout filter mode {mode!r}; expected one of {ROLLOUT_FILTER_MODES[1:]}.")
        self.row_ids = np.asarray(row_ids, dtype=np.int64)
        num_prompts = len(self.row_ids)
        self.num_prompts, self.num_generations, self.state = num_prompts, num_generations, state
        self.mode, self.threshold, self.retry_epochs = mode, threshold, retry_epochs
        self.audit_fraction, self.min_pool, self.seed = audit_fraction, min_pool, seed
        self.calibration = Calibration() if calibration else None
        self.momentum = float(momentum)
        self.skip_unseen = prior_buckets is not None
        buckets = np.zeros(num_prompts, dtype=np.int64) if prior_buckets is None else np.asarray(prior_buckets)
        if buckets.shape != (num_prompts,) or (buckets < 0).any():
            raise ValueError(f"prior_buckets must hold {num_prompts} non-negative integers.")
        self.prior_buckets = buckets.astype(np.int64)
        self.first_dead = np.zeros(int(buckets.max(initial=0)) + 1, dtype=np.int64)
        self.first_seen = np.zeros_like(self.first_dead)
        self.progress = 0.0
        self.visit = np.zeros(num_prompts)
        self.stagger = np.random.default_rng([seed, 0x57A6]).random(num_prompts)
        # Plan-time prediction, raw prediction, whether it came from the table, and audit flag, per prompt
        self.planned = np.full((3, num_prompts), np.nan)
        self.audit = np.zeros(num_prompts, dtype=bool)
        self.totals = dict.fromkeys(TOTALS, 0.0)
        self.batch = dict.fromkeys(BATCH, 0.0)
        self.epoch_skipped = 0

    # ----------------------------------------------------------------------------------------------- prediction
    def predict(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per prompt: the raw `pi`, whether it came from the table (not the prior), and `pi` as used."""
        ids = np.asarray(ids, dtype=np.int64)
        raw = predict_dead_raw(self.state.get(ids), self.momentum, self.num_generations)
        seen = ~np.isnan(raw)
        prior = (self.first_dead + 1.0) / (self.first_seen + 2.0)
        raw[~seen] = prior[self.prior_buckets[ids[~seen]]]
        pi = raw.copy()
        if self.calibration is not None and seen.any():
            pi[seen] = self.calibration(raw[seen])
        return raw, seen, pi

    def _skip(self, ids: np.ndarray, u_skip: np.ndarray, exempt: np.ndarray | None):
        """The skip rule before the audit and the cap: per candidate, `(raw, seen, pi, skip)`."""
        raw, seen, pi = self.predict(ids)
        if self.mode == "lze":
            skip = pi > self.threshold
        else:
            streak = np.abs(self.state.get(ids)["saturated_streak"])
            skip = u_skip < 1.0 - np.maximum(GRESO_BASE**streak, GRESO_MIN_KEEP)
        if not self.skip_unseen:
            skip &= seen
        skip &= self.progress - self.visit[ids] < self.retry_epochs * (1.0 + self.stagger[ids]) / 2.0
        if exempt is not None:
            skip &= ~np.isin(ids, exempt)
        return raw, seen, pi, skip

    def _planned(self, ids: np.ndarray, raw, seen, pi, audit) -> None:
        self.planned[:, ids] = np.stack([pi, raw, seen.astype(np.float64)])
        self.audit[ids] = audit
        self.visit[ids] = self.progress
        self.progress += len(ids) / max(self.num_prompts, 1)
        self.totals["audited"] += int(audit.sum())

    # ----------------------------------------------------------------------------------------------- planning
    def plan_epoch(self, epoch: int, order: np.ndarray, exempt: np.ndarray | None = None) -> np.ndarray:
        """The rows epoch `epoch` rolls out: those of `order` whose prompt is not skipped."""
        n = self.num_prompts
        available = np.zeros(n, dtype=bool)
        available[self.row_ids[order]] = True
        rng = np.random.default_rng([self.seed, epoch, 0x5F17])
        u_audit, u_skip = rng.random(n), rng.random(n)
        raw, seen, pi, skip = self._skip(np.arange(n), u_skip, exempt)
        skip &= available
        audit = skip & (u_audit < self.audit_fraction * int((available & ~skip).sum()) / max(n, 1))
        skip &= ~audit
        keep = available & ~skip
        short = min(self.min_pool, int(available.sum())) - int(keep.sum())
        if short > 0:  # cap: put back the skipped prompts least likely dead
            candidates = np.flatnonzero(skip)
            back = candidates[np.lexsort((candidates, raw[candidates], pi[candidates]))[:short]]
            keep[back], skip[back] = True, False
        kept = np.flatnonzero(keep)
        self._planned(kept, raw[kept], seen[kept], pi[kept], audit[kept])
        self.epoch_skipped = int(skip.sum())
        self.totals["skipped"] += self.epoch_skipped
        return order[keep[self.row_ids[order]]]

    def plan_batch(
        self, epoch: int, batch: int, order: np.ndarray, cursor: int, size: int, exempt: np.ndarray | None = None
    ) -> tuple[list[int] | None, int]:
        """
        The next generation batch of `size` prompts (rows of `order` from `cursor`), decided now, and the new cursor.

        The first `size` candidates of the walk that are not skipped; `Binomial(size, audit_fraction)` of the batch's
        slots go to the first skipped candidates (audits); the skipped candidates before the last one taken are
        consumed. The epoch's first batch is always full (cap); a later batch that cannot be filled ends the epoch
        (`None`).
        """
        rows = np.asarray(order, dtype=np.int64)[cursor:]
        rest = self.row_ids[rows]
        if len(rest) < size or size <= 0:
            return None, len(order)
        rng = np.random.default_rng([self.seed, epoch, batch, 0xB47C])
        raw, seen, pi, skip = self._skip(rest, rng.random(len(rest)), exempt)
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
        self._planned(rest[take], raw[take], seen[take], pi[take], audit[take])
        skipped = int(skip[:consumed].sum())
        self.epoch_skipped = skipped + (self.epoch_skipped if batch > 0 else 0)
        self.totals["skipped"] += skipped
        return rows[take].tolist(), cursor + consumed

    # ----------------------------------------------------------------------------------------------- observation
    def observe(self, ids: np.ndarray, pass_rates: np.ndarray, live: np.ndarray) -> None:
        """Scores the predictions of the groups just observed (before the table absorbs them) and learns the
        calibration and the prior of unseen prompts from them."""
        ids = np.asarray(ids, dtype=np.int64)
        valid = np.isfinite(pass_rates) & (ids >= 0) & (ids < self.num_prompts)
        ids, dead = ids[valid], ~np.asarray(live, dtype=bool)[valid]
        if len(ids) == 0:
            return
        pi, raw, from_table = self.planned[0, ids], self.planned[1, ids], self.planned[2, ids] > 0
        unplanned = np.isnan(pi)
        if unplanned.any():  # observed without a plan (a refill, or before the first plan): the current prediction
            now_raw, now_seen, now_pi = self.predict(ids)
            pi, raw = np.where(unplanned, now_pi, pi), np.where(unplanned, now_raw, raw)
            from_table = np.where(unplanned, now_seen, from_table)
        if self.calibration is not None:
            self.calibration.learn(raw[from_table], dead[from_table])
        audited = self.audit[ids]
        b = self.batch
        b["groups"] += len(ids)
        b["observed_dead"] += int(dead.sum())
        b["predicted_dead"] += float(pi.sum())
        b["brier"] += float(((pi - dead) ** 2).sum())
        b["brier_raw"] += float(((raw - dead) ** 2).sum())
        b["audited"] += int(audited.sum())
        b["audited_alive"] += int((audited & ~dead).sum())
        self.totals["observed"] += len(ids)
        self.totals["brier_sum"] += float(((pi - dead) ** 2).sum())
        self.totals["brier_raw_sum"] += float(((raw - dead) ** 2).sum())
        self.totals["audited_alive"] += int((audited & ~dead).sum())
        self.audit[ids] = False  # an audit counts once
        # Prior: first observations per bucket (first occurrence in this call wins)
        first_ids, first_pos = np.unique(ids, return_index=True)
        new = self.state.get(first_ids)["num_observations"] == 0
        np.add.at(self.first_seen, self.prior_buckets[first_ids[new]], 1)
        np.add.at(self.first_dead, self.prior_buckets[first_ids[new]], dead[first_pos[new]].astype(np.int64))

    def metrics(self) -> dict[str, float]:
        """Metrics of the groups observed since the last call (one generation batch), then a reset."""
        b, t = self.batch, self.totals
        groups = max(b["groups"], 1.0)
        observed = t["observed"] or 1.0
        out = {
            "rollout_filter/predicted_dead_frac": b["predicted_dead"] / groups,
            "rollout_filter/observed_dead_frac": b["observed_dead"] / groups,
            "rollout_filter/brier": b["brier"] / groups,
            "rollout_filter/brier_raw": b["brier_raw"] / groups,
            "rollout_filter/audited": b["audited"],
            "rollout_filter/audited_alive": b["audited_alive"],
            "rollout_filter/skipped_total": t["skipped"],
            "rollout_filter/epoch_skipped": float(self.epoch_skipped),
            "rollout_filter/audited_total": t["audited"],
            "rollout_filter/audited_alive_total": t["audited_alive"],
            "rollout_filter/wrong_skip_rate": t["audited_alive"] / t["audited"] if t["audited"] else 0.0,
            "rollout_filter/brier_total": t["brier_sum"] / observed,
            "rollout_filter/brier_raw_total": t["brier_raw_sum"] / observed,
        }
        self.batch = dict.fromkeys(BATCH, 0.0)
        return out

    # ----------------------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, np.ndarray]:
        arrays = {
            "first_dead": self.first_dead.copy(),
            "first_seen": self.first_seen.copy(),
            "visit": self.visit.copy(),
            "planned": self.planned.copy(),
            "audit": self.audit.copy(),
            "scalars": np.asarray([self.progress, self.epoch_skipped]),
            "totals": np.asarray([self.totals[k] for k in TOTALS]),
            "batch": np.asarray([self.batch[k] for k in BATCH]),
        }
        if self.calibration is not None:
            arrays.update({f"calibration.{k}": v for k, v in self.calibration.state_dict().items()})
        return arrays

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["visit"]) != self.num_prompts:
            raise ValueError(
                f"The saved rollout filter state covers {len(state['visit'])} prompts, the train dataset has "
                f"{self.num_prompts}: resume with the same dataset."
            )
        for name in ("first_dead", "first_seen", "visit", "planned", "audit"):
            setattr(self, name, np.asarray(state[name]).astype(getattr(self, name).dtype))
        self.progress, self.epoch_skipped = float(state["scalars"][0]), int(state["scalars"][1])
        self.totals = dict(zip(TOTALS, np.asarray(state["totals"], dtype=np.float64).tolist()))
        self.batch = dict(zip(BATCH, np.asarray(state["batch"], dtype=np.float64).tolist()))
        if self.calibration is not None:
            self.calibration.load_state_dict({k[12:]: v for k, v in state.items() if k.startswith("calibration.")})


def build_rollout_filter(
    args: Any, dataset: Any, row_ids: np.ndarray, num_generations: int, state: PromptState
) -> RolloutFilter:
    """
    The [`RolloutFilter`] an [`LZEGRPOConfig`] asks for, over a map-style train `dataset` whose rows have the prompt
    ids `row_ids`: `min_pool` is the distinct prompts of one generation batch, and `rollout_filter_prior_column`, when
    set, must be one of its columns.
    """
    buckets = None
    column = args.rollout_filter_prior_column
    if column is not None:
        if column not in dataset.column_names:
            raise ValueError(
                f"rollout_filter_prior_column={column!r} is not a column of the train dataset "
                f"{dataset.column_names}: name one of them or leave it unset."
            )
        codes = {k: i for i, k in enumerate(sorted({repr(v) for v in dataset[column]}))}
        buckets = np.asarray([codes[repr(v)] for v in dataset[column]], dtype=np.int64)
    return RolloutFilter(
        row_ids,
        num_generations,
        state,
        mode=args.rollout_filter,
        threshold=args.rollout_filter_threshold,
        retry_epochs=args.rollout_filter_retry_epochs,
        audit_fraction=args.rollout_filter_audit,
        min_pool=max(1, args.generation_batch_size // num_generations),
        prior_buckets=buckets,
        seed=args.seed,
        calibration=args.rollout_filter_calibration,
        momentum=args.rollout_filter_momentum,
    )
