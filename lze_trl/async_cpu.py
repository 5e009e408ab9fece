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
  policy, every row tagged for LZE ([`~lze_trl.async_samples.tag_round`]). It rolls out the next order when the
  trainer asks for a row and none is queued, with the policy version it was last told.
- [`InProcessWeightTransfer`] implements `WeightTransferProtocol` by copying the trainer's weights into the stand-in's
  policy: after each sync the stand-in's log-probabilities are the trainer's.
- [`ReloadWeightTransfer`] implements `WeightTransferProtocol` for a real `vllm serve` where TRL's NCCL transfer cannot
  run (a CPU): each sync writes the weights to a folder and has the server reload them over HTTP.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from transformers import AttentionInterface

from .async_samples import Order, group_advantages, tag_round, total_rewards
from .async_trl import TREE_ATTENTION, RolloutSample, async_grpo_trainer


# ----------------------------------------------------------------------------------------------- shims
@contextlib.contextmanager
def cpu_construction() -> Iterator[None]:
    """While it lasts, TRL's async trainer finds no peak FLOPs for its device (as for a GPU it does not know) instead
    of asking `torch.cuda` for a device name."""
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


# ----------------------------------------------------------------------------------------------- vLLM server on a CPU
class ReloadWeightTransfer:
    """
    TRL's `WeightTransferProtocol` for a `vllm serve` that NCCL cannot reach (vLLM's CPU build: TRL's default
    `WeightTransferClient` needs CUDA): each sync writes the trainer's weights to a folder as one safetensors file and
    asks the server, over HTTP, to reload its weights from that folder with vLLM's own `reload_weights`.

    A sync is four requests and one file: `POST /pause?mode=keep` (TRL's `VLLMClient.pause`: in-flight requests are
    frozen, not aborted); the weights written to `{weights_dir}/model.safetensors` (a temporary file, then
    `os.replace`, so that no reader sees half a file); `POST /collective_rpc` with method `reload_weights`
    (`weights_path=weights_dir`, `is_checkpoint_format=True`), which every worker of the server runs: vLLM's layer-wise
    reload, which also restores the layers its CPU backend repacked for its kernels; `POST
    /reset_prefix_cache?reset_running_requests=true`, so that no request goes on with keys and values computed by the
    old weights (the frozen requests are preempted and their prefixes recomputed with the new weights when they resume;
    the tokens they sampled before keep their old log-probabilities; TRL's NCCL transfer resets nothing, so its frozen
    requests go on with the old keys and values); and `POST /resume`.

    The server must run with `VLLM_SERVER_DEV_MODE=1` (all four endpoints are vLLM development endpoints, as TRL's
    `/pause` is) and read `weights_dir` on the trainer's filesystem. Tested against `vllm serve` of vLLM's CPU build
    0.31 (`tests/test_async_vllm.py`). With tied embeddings, vLLM's CPU backend keeps computing the LM head from its
    packed copy of the embedding, which the reload leaves stale: serve a model with untied embeddings there.

    Cost per sync: a reference to every tensor the trainer sends, held until the file is written (no copy for CPU
    tensors that are contiguous); one write and one read of the file (the weights in the trainer's dtype); the
    server's full `load_weights`, during which it generates nothing; and the recomputed prefixes of the frozen
    requests. For a tiny model a sync takes about 50 ms; for a real one the disk and the reload dominate (seconds per
    GB), against NCCL's device-to-device copy on a GPU.

    Args:
        server_url (`str`):
            Base URL of the vLLM server, e.g. `"http://127.0.0.1:8000"` (the trainer's `vllm_server_base_url`).
        weights_dir (`str`, *optional*):
            Folder the weights are written to and the server reloads them from. vLLM loads every `*.safetensors` file
            in it, so it must hold no other weights file (a dedicated folder, or the served model's folder if its only
            weights file is `model.safetensors`, which the syncs then overwrite). If `None`, a temporary folder, made
            at the first sync and removed by [`~ReloadWeightTransfer.destroy`].
        timeout (`float`, *optional*, defaults to `1800.0`):
            Seconds allowed for each request to the server (a reload scales with the model's size). Training's start
            ([`~ReloadWeightTransfer.init_weight_transfer`]) waits up to 240 s for the server, TRL's default.

    Attributes:
        syncs (`int`):
            Number of syncs done.
    """

    def __init__(self, server_url: str, weights_dir: str | None = None, timeout: float = 1800.0) -> None:
        from trl.experimental.async_grpo.vllm_client import VLLMClient

        self.client = VLLMClient(server_url)
        self.server_url = self.client.server_url
        self.weights_dir = weights_dir
        self.timeout = timeout
        self.syncs = 0
        self._temporary_dir: str | None = None

    def _request(self, path: str, **kwargs: Any) -> Any:
        import requests

        response = requests.post(f"{self.server_url}{path}", timeout=self.timeout, **kwargs)
        if response.status_code == 404:
            raise RuntimeError(
                f"The vLLM server at {self.server_url} does not expose `{path}`: start it with VLLM_SERVER_DEV_MODE=1 "
                "in its environment."
            )
        response.raise_for_status()
        return response

    def init_weight_transfer(self) -> None:
        """Waits for the server and checks that it exposes the development endpoints a sync needs."""
        import requests

        self.client.wait_for_server_ready()
        if requests.get(f"{self.server_url}/is_paused", timeout=self.timeout).status_code == 404:
            raise RuntimeError(
                f"The vLLM server at {self.server_url} has no development endpoints (`/pause`, `/collective_rpc`): "
                "start it with VLLM_SERVER_DEV_MODE=1 in its environment."
            )

    def pause(self) -> None:
        """Freezes the server's in-flight requests (`/pause?mode=keep`)."""
        self.client.pause(timeout=self.timeout)

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Writes the `(name, tensor)` pairs to `{weights_dir}/model.safetensors` and has the server reload them."""
        from safetensors.torch import save_file

        folder = self.weights_dir
        if folder is None:
            if self._temporary_dir is None:
                self._temporary_dir = tempfile.mkdtemp(prefix="lze-vllm-weights-")
            folder = self._temporary_dir
        os.makedirs(folder, exist_ok=True)
        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in iterator}
        path = os.path.join(folder, "model.safetensors")
        save_file(tensors, path + ".tmp")  # not `*.safetensors`: vLLM would load it
        os.replace(path + ".tmp", path)
        body = {"method": "reload_weights", "kwargs": {"weights_path": folder, "is_checkpoint_format": True}}
        self._request("/collective_rpc", json=body)
        reset = self._request("/reset_prefix_cache", params={"reset_running_requests": "true"})
        if not reset.json().get("success", False):
            raise RuntimeError(f"The vLLM server at {self.server_url} did not reset its prefix cache after a reload.")
        self.syncs += 1

    def resume(self) -> None:
        """Resumes generation (`/resume`)."""
        self.client.resume(timeout=self.timeout)

    def destroy(self) -> None:
        """Removes the temporary folder, if one was made (a later sync makes a new one)."""
        if self._temporary_dir is not None:
            shutil.rmtree(self._temporary_dir, ignore_errors=True)
            self._temporary_dir = None
