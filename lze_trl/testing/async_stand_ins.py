"""Test helpers of the async trainer, outside what training imports: [`StandInRolloutWorker`], an in-process rollout
worker with LZE's orders and scripted completions (no vLLM), and [`InProcessWeightTransfer`], which keeps its copy of
the policy the trainer's. With them `LZEAsyncGRPOTrainer` runs on a CPU in one process (tests, the async benchmarks).

- [`StandInRolloutWorker`] implements TRL's `RolloutWorkerProtocol` in-process, with LZE's orders: scripted
  completions (no vLLM), rewarded by the run's reward functions, old log-probabilities from its own copy of the
  policy, every row tagged for LZE ([`~lze_trl.async_grpo.samples.tag_group`]). It rolls out the next order when the
  trainer asks for a row and none is queued, with the policy version it was last told.
- [`InProcessWeightTransfer`] implements `WeightTransferProtocol` by copying the trainer's weights into the stand-in's
  policy: after each sync the stand-in's log-probabilities are the trainer's.
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from ..async_grpo.samples import Order, group_advantages, tag_group
from ..async_grpo.upstream import RolloutSample
from ..method.selection import total_rewards


# ----------------------------------------------------------------------------------------------- the stand-in worker
def scripted_completion(row: dict[str, Any], rng: np.random.Generator) -> str:
    """`"1"` with the row's `pass_rate` (a column of the dataset), else `"0"`."""
    return "1" if rng.random() < float(row["pass_rate"]) else "0"


class _OnDemandQueue(queue.Queue):
    """A `queue.Queue` whose worker generates a group when a row is asked for and none is queued."""

    def __init__(self, produce: Callable[[], None]) -> None:
        super().__init__()
        self.produce = produce

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if self.empty():
            self.produce()
        return super().get(block, timeout)


