"""LZE's rollout worker for TRL's async trainer: TRL's `AsyncRolloutWorker` (a spawned child process that sends each
rollout to a `vllm serve` instance as its own `/v1/completions` request and rewards whole groups), rolling out the
trainer's orders instead of cycling through the dataset.

[`LZERolloutWorker`] is TRL's worker with one more queue (`orders`, parent to child) and its own loop class,
[`LZERolloutLoop`], a subclass of TRL's `_AsyncRolloutLoop`:

- `_generate_loop` rolls out [`~lze_trl.async_grpo.samples.Order`]s as they come: each order is one group, its
  `num_generations` rollouts a `RolloutGroup`, queued for scoring when its last rollout completes, as TRL's loop
  does. TRL's loop cannot be reused: it draws its work synchronously from an endless iterator (`_repeat_iterator`, the
  dataset in order), while LZE's work is the prompts the trainer draws, which arrive when the trainer sends them. The
  loop is TRL's otherwise (slots, heartbeat, backpressure from the scoring queue, its metrics);
  `tests/async/test_async_lze.py::test_what_lze_relies_on_in_trls_async_trainer` pins the source it follows.
- `_score_group` is TRL's, whose rows it tags for LZE ([`~lze_trl.async_grpo.samples.tag_group`]) with the rewards of
  every rollout, read from the reward functions as TRL called them (each one's last result; the score loop scores one
  group at a time).

Environments are not supported (refused by the trainer); tools are.
"""

from __future__ import annotations

import asyncio
import multiprocessing.context
import queue
import time
from collections import deque
from typing import Any

import numpy as np

from ..method.guards import is_async_callable
from .samples import Order, tag_group
from .upstream import AsyncRolloutWorker, RolloutGroup, _AsyncRolloutLoop


class _Recorded:
    """A reward function that keeps its last result (`last`) and TRL's name for it."""

    def __init__(self, func: Any) -> None:
        self.func, self.last = func, None
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, **kwargs: Any) -> Any:
        self.last = self.func(**kwargs)
        return self.last


class _RecordedAsync(_Recorded):
    async def __call__(self, **kwargs: Any) -> Any:
        self.last = await self.func(**kwargs)
        return self.last


