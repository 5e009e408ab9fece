"""LZE between TRL's async rollout worker and its trainer: the generation batches in flight. Plain numpy, no TRL.

TRL's `AsyncGRPOTrainer` reads scored rollout samples, one training row each, from its worker's queue
(`rollout_buffer`) through `RolloutQueueDataset`. [`GroupWindow`] stands between the two as a queue of its own, and
drives the worker: it draws the prompts (each epoch's permutation, planned by the run: forward pruning, planning
selectors), sends the worker one [`~lze_trl.async_grpo.samples.Order`] per group (its `num_generations` rollouts, in
one go), takes back each group's tagged rows, and, once every group of a generation batch (`window_groups` groups)
has arrived, scores the batch into the per-prompt state in policy-version order, lets the selector choose among its
groups once, records it, and hands the selected groups' rows on (advantages over the whole group, scaled by the
selector's weight). The unselected groups never reach the trainer: dropped before its queue, not masked in its loss.

Up to `batches_in_flight` generation batches are open at once, so the worker rolls out the next batch while the
oldest one arrives; but the batches close in order, each after the batch before it is recorded, so every decision is
the one the synchronous trainer takes on the same rewards. The method is [`~lze_trl.method.run.LZERun`]'s
([`~lze_trl.method.run.LZERun.decide_batch`], [`~lze_trl.method.run.LZERun.close`]), as in the synchronous trainer:
no energy or selection code is repeated here.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..common.epochs import EpochOrders
from ..method.selection import total_rewards
from ..method.shadow import Shadow
from .samples import Order, check_tags, group_advantages, group_rewards, rows_from_state, rows_state


if TYPE_CHECKING:
    from ..method.run import LZERun


def _ints(values: Any = ()) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).reshape(-1)


@dataclass
class WindowBatch:
    """
    A generation batch in flight in the window: its groups, in draw order, and what has arrived of them.

    Attributes:
        indices (`np.ndarray`), group_ids (`np.ndarray`), prompt_keys (`np.ndarray`):
            Each group's train dataset row, id (TRL's `group_id` of its rows) and prompt key.
        rewards (`np.ndarray`):
            Each rollout's rewards, `(groups, num_generations, reward functions)`; NaN until its group arrives.
        arrived (`np.ndarray`), versions (`np.ndarray`):
            Whether each group has arrived whole (its rewards and every row it made), and its policy version (-1
            until then).
        rows (`list[list]`):
            Each group's rows, as the worker sent them (none for a group that made no row).
        skipped (`int`):
            Groups of the batch's prompts that skip mode (`prune_refill=False`) did not generate: predicted dead, they
            count in the selector's quota as dead groups do ([`~lze_trl.method.run.LZERun.select`]).
    """

    indices: np.ndarray = dataclasses.field(default_factory=_ints)
    group_ids: np.ndarray = dataclasses.field(default_factory=_ints)
    prompt_keys: np.ndarray = dataclasses.field(default_factory=_ints)
    rewards: np.ndarray = dataclasses.field(default_factory=lambda: np.empty((0, 0, 0)))
    arrived: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, dtype=bool))
    versions: np.ndarray = dataclasses.field(default_factory=_ints)
    rows: list[list[Any]] = dataclasses.field(default_factory=list)
    skipped: int = 0

    @classmethod
    def start(
        cls, indices: np.ndarray, group_ids: np.ndarray, prompt_keys: np.ndarray, shape: tuple[int, int], skipped: int
    ) -> WindowBatch:
        """A batch of the groups drawn, none arrived yet; `shape`: a group's rewards', `(num_generations, reward
        functions)`."""
        n = len(indices)
        rewards, arrived, versions = np.full((n, *shape), np.nan), np.zeros(n, dtype=bool), _ints(np.full(n, -1))
        rows: list[list[Any]] = [[] for _ in range(n)]
        return cls(_ints(indices), _ints(group_ids), _ints(prompt_keys), rewards, arrived, versions, rows, skipped)

    @property
    def complete(self) -> bool:
        """Whether every group of the batch has arrived."""
        return bool(self.arrived.all())

    def orders(self) -> list[Order]:
        """The orders of the groups that have not arrived, in draw order."""
        return [
            Order(int(self.group_ids[g]), int(self.indices[g]), int(self.prompt_keys[g]))
            for g in np.flatnonzero(~self.arrived)
        ]

    def state_dict(self, prefix: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The batch as arrays (its prompt keys and rewards, named `prefix` + the field) and JSON values (the rest; of
        its rows, how many each group holds: the window saves the rows themselves)."""
        arrays = {f"{prefix}prompt_keys": self.prompt_keys, f"{prefix}rewards": self.rewards}
        saved = {name: getattr(self, name).tolist() for name in ("indices", "group_ids", "arrived", "versions")}
        saved.update(rows=[len(group) for group in self.rows], skipped=self.skipped)
        return arrays, saved

    def load_state_dict(
        self, arrays: dict[str, np.ndarray], saved: dict[str, Any], prefix: str, rows: Iterator[Any]
    ) -> None:
        """Takes back what [`~WindowBatch.state_dict`] saved, each group's rows taken in order from `rows`."""
        self.prompt_keys = _ints(arrays[f"{prefix}prompt_keys"])
        self.rewards = np.asarray(arrays[f"{prefix}rewards"], dtype=np.float64)
        self.indices, self.group_ids = _ints(saved["indices"]), _ints(saved["group_ids"])
        self.arrived, self.versions = np.asarray(saved["arrived"], dtype=bool), _ints(saved["versions"])
        self.rows = [list(itertools.islice(rows, n)) for n in saved["rows"]]
        self.skipped = int(saved["skipped"])


