"""LZE between TRL's async rollout worker and its trainer: the window of scored groups. Plain numpy, no TRL import.

TRL's `AsyncGRPOTrainer` reads scored rollout samples, one training row each, from its worker's queue
(`rollout_buffer`) through `RolloutQueueDataset`. [`GroupWindow`] stands between the two as a queue of its own: it
takes the worker's rows, assembles each group's rows (a worker pushes a group's rows together), holds `window_groups`
complete groups (LZE's generation batch), scores them into the per-prompt state in policy-version order, lets the run's
selector choose among them once, records the window, and hands the selected groups' rows on, the same objects in the
order they came. The unselected groups never reach the trainer: dropped before its queue, not masked in its loss.

The method is [`~lze_trl.run.LZERun`]'s, as in the synchronous trainer: [`~lze_trl.run.LZERun.score`] once per policy
version present in the window (oldest first, so a prompt's pass-rate EMA absorbs its groups in the order of the
policies that produced them, not the order they arrived in), [`~lze_trl.run.LZERun.select`] once over the window,
[`~lze_trl.run.LZERun.record`] once. A window of one version is scored exactly as a synchronous generation batch is.

Each row must carry LZE's tags ([`TAGS`], see `lze_trl/async_samples.py`): its prompt key, the number of rows of its
group, and every rollout's rewards of its group (one value per reward function, NaN where `None`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from .selectors import GroupBatch


TAGS = ("prompt_key", "group_rows", "group_rewards")
"""The attributes a rollout sample must carry for LZE, besides TRL's `RolloutSample` fields."""
ARRAY_FIELDS = ("input_ids", "completion_mask", "old_log_probs")
SCALAR_FIELDS = ("advantage", "model_version", "group_id", "prompt_key", "group_rows")
JSON_FIELDS = ("prompt", "completion", "metrics", "group_rewards")


