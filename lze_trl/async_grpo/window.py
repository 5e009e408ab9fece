"""LZE between TRL's async rollout worker and its trainer: the generation batches in flight. Plain numpy, no TRL.

TRL's `AsyncGRPOTrainer` reads scored rollout samples, one training row each, from its worker's queue
(`rollout_buffer`) through `RolloutQueueDataset`. [`GroupWindow`] stands between the two as a queue of its own, and
drives the worker: it draws the prompts (each epoch's permutation, planned by the run: forward pruning, planning
selectors), sends the worker one [`~lze_trl.async_grpo.samples.Order`] per round of each group, takes back the rounds'
tagged rows, lets the run's round policy choose after each round which groups go on (the probe, the adaptive
budget), and, once a generation batch (`window_groups` groups) is complete, scores it into the per-prompt state in
policy-version order, lets the selector choose among its complete groups once, records it, and hands the selected
groups' rows on (advantages over the whole group, scaled by the selector's weight). The unselected groups never reach
the trainer: dropped before its queue, not masked in its loss.

Up to `batches_in_flight` generation batches are open at once, so the worker rolls out the next batch while the
oldest one completes; but a batch's choices and its close happen in order, each after the batch before it is recorded,
so every decision is the one the synchronous trainer's serial rounds would take on the same rewards (the round
policy's noise is seeded by the batches recorded). The method is [`~lze_trl.method.run.LZERun`]'s and the round
policy's, as in the synchronous trainer: no energy, selection or choice code is repeated here.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..common.epochs import EpochOrders
from ..method.selection import total_rewards
from ..method.shadow import Shadow
from ..rounds.in_flight import BatchInFlight, round_done
from .samples import TAGS, Order, group_advantages, rows_from_state, rows_state


if TYPE_CHECKING:
    from ..method.run import LZERun


@dataclass(kw_only=True)
class AsyncBatchInFlight(BatchInFlight):
    """
    A generation batch in flight in the window ([`~lze_trl.rounds.in_flight.BatchInFlight`]: `state`, whose
    `rollouts_so_far` counts the rounds arrived, and `round_last`, the end of the round in flight), with its rows as
    the worker sends them.

    Attributes:
        indices (`np.ndarray`): Each group's train dataset row.
        group_ids (`np.ndarray`): Each group's id (TRL's `group_id` of its rows).
        through (`np.ndarray`): Each group's rollouts arrived so far.
        versions (`np.ndarray`): Each group's policy version (its first round's; -1 before it arrives).
        rows (`list[list]`): Each group's rows, round after round.
    """

    indices: np.ndarray
    group_ids: np.ndarray
    through: np.ndarray
    versions: np.ndarray
    rows: list[list[Any]]

    def round_arrived(self) -> bool:  # every going-on group's round in flight has come back
        return bool((self.through[self.state.going_on] >= self.round_last).all())


class GroupWindow:
    """
    A queue (`get`, `qsize`) of the rows of the groups LZE selects, fed from the worker's queue `source`; it sends the
    worker its orders through `send(orders)`.

    Args:
        run ([`~lze_trl.method.run.LZERun`]):
            The run's LZE state and decisions (its `dataset_keys`: the train dataset's prompt keys).
        window_groups (`int`):
            Groups per generation batch.
        num_generations (`int`):
            Rollouts of a complete group.
        correctness_index (`int`, *optional*, defaults to `0`):
            Column of the rewards that defines correctness (`correctness_reward`).
        batches_in_flight (`int`, *optional*, defaults to `2`):
            Generation batches open at once (drawn and not yet recorded).
        log (`Callable[[dict], None]`, *optional*):
            Receives each generation batch's `lze/` metrics.
        oldest_trained (`Callable[[], int]`, *optional*):
            The oldest policy version TRL still trains (`model_version - max_staleness`); selected rows older than it
            are counted in `lze/stale_rows` and warned about once.
        global_step (`Callable[[], int]`, *optional*):
            The trainer's optimizer step, for the selection log.

    Attributes:
        exhausted (`str`):
            Why the window opens no more batches (forward pruning left an epoch without a prompt), empty until then:
            the trainer stops at the end of the step (the rows of the batches in flight serve it).
        decisions (`collections.deque`):
            `(group_id, model_version, prompt_key, weight)` of the last 100,000 complete groups decided, for
            inspection (not saved with the state).
    """

    def __init__(
        self,
        run: LZERun,
        window_groups: int,
        num_generations: int,
        correctness_index: int = 0,
        batches_in_flight: int = 2,
        log: Callable[[dict[str, float]], None] | None = None,
        global_step: Callable[[], int] | None = None,
        oldest_trained: Callable[[], int] | None = None,
    ) -> None:
        if window_groups < 1 or batches_in_flight < 1:
            raise ValueError(
                f"window_groups={window_groups!r} and batches_in_flight={batches_in_flight!r} must be integers >= 1."
            )
        self.run, self.window_groups, self.num_generations = run, window_groups, num_generations
        self.correctness_index, self.batches_in_flight = correctness_index, batches_in_flight
        self.schedule = run.round_policy.schedule
        self.log = log or (lambda metrics: None)
        self.global_step = global_step or (lambda: 0)
        self.oldest_trained = oldest_trained or (lambda: -1)
        self.warned_stale = False
        self.source: Any = None  # the worker's queue of scored rows
        self.send: Callable[[list[Order]], None] | None = None  # sends the worker orders
        self.batches: deque[AsyncBatchInFlight] = deque()  # open, oldest first
        self.ready: deque[Any] = deque()  # the selected groups' rows, to hand on in order
        self.partial: dict[tuple[int, int], list[Any]] = {}  # (group, round's first rollout): rows so far
        self.next_group = 0
        self.drawn_in_epoch = 0  # dataset rows of the epoch's plan drawn so far
        self.orders = EpochOrders(len(run.dataset_keys), run.args.seed)  # the synchronous sampler's epoch orders
        self.newest_version: dict[int, int] = {}  # per prompt, the newest policy version scored into its state
        self.resend = False  # after a resume: the open rounds' orders are sent again
        self.exhausted = ""  # why no batch opens any more (an epoch had no prompt to roll out), once it is so
        self.decisions: deque[tuple[int, int, int, float]] = deque(maxlen=100_000)
        self.waited_seconds = 0.0  # in `get`: the trainer waiting for rollouts (and scoring them), over the run

    # ----------------------------------------------------------------------------------------------- the queue
    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """The next selected row; takes rows from `source` until one is ready. Raises `queue.Empty` when `source`
        does (after `timeout` seconds in all), keeping what it took so far."""
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        try:
            self.advance()
            while not self.ready:
                if self.exhausted and not self.batches:
                    raise RuntimeError(f"{self.exhausted} The batches in flight could not fill the step.")
                if not block:
                    self.put(self.source.get_nowait())
                elif deadline is None:
                    self.put(self.source.get())
                else:
                    self.put(self.source.get(timeout=max(deadline - time.monotonic(), 0.0)))
            return self.ready.popleft()
        finally:
            self.waited_seconds += time.monotonic() - start

    def qsize(self) -> int:
        """Rows waiting: the worker's queue and the selected rows not handed on yet."""
        return self.source.qsize() + len(self.ready)

    def put(self, sample: Any) -> None:
        """Takes one row of the worker's; a round complete with it is recorded, and the batches advance."""
        missing = [tag for tag in TAGS if getattr(sample, tag, None) is None]
        if missing:
            raise TypeError(
                f"A rollout sample of type {type(sample).__name__} lacks LZE's tags {missing}: LZE needs each row's "
                "prompt key, rollout, round and the round's rewards. Use a rollout worker that takes LZE's orders and "
                "pushes LZERolloutSample rows (lze_trl.async_grpo.worker.LZERolloutWorker, or "
                "lze_trl.testing.async_stand_ins.StandInRolloutWorker)."
            )
        batch, g = self._group(sample.group_id)
        rows = self.partial.setdefault((sample.group_id, sample.round_first), [])
        rows.append(sample)
        if len(rows) >= max(sample.round_rows, 1):
            del self.partial[(sample.group_id, sample.round_first)]
            self._round_arrived(batch, g, rows)
        self.advance()

    def _group(self, group_id: int) -> tuple[AsyncBatchInFlight, int]:
        for batch in self.batches:
            where = np.flatnonzero(batch.group_ids == group_id)
            if len(where):
                return batch, int(where[0])
        raise RuntimeError(
            f"The worker sent a row of group {group_id}, which is in no open generation batch: a worker must roll out "
            "only the orders it is sent, each once."
        )

    def _round_arrived(self, batch: AsyncBatchInFlight, g: int, rows: list[Any]) -> None:
        first = rows[0].round_first
        rewards = np.array(rows[0].round_rewards, dtype=np.float64)
        last = first + len(rewards)
        self._check_rewards(rewards, rows[0].group_id, first)
        if first != batch.through[g] or last > batch.round_last or not batch.state.going_on[g]:
            raise RuntimeError(
                f"The worker sent rollouts {first}-{last} of group {rows[0].group_id}, which were not ordered (it has "
                f"{batch.through[g]} rollouts, the round in flight ends at {batch.round_last})."
            )
        batch.record(np.array([g]), first, last, rewards[None])
        batch.through[g] = last
        if first == 0:
            batch.versions[g] = rows[0].model_version
        batch.rows[g].extend(s for s in rows if s.round_rows > 0)

    def _check_rewards(self, rewards: np.ndarray, group_id: int, first: int) -> None:
        names = self.run.unscorable_guard.reward_names
        if rewards.ndim != 2 or rewards.shape[1] != len(names):
            raise ValueError(
                f"Group {group_id}'s round from rollout {first} carries rewards of shape {rewards.shape}: LZE needs "
                f"one row per rollout and one column per reward function of the run ({names}, in order)."
            )

    # ----------------------------------------------------------------------------------------------- the batches
    def advance(self) -> None:
        """Chooses after the oldest batch's round or closes it, in order, as far as what arrived allows; then opens
        batches up to `batches_in_flight` (sending their first round's orders)."""
        if self.resend:
            self._send([order for batch in self.batches for order in self._orders(batch)])
            self.resend = False
        while self.batches and self.batches[0].round_arrived():
            batch = self.batches[0]
            if not batch.complete:  # its round in flight has arrived whole: the round policy moves it on
                if not round_done(batch, self.run, 1):
                    self._send(self._orders(batch))  # the next round's orders
                    continue
            self.close(self.batches.popleft())
        while len(self.batches) < self.batches_in_flight and not self.exhausted:
            self._open()

    def _open(self) -> None:
        run, G = self.run, self.num_generations
        drawn = self._draw(self.window_groups)
        if drawn is None:  # an epoch with no prompt: the run ends at this step
            return
        indices, skipping = drawn
        skipped = 0
        if run.skips:  # skip mode: the batch generates only its prompts that pruning does not skip, not refilled
            skip, metrics = run.skip_groups(run.dataset_keys[indices], 1, skipping)
            indices, skipped = indices[~skip], int(skip.sum())
            self.log(metrics)
        n = len(indices)
        group_ids = np.arange(self.next_group, self.next_group + n, dtype=np.int64)
        self.next_group += n
        batch = AsyncBatchInFlight(self.schedule[0], skipped=skipped, indices=indices, group_ids=group_ids,
                          through=np.zeros(n, dtype=np.int64), versions=np.full(n, -1, dtype=np.int64),
                          rows=[[] for _ in range(n)])  # fmt: skip
        batch.start(run.dataset_keys[indices], G, len(run.unscorable_guard.reward_names), self.correctness_index)
        self.batches.append(batch)
        self._send(self._orders(batch))

    def _draw(self, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The next `n` dataset rows of the epochs' plans (each epoch TRL's `RepeatSampler` order, as the synchronous
        trainer's sampler draws it: `EpochOrders`, planned by the run), and whether the epoch each was drawn from
        skips it (skip mode's `position.skipping`); `None` when an epoch has no prompt, which sets `exhausted` and
        warns."""
        run, position = self.run, self.run.position
        size, drawn, skipping = len(run.dataset_keys), [], []
        while len(drawn) < n:
            if position.plan is None or self.drawn_in_epoch >= len(position.plan):
                if position.plan is not None:
                    position.skipped_groups = position.groups_skipped(size)
                    position.epoch += 1
                order = np.asarray(self.orders(position.epoch), dtype=np.int64)
                position.plan = np.asarray(run.plan_epoch(position.epoch, order), dtype=np.int64)
                self.drawn_in_epoch = 0
                if len(position.plan) == 0:
                    self.exhausted = (
                        f"Epoch {position.epoch} has no prompt to roll out: forward pruning left none of the {size} "
                        "prompts in its pool, so training stops at this step. Train on more prompts, prune later (a "
                        "larger `prune_solved_after` or `prune_unsolved_after`), explore more "
                        "(`prune_revisit_fraction`, or `prune_target_dead_frac` with `prune_exploration='adaptive'`), "
                        "or turn pruning (`prune_solved`, `prune_unsolved`) off."
                    )
                    run.warn(self.exhausted)
                    return None
            take = position.plan[self.drawn_in_epoch : self.drawn_in_epoch + n - len(drawn)]
            drawn.extend(int(i) for i in take)
            skipping.extend(np.isin(run.dataset_keys[take], position.skipping).tolist())
            self.drawn_in_epoch += len(take)
        return np.asarray(drawn, dtype=np.int64), np.asarray(skipping, dtype=bool)

    def _orders(self, batch: AsyncBatchInFlight) -> list[Order]:
        """The orders of `batch`'s round in flight still missing (every going-on group's, rollouts so far to
        `round_last`)."""
        first, last = batch.state.rollouts_so_far, batch.round_last
        return [
            Order(int(batch.group_ids[g]), int(batch.indices[g]), int(batch.state.prompt_keys[g]), first, last)
            for g in np.flatnonzero(batch.state.going_on & (batch.through < last))
        ]

    def _send(self, orders: list[Order]) -> None:
        if orders:
            if self.send is None:
                raise RuntimeError("The window has no worker to send its orders to (`send` is not set).")
            self.send(orders)

    # ----------------------------------------------------------------------------------------------- closing
    def close(self, batch: AsyncBatchInFlight) -> np.ndarray:
        """Scores a complete batch in version order, selects among its complete groups, records it, queues the selected
        rows (advantages over the whole group, scaled by the weight); returns each group's weight, in draw order."""
        run, state = self.run, batch.state
        complete, rewards, keys, versions = state.going_on, state.rewards, state.prompt_keys, batch.versions
        generated = np.arange(self.num_generations)[None, :] < batch.through[:, None]
        run.unscorable_guard.check(rewards[generated])
        totals = total_rewards(rewards)
        late = sum(self.newest_version.get(int(k), -1) > v for k, v in zip(keys, versions))
        for key, version in zip(keys, versions):
            self.newest_version[int(key)] = max(self.newest_version.get(int(key), -1), int(version))
        fresh = {"lze/fresh_rollouts": float(sum(state.fresh))}
        weights, metrics, shadow_kept = batch.decide(run, totals, self.global_step(), fresh, versions)
        rows_out, tokens = 0, 0
        if shadow_kept is not None:  # the loss tokens of each complete group
            group_tokens = [sum(np.sum(s.completion_mask) for s in batch.rows[g]) for g in np.flatnonzero(complete)]
            metrics.update(Shadow.update_tokens(np.asarray(group_tokens), shadow_kept[complete]))
        grpo_rows = sum(len(batch.rows[g]) for g in np.flatnonzero(complete))
        grpo_tokens = sum(int(np.sum(s.completion_mask)) for g in np.flatnonzero(complete) for s in batch.rows[g])
        for g, weight in enumerate(weights):
            self.decisions.append((int(batch.group_ids[g]), int(versions[g]), int(keys[g]), float(weight)))
            if weight > 0 and complete[g]:
                advantages = group_advantages(totals[g]) * float(weight)
                for s in batch.rows[g]:
                    self.ready.append(dataclasses.replace(s, advantage=float(advantages[s.rollout])))
                    rows_out, tokens = rows_out + 1, tokens + int(np.sum(s.completion_mask))
        if not (weights > 0).any():  # every group dead: zero-advantage rows, so that the trainer steps on (as the
            for g in np.flatnonzero(complete):  # synchronous one on zero-weight rows) instead of waiting for ever
                self.ready.extend(dataclasses.replace(s, advantage=0.0) for s in batch.rows[g])
        stale = sum(s.model_version < self.oldest_trained() for s in itertools.islice(reversed(self.ready), rows_out))
        if stale and not self.warned_stale:
            self.warned_stale = True
            run.warn(
                f"{stale} of the {rows_out} rows LZE selected in a generation batch were already too stale to train "
                "when it closed (older than max_staleness policy versions): the trainer drops them. The batch's first "
                "rounds waited too long for its last ones and for the batches before it: lower batches_in_flight or "
                "window_groups, or raise max_staleness."
            )
        metrics["lze/stale_rows"] = float(stale)
        metrics["lze/late_groups"] = float(late)
        metrics["lze/window_versions"] = float(len(np.unique(versions)))
        batch.close(run, metrics, (rows_out, tokens), (grpo_rows, grpo_tokens), self.log)
        return weights

    # ----------------------------------------------------------------------------------------------- state
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The open batches and the rows the window holds, as arrays (prefixed `window.`) and JSON counters. A round
        partly arrived is not kept: it is ordered again on resume. Rows whose prompt, completion or metrics JSON
        cannot write raise a `TypeError`."""
        rows = [*self.ready, *(s for b in self.batches for group in b.rows for s in group)]
        arrays, text = rows_state(rows, "window.")
        arrays["window.newest_keys"] = np.array(list(self.newest_version), dtype=np.int64)
        arrays["window.newest_versions"] = np.array(list(self.newest_version.values()), dtype=np.int64)
        batches = []
        for i, b in enumerate(self.batches):
            batch_arrays, saved = b.state_dict(f"window.batch{i}.")
            arrays.update(batch_arrays)
            batches.append({
                **saved, "indices": b.indices.tolist(), "group_ids": b.group_ids.tolist(),
                "through": b.through.tolist(), "versions": b.versions.tolist(), "rows": [len(g) for g in b.rows],
            })  # fmt: skip
        counters = {"window_rows": text, "window_ready": len(self.ready), "window_batches": json.dumps(batches)}
        counters.update(window_next_group=self.next_group, window_drawn_in_epoch=self.drawn_in_epoch)
        return arrays, counters

    def load_state_dict(self, arrays: dict[str, np.ndarray], counters: dict[str, Any], make_sample: Callable) -> None:
        """Restores a window saved by [`~GroupWindow.state_dict`]; `make_sample(**fields)` builds a row. The orders of
        the rounds that had not arrived are sent again at the next [`~GroupWindow.advance`]."""
        rows = rows_from_state(arrays, counters["window_rows"], make_sample, "window.")
        ready = int(counters["window_ready"])
        self.ready, rest = deque(rows[:ready]), iter(rows[ready:])
        self.batches = deque()
        for i, b in enumerate(json.loads(counters["window_batches"])):
            self.batches.append(AsyncBatchInFlight(
                0, indices=np.asarray(b["indices"], dtype=np.int64),
                group_ids=np.asarray(b["group_ids"], dtype=np.int64), through=np.asarray(b["through"], dtype=np.int64),
                versions=np.asarray(b["versions"], dtype=np.int64),
                rows=[list(itertools.islice(rest, n)) for n in b["rows"]],
            ))  # fmt: skip
            self.batches[-1].load_state_dict(arrays, b, f"window.batch{i}.")
        self.partial = {}
        self.next_group, self.drawn_in_epoch = (
            int(counters["window_next_group"]),
            int(counters["window_drawn_in_epoch"]),
        )
        keys, versions = arrays["window.newest_keys"], arrays["window.newest_versions"]
        self.newest_version = {int(k): int(v) for k, v in zip(keys, versions)}
        self.resend = True
