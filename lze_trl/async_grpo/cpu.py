"""TRL's `AsyncGRPOTrainer` on a CPU without vLLM: a stand-in rollout worker, an in-process weight transfer, and the
two shims its constructor and forward need there.

- The trainer's constructor asks `torch.cuda` for the device's name (to look up its peak FLOPs for the MFU metrics),
  which fails on a CPU-only torch: [`cpu_construction`] answers `None` during construction, which is what TRL itself
  answers for a device it does not know (MFU metrics off, every other metric logged).
- The trainer's model attends through TRL's tree attention (`"tree_fa3"`: a prefix trie of each row's samples, run
  by the FlashAttention-3 kernel, which the `kernels` package fetches for a GPU). [`cpu_tree_attention`] computes the
  same attention in plain torch (each segment's queries against the keys of its root-to-segment path, causal), and
  [`use_cpu_tree_attention`] registers it under TRL's name. Tested against a plain forward of each sample.
- [`StandInRolloutWorker`] implements TRL's `RolloutWorkerProtocol` in-process, with LZE's orders: scripted
  completions (no vLLM), rewarded by the run's reward functions, old log-probabilities from its own copy of the
  policy, every row tagged for LZE ([`~lze_trl.async_grpo.samples.tag_round`]). It rolls out the next order when the
  trainer asks for a row and none is queued, with the policy version it was last told.
- [`InProcessWeightTransfer`] implements `WeightTransferProtocol` by copying the trainer's weights into the stand-in's
  policy: after each sync the stand-in's log-probabilities are the trainer's.

A real `vllm serve` on a CPU gets its weights through `lze_trl/async_grpo/reload.py`.
"""

from __future__ import annotations

import contextlib
import queue
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from transformers import AttentionInterface

from ..method.selection import total_rewards
from .samples import Order, group_advantages, tag_round
from .upstream import TREE_ATTENTION, RolloutSample, async_grpo_trainer


# ----------------------------------------------------------------------------------------------- shims
@contextlib.contextmanager
def cpu_construction() -> Iterator[None]:
    """While it lasts, TRL's async trainer finds no peak FLOPs for its device (as for a GPU it does not know) instead
    of asking `torch.cuda` for a device name. Why a bend of TRL: TRL 1.16's constructor asks CUDA unconditionally,
    which fails on a machine without a GPU."""
    original = async_grpo_trainer.get_peak_flops_per_device
    async_grpo_trainer.get_peak_flops_per_device = lambda accelerator, dtype: None
    try:
        yield
    finally:
        async_grpo_trainer.get_peak_flops_per_device = original


def cpu_tree_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    *,
    tree_kv_index: torch.Tensor,
    tree_cu_seqlens_q: torch.Tensor,
    tree_cu_seqlens_k: torch.Tensor,
    tree_max_seqlen_q: int,
    tree_max_seqlen_k: int,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """TRL's tree attention (`trl.experimental.async_grpo.packing.tree_attention`) in plain torch: segment `s`'s
    queries attend, causally aligned at the end, to the keys `tree_kv_index[cu_k[s]:cu_k[s+1]]` (its root-to-segment
    path). `query`, `key`, `value`: `(1, heads, tokens, dim)`; returns `(1, tokens, heads, dim)`."""
    if softcap:
        raise NotImplementedError("cpu_tree_attention does not implement attention logit soft-capping.")
    q = query[0].transpose(0, 1)
    k, v = (x[0].transpose(0, 1).index_select(0, tree_kv_index) for x in (key, value))
    k, v = (x.repeat_interleave(q.shape[1] // x.shape[1], dim=1) for x in (k, v))  # grouped-query attention
    scale = scaling if scaling is not None else q.shape[-1] ** -0.5
    out = torch.empty_like(q)
    cq, ck = tree_cu_seqlens_q.tolist(), tree_cu_seqlens_k.tolist()
    for s in range(len(cq) - 1):
        qs, ks, vs = q[cq[s] : cq[s + 1]], k[ck[s] : ck[s + 1]], v[ck[s] : ck[s + 1]]
        i = torch.arange(len(qs))[:, None] + (len(ks) - len(qs))  # each query's position on its path
        j = torch.arange(len(ks))[None, :]
        allowed = (j <= i) & ((i - j < sliding_window) if sliding_window else True)
        scores = torch.einsum("qhd,khd->hqk", qs, ks).float() * scale
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1).to(vs.dtype)
        out[cq[s] : cq[s + 1]] = torch.einsum("hqk,khd->qhd", weights, vs)
    return out.unsqueeze(0), None


def use_cpu_tree_attention() -> None:
    """Registers [`cpu_tree_attention`] under TRL's tree-attention name (process-wide, as TRL registers its own)."""
    AttentionInterface.register(TREE_ATTENTION, cpu_tree_attention)


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
            `completion_ids`, and every other column of the row), once per round.
        complete (`Callable`, *optional*):
            `complete(row, rng) -> str`, one rollout's completion ([`scripted_completion`] by default).
        temperature (`float`, *optional*, defaults to `1.0`):
            The trainer's sampling temperature (its log-probabilities are of `logits / temperature`).
        seed (`int`, *optional*, defaults to `0`):
            Seed of the completions: group `g`'s rollout `j` draws from `(seed, g, j)`, whatever its round.

    Attributes:
        produced (`list[tuple[int, int, int, int, int]]`):
            `(group_id, model_version, prompt_key, first, last)` of every round rolled out.
    """

    def __init__(
        self,
        policy: torch.nn.Module,
        tokenizer: Any,
        dataset: Any,
        reward_funcs: list[Callable],
        complete: Callable[[dict[str, Any], np.random.Generator], str] = scripted_completion,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.policy, self.tokenizer, self.dataset = policy.eval(), tokenizer, dataset
        self.reward_funcs, self.complete = list(reward_funcs), complete
        self.temperature, self.seed = temperature, seed
        self.orders: deque[Order] = deque()
        self.rollout_buffer = _OnDemandQueue(self.produce)
        self.metrics_queue: queue.Queue = queue.Queue()
        self.model_version = 0
        self.started = False
        self.produced: list[tuple[int, int, int, int, int]] = []

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
        """Rolls out, rewards and queues the next order's round (its rows tagged for LZE); nothing without one."""
        if not self.orders:
            return
        order = self.orders.popleft()
        row, rollouts = self.dataset[order.index], range(order.first, order.last)
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
        advantages = group_advantages(totals)  # the round's, as TRL's `_score_group` gives them
        samples = [
            self._sample(row, prompt_ids, ids, completion, float(a), float(t), order.group_id)
            for ids, completion, a, t in zip(completion_ids, completions, advantages, totals)
        ]
        self.produced.append((order.group_id, self.model_version, order.prompt_key, order.first, order.last))
        for sample in tag_round(samples, order, table, list(rollouts)):
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