class GroupWindow:
    """
    A queue (`get`, `qsize`) of the rows of the groups LZE selects, fed from the worker's queue `source`.

    Args:
        run ([`~lze_trl.run.LZERun`]):
            The run's LZE state and decisions.
        window_groups (`int`):
            Complete groups held before one selection: LZE's generation batch.
        num_generations (`int`):
            Rollouts per group (every group's `group_rewards` has this many rows).
        correctness_index (`int`):
            Column of `group_rewards` that defines correctness (`correctness_reward`).
        log (`Callable[[dict], None]`, *optional*):
            Receives each window's `lze/` metrics.
        global_step (`Callable[[], int]`, *optional*):
            The trainer's optimizer step, for the selection log.

    Attributes:
        decisions (`collections.deque`):
            `(group_id, model_version, prompt_key, weight)` of the last 100,000 groups decided, for inspection (not
            saved with the state).
    """

    def __init__(
        self,
        run: Any,
        window_groups: int,
        num_generations: int,
        correctness_index: int = 0,
        log: Callable[[dict[str, float]], None] | None = None,
        global_step: Callable[[], int] | None = None,
    ) -> None:
        if window_groups < 1:
            raise ValueError(f"window_groups={window_groups!r} is invalid: use an integer >= 1.")
        self.run, self.window_groups, self.num_generations = run, window_groups, num_generations
        self.correctness_index = correctness_index
        self.log = log or (lambda metrics: None)
        self.global_step = global_step or (lambda: 0)
        self.source: Any = None  # the worker's queue of scored samples
        self.pending: list[Any] = []  # the rows of the group being assembled
        self.held: list[list[Any]] = []  # complete groups waiting for the window to fill
        self.ready: deque[Any] = deque()  # the selected groups' rows, to hand on in order
        self.newest_version: dict[int, int] = {}  # per prompt, the newest policy version scored into its state
        self.decisions: deque[tuple[int, int, int, float]] = deque(maxlen=100_000)

    # ----------------------------------------------------------------------------------------------- the queue
    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """The next selected row; takes rows from `source` until one is ready. Raises `queue.Empty` when `source`
        does (after `timeout` seconds in all), keeping what it assembled so far."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ready:
            if not block:
                self.put(self.source.get_nowait())
            elif deadline is None:
                self.put(self.source.get())
            else:
                self.put(self.source.get(timeout=max(deadline - time.monotonic(), 0.0)))
        return self.ready.popleft()

    def qsize(self) -> int:
        """Rows waiting: the worker's queue and the selected rows not handed on yet."""
        return self.source.qsize() + len(self.ready)

    def put(self, sample: Any) -> None:
        """Takes one row of the worker's; closes the window when it completes its `window_groups`-th group."""
        missing = [tag for tag in TAGS if getattr(sample, tag, None) is None]
        if missing:
            raise TypeError(
                f"A rollout sample of type {type(sample).__name__} lacks LZE's tags {missing}: LZE needs each row's "
                "prompt key and its group's rewards. Use a rollout worker that pushes LZERolloutSample rows "
                "(lze_trl.async_samples.tag_group), e.g. lze_trl.async_cpu.StandInRolloutWorker; TRL's "
                "AsyncRolloutWorker does not tag them yet."
            )
        if self.pending and sample.group_id != self.pending[0].group_id:
            raise RuntimeError(
                f"The rows of group {self.pending[0].group_id} ({len(self.pending)} of {self.pending[0].group_rows}) "
                f"were interleaved with group {sample.group_id}: a worker must push a group's rows together, as TRL's "
                "score loop does."
            )
        self.pending.append(sample)
        if len(self.pending) >= sample.group_rows:
            self.held.append(self.pending)
            self.pending = []
            if len(self.held) >= self.window_groups:
                self.close()

    # ----------------------------------------------------------------------------------------------- one window
    def close(self) -> np.ndarray:
        """Scores the held groups in version order, selects among them, records the window, queues the selected rows
        (in arrival order; a weight other than 1 scales their advantages); returns each group's weight, in arrival
        order."""
        groups, self.held = self.held, []
        run = self.run
        versions = np.array([g[0].model_version for g in groups], dtype=np.int64)
        keys = np.array([g[0].prompt_key for g in groups], dtype=np.int64)
        rewards = np.stack([self._rewards(g) for g in groups])  # (groups, G, reward functions)
        totals = np.nansum(rewards, axis=-1)  # summed with weight 1, as TRL's worker sums them
        totals[np.isnan(rewards).all(axis=-1)] = np.nan
        correctness = rewards[:, :, self.correctness_index]
        run.unscorable_guard.observe(rewards.reshape(-1, rewards.shape[-1]))
        order = np.argsort(versions, kind="stable")  # oldest policy first; arrival order within a version
        late = sum(self.newest_version.get(int(k), -1) > v for k, v in zip(keys, versions))
        parts = []
        for version, members in itertools.groupby(order, key=lambda i: versions[i]):
            members = np.fromiter(members, dtype=np.int64)
            parts.append(run.score(keys[members], correctness[members], totals[members]))
            for key in keys[members]:
                self.newest_version[int(key)] = max(self.newest_version.get(int(key), -1), int(version))
        batch = concatenate(parts)
        weights_in_order = run.select(batch)
        metrics = run.record(batch, weights_in_order, self.global_step())
        weights = np.empty(len(groups))
        weights[order] = weights_in_order
        for group, weight in zip(groups, weights):
            self.decisions.append((group[0].group_id, group[0].model_version, group[0].prompt_key, float(weight)))
            if weight == 1:
                self.ready.extend(group)
            elif weight > 0:
                self.ready.extend(dataclasses.replace(s, advantage=s.advantage * float(weight)) for s in group)
        metrics["lze/late_groups"] = float(late)
        metrics["lze/window_versions"] = float(len(np.unique(versions)))
        metrics["lze/update_rows"] = sum(len(g) for g, w in zip(groups, weights) if w > 0)
        self.log(metrics)
        return weights

    def _rewards(self, group: list[Any]) -> np.ndarray:
        rewards = np.array(group[0].group_rewards, dtype=np.float64)
        if rewards.ndim != 2 or rewards.shape[0] != self.num_generations:
            raise ValueError(
                f"Group {group[0].group_id} carries rewards of shape {rewards.shape}: LZE needs one row per rollout "
                f"(num_generations={self.num_generations}) and one column per reward function."
            )
        names = self.run.unscorable_guard.reward_names
        if rewards.shape[1] != len(names):
            raise ValueError(
                f"Group {group[0].group_id} carries {rewards.shape[1]} rewards per rollout, but the run has the "
                f"reward functions {names}: the worker must reward with the trainer's reward functions, in order."
            )
        if not 0 <= self.correctness_index < rewards.shape[1]:
            raise ValueError(
                f"correctness_reward index {self.correctness_index} is out of range for group {group[0].group_id}, "
                f"whose rollouts carry {rewards.shape[1]} rewards each."
            )
        return rewards

    # ----------------------------------------------------------------------------------------------- state
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The window as arrays (prefixed `window.`) and JSON counters: every row held (the group being assembled,
        the groups waiting, the selected rows not handed on) and each prompt's newest version scored. Rows whose
        prompt, completion or metrics JSON cannot write raise a `TypeError`."""
        rows = [*self.pending, *(s for g in self.held for s in g), *self.ready]
        arrays = {f"window.{name}": _concat([getattr(s, name) for s in rows]) for name in ARRAY_FIELDS}
        arrays["window.lengths"] = np.array([len(s.input_ids) for s in rows], dtype=np.int64)
        for name in SCALAR_FIELDS:
            dtype = np.float64 if name == "advantage" else np.int64
            arrays[f"window.{name}"] = np.array([getattr(s, name) for s in rows], dtype=dtype)
        enqueued = [math.nan if s.enqueued_at is None else s.enqueued_at for s in rows]
        arrays["window.enqueued_at"] = np.array(enqueued, dtype=np.float64)
        arrays["window.newest_keys"] = np.array(list(self.newest_version), dtype=np.int64)
        arrays["window.newest_versions"] = np.array(list(self.newest_version.values()), dtype=np.int64)
        counts = [len(self.pending), *(len(g) for g in self.held), len(self.ready)]
        text = json.dumps([[_plain(getattr(s, name)) for name in JSON_FIELDS] for s in rows])
        return arrays, {"window_rows": text, "window_counts": counts}

    def load_state_dict(self, arrays: dict[str, np.ndarray], counters: dict[str, Any], make_sample: Callable) -> None:
        """Restores a window saved by [`~GroupWindow.state_dict`]; `make_sample(**fields)` builds a row."""
        texts = json.loads(counters["window_rows"])
        ends = np.cumsum(arrays["window.lengths"])
        starts = ends - arrays["window.lengths"]
        rows = []
        for i, text in enumerate(texts):
            fields = {name: arrays[f"window.{name}"][starts[i] : ends[i]] for name in ARRAY_FIELDS}
            for name in SCALAR_FIELDS:
                value = arrays[f"window.{name}"][i]
                fields[name] = float(value) if name == "advantage" else int(value)
            enqueued = float(arrays["window.enqueued_at"][i])
            fields["enqueued_at"] = None if math.isnan(enqueued) else enqueued
            fields.update(zip(JSON_FIELDS, text))
            fields["group_rewards"] = tuple(tuple(r) for r in fields["group_rewards"])
            rows.append(make_sample(**fields))
        bounds = np.cumsum([0, *counters["window_counts"]])
        parts = [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        self.pending, self.held, self.ready = parts[0], parts[1:-1], deque(parts[-1])
        keys, versions = arrays["window.newest_keys"], arrays["window.newest_versions"]
        self.newest_version = {int(k): int(v) for k, v in zip(keys, versions)}


def concatenate(parts: list[GroupBatch]) -> GroupBatch:
    """One [`GroupBatch`] of several scored in turn (the first one's noise source, seeded by the batch index)."""
    if len(parts) == 1:
        return parts[0]
    names = ("prompt_keys", "pass_rates", "rewards", "energies", "eligible", "ema_pass_rates")
    joined = {name: np.concatenate([getattr(p, name) for p in parts]) for name in names}
    return GroupBatch(**joined, rng=parts[0].rng)


def _concat(values: list[Any]) -> np.ndarray:
    arrays = [np.asarray(v).reshape(-1) for v in values]
    return np.concatenate(arrays) if arrays else np.empty(0)


def _plain(value: Any) -> Any:
    """A JSON-writable copy of a row's prompt, completion, metrics or rewards (tuples as lists, NaN kept)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value