class LZERolloutLoop(_AsyncRolloutLoop):
    """TRL's rollout loop (in the worker's child process) rolling out the trainer's orders; rows tagged for LZE."""

    def __init__(self, *, orders: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.orders = orders  # multiprocessing queue of lists of Orders, from the trainer
        self.reward_funcs = [(_RecordedAsync if is_async_callable(f) else _Recorded)(f) for f in self.reward_funcs]
        self._groups: dict[int, Order] = {}  # group_id -> its order, being rolled out or scored

    def _take_orders(self, work: deque) -> None:
        """Moves the orders the trainer sent into `work`, one entry per rollout, without waiting."""
        while True:
            try:
                orders = self.orders.get_nowait()
            except queue.Empty:
                return
            for order in orders:
                if order.group_id in self._groups:
                    raise RuntimeError(f"Group {order.group_id} was ordered again before it came back.")
                self._groups[order.group_id] = order
                row = self.dataset[order.index]
                work.extend((order, row) for _ in range(self.num_generations))

    async def _generate_loop(self, stop_event: asyncio.Event) -> None:
        pending: dict[int, RolloutGroup] = {}
        remaining: dict[int, int] = {}
        inflight: dict[asyncio.Task, tuple[int, int, Any]] = {}
        work: deque[tuple[Order, dict]] = deque()
        free_slots = set(range(self.max_inflight_tasks))
        tool_dict = {tool.__name__: tool for tool in self._standalone_tools}
        self._generation_start_time = time.monotonic()
        try:
            while True:
                self._heartbeat_value.value = time.time()
                self._take_orders(work)
                while free_slots and work and not stop_event.is_set():
                    order, row = work.popleft()
                    if order.group_id not in pending:
                        size = self.num_generations
                        kwargs = {k: [v] * size for k, v in row.items() if k not in ("prompt", "completion_ids")}
                        kwargs.pop("completion", None)
                        pending[order.group_id] = RolloutGroup(
                            prompts=[], reward_kwargs=kwargs, completions=[], completions_ids=[],
                            completions_sequences=[], tool_call_counts=[], tool_failure_counts=[],
                            model_version=self.model_version, group_id=order.group_id, env_rewards=[],
                            rollout_rewards=[],
                        )  # fmt: skip
                        remaining[order.group_id] = size
                    task = asyncio.create_task(
                        self._generate_one(
                            row["prompt"], tool_dict=tool_dict, tools=self.tools, group_id=order.group_id
                        )
                    )
                    inflight[task] = (order.group_id, free_slots.pop(), row["prompt"])
                self._inflight = len(inflight)
                if not inflight:
                    if stop_event.is_set():
                        return
                    await asyncio.sleep(0.01)
                    continue
                done, _ = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED, timeout=0.1)
                for task in done:
                    group_id, slot, prompt = inflight.pop(task)
                    free_slots.add(slot)
                    if task.exception() is not None:
                        raise task.exception()
                    completion, completion_ids, sequences, calls, failures, rollout_reward = task.result()
                    group = pending[group_id]
                    group.prompts.append(prompt)
                    group.completions.append(completion)
                    group.completions_ids.append(completion_ids)
                    group.completions_sequences.append(sequences)
                    group.tool_call_counts.append(calls)
                    group.tool_failure_counts.append(failures)
                    group.rollout_rewards.append(rollout_reward)
                    self._total_completion_tokens += len(completion_ids)
                    remaining[group_id] -= 1
                    if remaining[group_id] == 0:
                        del pending[group_id], remaining[group_id]
                        if not await self._queue_for_scoring(group, stop_event):
                            return
        finally:
            for task in inflight:
                task.cancel()
            if inflight:
                await asyncio.gather(*inflight, return_exceptions=True)
            try:
                self._groups_to_score.put_nowait(None)
            except asyncio.QueueFull:
                pass

    async def _queue_for_scoring(self, group: RolloutGroup, stop_event: asyncio.Event) -> bool:
        """Queues a complete group for the score loop, waiting while it is full (TRL's backpressure); `False` when
        the worker is stopped meanwhile."""
        group.queued_at = time.monotonic()
        t_blocked = None
        while True:
            try:
                self._groups_to_score.put_nowait(group)
                break
            except asyncio.QueueFull:
                if stop_event.is_set():
                    return False
                t_blocked = t_blocked or time.monotonic()
                await asyncio.sleep(0.1)
        if t_blocked is not None:
            self._push_metrics({"rollout/score_block_s": time.monotonic() - t_blocked})
        return True

    async def _score_group(self, group: RolloutGroup) -> list:
        samples = await super()._score_group(group)
        order = self._groups.pop(group.group_id)
        columns = [[np.nan if r is None else float(r) for r in f.last] for f in self.reward_funcs]
        rewards = np.array(columns, dtype=np.float64).reshape(len(columns), -1).T  # (rollouts, reward functions)
        rollouts = [i for i, rows in enumerate(group.completions_sequences) for _ in rows]
        tagged = tag_group(samples, order, rewards, rollouts)
        if not samples:
            tagged[0].model_version = group.model_version
        return tagged


class _LoopKwargs(dict):
    """The loop's arguments, the orders queue among them. TRL's worker checks that they pickle before it spawns its
    child, with plain pickle, which a multiprocessing queue refuses outside a spawn: they pickle without the queue
    then, and whole when the child is spawned."""

    def __reduce__(self) -> tuple:
        spawning = multiprocessing.context.get_spawning_popen() is not None
        return dict, (dict(self) if spawning else {k: v for k, v in self.items() if k != "orders"},)


class LZERolloutWorker(AsyncRolloutWorker):
    """
    TRL's `AsyncRolloutWorker` for [`~lze_trl.async_grpo.trainer.LZEAsyncGRPOTrainer`]: its child rolls out the orders
    sent with [`~LZERolloutWorker.send_orders`] ([`LZERolloutLoop`]), `num_generations` rollouts each, and pushes rows
    tagged for LZE. Takes TRL's worker's arguments.
    """

    _loop_cls = LZERolloutLoop

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.orders = self._mp_ctx.Queue()
        self._loop_kwargs = _LoopKwargs(self._loop_kwargs, orders=self.orders)

    def send_orders(self, orders: list[Order]) -> None:
        """Sends the child orders to roll out (in order, each once)."""
        self.orders.put(list(orders))


__all__ = ["LZERolloutLoop", "LZERolloutWorker"]
