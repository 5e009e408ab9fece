"""TRL's `AsyncGRPOTrainer` on a CPU: the two shims its constructor and forward need there. The stand-in rollout
worker and weight transfer that run it without vLLM are test helpers (`lze_trl/testing/async_stand_ins.py`).

- The trainer's constructor asks `torch.cuda` for the device's name (to look up its peak FLOPs for the MFU metrics),
  which fails on a CPU-only torch: [`cpu_construction`] answers `None` during construction, which is what TRL itself
  answers for a device it does not know (MFU metrics off, every other metric logged).
- The trainer's model attends through TRL's tree attention (`"tree_fa3"`: a prefix trie of each row's samples, run
  by the FlashAttention-3 kernel, which the `kernels` package fetches for a GPU). [`cpu_tree_attention`] computes the
  same attention in plain torch (each segment's queries against the keys of its root-to-segment path, causal), and
  [`use_cpu_tree_attention`] registers it under TRL's name. Tested against a plain forward of each sample.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from transformers import AttentionInterface

from .upstream import TREE_ATTENTION, async_grpo_trainer


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