class GroupWindow:
    """
    A queue (`get`, `qsize`) of the rows of the groups LZE selects, fed from the worker's queue `source`; it sends the
    worker its orders through `send(orders)`.

    Args:
        run ([`~lze_trl.method.run.LZERun`]):
            The run's LZE state and decisions (its `dataset_keys`: the train dataset's prompt keys; its reward
            functions and `correctness_index`: the columns of each group's rewards).
        window_groups (`int`):
            Groups per generation batch.
        num_generations (`int`):
            Rollouts per group.
        batches_in_flight (`int`, *optional*, defaults to `2`):
            Generation batches open at once (drawn and not yet recorded).
        log (`Callable[[dict], None]`, *optional*):
            Receives each generation batch's `lze/` metrics.
        global_step (`Callable[[], int]`, *optional*):
            The trainer's optimizer step, for the selection log.
        oldest_trained (`Callable[[], int]`, *optional*):
            The oldest policy version TRL still trains (`model_version - max_staleness`); selected rows older than it
            are counted in `lze/stale_rows` and warned about once.

    Attributes:
        exhausted (`str`):
            Why the window opens no more batches (forward pruning left an epoch without a prompt), empty until then:
            the trainer stops at the end of the step (the rows of the batches in flight serve it).
        decisions (`collections.deque`):
            `(group_id, model_version, prompt_key, weight)` of the last 100,000 groups decided, for inspection (not
            saved with the state).
    """

    def __init__(
        self,
        run: LZERun,
        window_groups: int,
        num_generations: int,
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
        self.batches_in_flight = batches_in_flight
        self.log = log or (lambda metrics: None)
        self.global_step = global_step or (lambda: 0)
        self.oldest_trained = oldest_trained or (lambda: -1)
        self.warned_stale = False
        self.source: Any = None  # the worker's queue of scored rows
        self.send: Callable[[list[Order]], None] | None = None  # sends the worker orders
        self.batches: deque[WindowBatch] = deque()  # open, oldest first
        self.ready: deque[Any] = deque()  # the selected groups' rows, to hand on in order
        self.partial: dict[int, list[Any]] = {}  # group id: its rows so far
        self.next_group = 0
        self.drawn_in_epoch = 0  # dataset rows of the epoch's plan drawn so far
        self.orders = EpochOrders(len(run.dataset_keys), run.args.seed)  # the synchronous sampler's epoch orders
        self.newest_version: dict[int, int] = {}  # per prompt, the newest policy version scored into its state
        self.resend = False  # after a resume: the orders of the groups not arrived are sent again
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
        """Takes one row of the worker's; a group whole with it is written into its batch, and the batches advance."""
        check_tags(sample)
        batch, g = self._group(sample.group_id)
        rows = self.partial.setdefault(sample.group_id, [])
        rows.append(sample)
        if len(rows) >= max(sample.group_rows, 1):
            del self.partial[sample.group_id]
            self._group_arrived(batch, g, rows)
        self.advance()

    def _group(self, group_id: int) -> tuple[WindowBatch, int]:
        for batch in self.batches:
            where = np.flatnonzero(batch.group_ids == group_id)
            if len(where):
                return batch, int(where[0])
        raise RuntimeError(
            f"The worker sent a row of group {group_id}, which is in no open generation batch: a worker must roll out "
            "only the orders it is sent, each once."
        )

    def _group_arrived(self, batch: WindowBatch, g: int, rows: list[Any]) -> None:
        if batch.arrived[g]:
            raise RuntimeError(
                f"The worker sent group {rows[0].group_id} again after it had arrived whole: a worker must roll out "
                "each order once."
            )
        batch.rewards[g] = group_rewards(rows, self.num_generations, self.run.unscorable_guard.reward_names)
        batch.arrived[g], batch.versions[g] = True, rows[0].model_version
        batch.rows[g] = [s for s in rows if s.group_rows > 0]  # none for a placeholder

    # ----------------------------------------------------------------------------------------------- the batches
    def advance(self) -> None:
        """Closes the oldest batches, in order, as far as their groups have arrived; then opens batches up to
        `batches_in_flight` (sending their orders)."""
        if self.resend:
            self._send([order for batch in self.batches for order in batch.orders()])
            self.resend = False
        while self.batches and self.batches[0].complete:
            self.close(self.batches.popleft())
        while len(self.batches) < self.batches_in_flight and not self.exhausted:
            self._open()

    def _open(self) -> None:
        run = self.run
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
        shape = (self.num_generations, len(run.unscorable_guard.reward_names))  # each group's rewards
        batch = WindowBatch.start(indices, group_ids, run.dataset_keys[indices], shape, skipped)
        self.batches.append(batch)
        self._send(batch.orders())

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
                        "(`prune_explore_fraction`, or `prune_target_dead_frac` with `prune_exploration='adaptive'`), "
                        "or turn pruning (`prune_solved`, `prune_unsolved`) off."
                    )
                    run.warn(self.exhausted)
                    return None
            take = position.plan[self.drawn_in_epoch : self.drawn_in_epoch + n - len(drawn)]
            drawn.extend(int(i) for i in take)
            skipping.extend(np.isin(run.dataset_keys[take], position.skipping).tolist())
            self.drawn_in_epoch += len(take)
        return np.asarray(drawn, dtype=np.int64), np.asarray(skipping, dtype=bool)

    def _send(self, orders: list[Order]) -> None:
        if orders:
            if self.send is None:
                raise RuntimeError("The window has no worker to send its orders to (`send` is not set).")
            self.send(orders)

    # ----------------------------------------------------------------------------------------------- closing
    def close(self, batch: WindowBatch) -> np.ndarray:
        """Scores a batch whose groups have all arrived into the per-prompt state in policy-version order, selects
        among its groups and records it ([`~lze_trl.method.run.LZERun.decide_batch`]), queues the selected rows
        (advantages over the whole group, scaled by the weight), closes it ([`~lze_trl.method.run.LZERun.close`]) and
        logs its metrics; returns each group's weight, in draw order."""
        run, keys, rewards, versions = self.run, batch.prompt_keys, batch.rewards, batch.versions
        run.unscorable_guard.check(rewards.reshape(-1, rewards.shape[-1]))
        totals = total_rewards(rewards)
        late = sum(self.newest_version.get(int(k), -1) > v for k, v in zip(keys, versions))
        for key, version in zip(keys, versions):
            self.newest_version[int(key)] = max(self.newest_version.get(int(key), -1), int(version))
        generated = {"lze/generated_rollouts": float(len(keys) * self.num_generations)}
        weights, metrics, shadow_kept = run.decide_batch(
            keys, rewards, totals, self.global_step(), generated, batch.skipped, versions
        )
        group_tokens = np.array([sum(int(np.sum(s.completion_mask)) for s in rows) for rows in batch.rows])
        if shadow_kept is not None:  # the loss tokens of the groups the selector would have kept
            metrics.update(Shadow.update_tokens(group_tokens, shadow_kept))
        grpo_update = sum(len(rows) for rows in batch.rows), int(group_tokens.sum())
        rows_out, tokens = 0, 0
        for g, weight in enumerate(weights):
            self.decisions.append((int(batch.group_ids[g]), int(versions[g]), int(keys[g]), float(weight)))
            if weight > 0:
                advantages = group_advantages(totals[g]) * float(weight)
                for s in batch.rows[g]:
                    self.ready.append(dataclasses.replace(s, advantage=float(advantages[s.rollout])))
                    rows_out, tokens = rows_out + 1, tokens + int(np.sum(s.completion_mask))
        if not (weights > 0).any():  # every group dead: zero-advantage rows, so that the trainer steps on (as the
            for rows in batch.rows:  # synchronous one on zero-weight rows) instead of waiting for ever
                self.ready.extend(dataclasses.replace(s, advantage=0.0) for s in rows)
        stale = sum(s.model_version < self.oldest_trained() for s in itertools.islice(reversed(self.ready), rows_out))
        if stale and not self.warned_stale:
            self.warned_stale = True
            run.warn(
                f"{stale} of the {rows_out} rows LZE selected in a generation batch were already too stale to train "
                "when it closed (older than max_staleness policy versions): the trainer drops them. The batch's first "
                "groups waited too long for its last ones and for the batches before it: lower batches_in_flight or "
                "window_groups, or raise max_staleness."
            )
        metrics["lze/stale_rows"] = float(stale)
        metrics["lze/late_groups"] = float(late)
        metrics["lze/window_versions"] = float(len(np.unique(versions)))
        run.close(metrics, (rows_out, tokens), grpo_update)
        self.log(metrics)
        return weights

    # ----------------------------------------------------------------------------------------------- state
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The open batches and the rows the window holds, as arrays (prefixed `window.`) and JSON counters. A group
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
            batches.append(saved)
        counters = {"window_rows": text, "window_ready": len(self.ready), "window_batches": json.dumps(batches)}
        counters.update(window_next_group=self.next_group, window_drawn_in_epoch=self.drawn_in_epoch)
        return arrays, counters

    def load_state_dict(self, arrays: dict[str, np.ndarray], counters: dict[str, Any], make_sample: Callable) -> None:
        """Restores a window saved by [`~GroupWindow.state_dict`]; `make_sample(**fields)` builds a row. The orders of
        the groups that had not arrived are sent again at the next [`~GroupWindow.advance`]."""
        rows = rows_from_state(arrays, counters["window_rows"], make_sample, "window.")
        ready = int(counters["window_ready"])
        self.ready, rest = deque(rows[:ready]), iter(rows[ready:])
        self.batches = deque()
        for i, saved in enumerate(json.loads(counters["window_batches"])):
            batch = WindowBatch()
            batch.load_state_dict(arrays, saved, f"window.batch{i}.", rest)
            self.batches.append(batch)
        self.partial = {}
        self.next_group = int(counters["window_next_group"])
        self.drawn_in_epoch = int(counters["window_drawn_in_epoch"])
        keys, versions = arrays["window.newest_keys"], arrays["window.newest_versions"]
        self.newest_version = {int(k): int(v) for k, v in zip(keys, versions)}
        self.resend = True