class StandInRolloutWorker:
    """
    An in-process rollout worker (TRL's `RolloutWorkerProtocol`, plus LZE's `send_orders`) for tests and CPU runs
    without vLLM.

    Args:
        policy (`torch.nn.Module`):
            Its own copy of the policy (a causal LM with the trainer's tokenizer), kept in sync by
            [`InProcessWeightTransfer`]; it computes each rollout's old log-probabilities, nothing else.
        tokenizer:
            The trainer's tokenizer.
        dataset (`datasets.Dataset`):
            The train dataset (a `prompt` string column); the orders name its rows.
        reward_funcs (`list[Callable]`):
            The run's reward functions, called as TRL's worker calls them (`prompts`, `completions`,
            `completion_ids`, and every other column of the row), once per group.
        num_generations (`int`, *optional*):
            Rollouts per group: the trainer's `num_generations`, which
            [`~lze_trl.async_grpo.trainer.LZEAsyncGRPOTrainer`] sets when it is left `None`.
        complete (`Callable`, *optional*):
            `complete(row, rng) -> str`, one rollout's completion ([`scripted_completion`] by default).
        temperature (`float`, *optional*, defaults to `1.0`):
            The trainer's sampling temperature (its log-probabilities are of `logits / temperature`).
        seed (`int`, *optional*, defaults to `0`):
            Seed of the completions: group `g`'s rollout `j` draws from `(seed, g, j)`.

    Attributes:
        produced (`list[tuple[int, int, int]]`):
            `(group_id, model_version, prompt_key)` of every group rolled out.
    """

    def __init__(
        self,
        policy: torch.nn.Module,
        tokenizer: Any,
        dataset: Any,
        reward_funcs: list[Callable],
        num_generations: int | None = None,
        complete: Callable[[dict[str, Any], np.random.Generator], str] = scripted_completion,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.policy, self.tokenizer, self.dataset = policy.eval(), tokenizer, dataset
        self.reward_funcs, self.complete = list(reward_funcs), complete
        self.num_generations = num_generations
        self.temperature, self.seed = temperature, seed
        self.orders: deque[Order] = deque()
        self.rollout_buffer = _OnDemandQueue(self.produce)
        self.metrics_queue: queue.Queue = queue.Queue()
        self.model_version = 0
        self.started = False
        self.produced: list[tuple[int, int, int]] = []

    # RolloutWorkerProtocol
    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.started = False

    def update_model_version(self, model_version: int) -> None:
        self.model_version = int(model_version)

    def check_health(self, stale_after_s: float) -> None:
        if not self.started:
            raise RuntimeError("The stand-in rollout worker was asked for rows before start() or after stop().")

    def send_orders(self, orders: list[Order]) -> None:
        """Queues orders, rolled out one by one when the trainer asks for a row and none is queued."""
        self.orders.extend(orders)

    # generation
    def produce(self) -> None:
        """Rolls out, rewards and queues the next order's group (its rows tagged for LZE); nothing without one."""
        if not self.orders:
            return
        if self.num_generations is None:
            raise RuntimeError("The stand-in rollout worker has no num_generations: pass the trainer's.")
        order = self.orders.popleft()
        row, rollouts = self.dataset[order.index], range(self.num_generations)
        n = len(rollouts)
        completions = [self.complete(row, np.random.default_rng([self.seed, order.group_id, j])) for j in rollouts]
        prompt_ids = self.tokenizer(row["prompt"])["input_ids"]
        completion_ids = [self.tokenizer(c)["input_ids"] + [self.tokenizer.eos_token_id] for c in completions]
        columns = {k: [v] * n for k, v in row.items() if k not in ("prompt", "completion", "completion_ids")}
        table = np.empty((n, len(self.reward_funcs)))  # (rollouts, reward functions)
        prompts = [row["prompt"]] * n
        for c, func in enumerate(self.reward_funcs):
            values = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)
            table[:, c] = [np.nan if r is None else float(r) for r in values]
        totals = total_rewards(table)
        advantages = group_advantages(totals)  # the group's, as TRL's `_score_group` gives them
        samples = [
            self._sample(row, prompt_ids, ids, completion, float(a), float(t), order.group_id)
            for ids, completion, a, t in zip(completion_ids, completions, advantages, totals)
        ]
        self.produced.append((order.group_id, self.model_version, order.prompt_key))
        for sample in tag_group(samples, order, table, list(rollouts)):
            self.rollout_buffer.put(sample)

    def _sample(self, row, prompt_ids, completion_ids, completion, advantage, reward, group_id) -> RolloutSample:
        ids = torch.tensor([prompt_ids + completion_ids])
        with torch.no_grad():
            logits = self.policy(input_ids=ids).logits[0, :-1].float() / self.temperature
        token_logps = logits.log_softmax(-1).gather(-1, ids[0, 1:, None])[:, 0]
        mask = np.r_[np.zeros(len(prompt_ids), dtype=np.int64), np.ones(len(completion_ids), dtype=np.int64)]
        logps = np.r_[0.0, token_logps.numpy()].astype(np.float32) * mask
        return RolloutSample(
            prompt=row["prompt"],
            completion=completion,
            input_ids=ids[0].numpy().astype(np.int64),
            completion_mask=mask,
            old_log_probs=logps.astype(np.float32),
            advantage=advantage,
            model_version=self.model_version,
            group_id=group_id,
            metrics={"reward": reward},
        )


class InProcessWeightTransfer:
    """TRL's `WeightTransferProtocol` for [`StandInRolloutWorker`]: each sync copies the trainer's parameters (by
    name) into the stand-in's policy. `syncs` counts the syncs."""

    def __init__(self, policy: torch.nn.Module) -> None:
        self.parameters = dict(policy.named_parameters())
        self.syncs = 0

    def init_weight_transfer(self) -> None:
        pass

    def pause(self) -> None:
        pass

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        with torch.no_grad():
            for name, tensor in iterator:
                self.parameters[name].copy_(tensor)
        self.syncs += 1

    def resume(self) -> None:
        pass

    def destroy(self) -> None:
        pass
