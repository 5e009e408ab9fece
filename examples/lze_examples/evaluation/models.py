"""Loading a model, a checkpoint or a LoRA adapter with its tokenizer."""

from __future__ import annotations

import json
import os


def is_adapter(path: str) -> bool:
    """Whether `path` is a local PEFT adapter directory (it holds an `adapter_config.json`)."""
    return os.path.isfile(os.path.join(path, "adapter_config.json"))


def _adapter_base(path: str, base_model: str | None) -> str:
    if base_model is not None:
        return base_model
    with open(os.path.join(path, "adapter_config.json")) as f:
        base = json.load(f).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"The adapter {path!r} does not name its base model; pass `base_model`.")
    return base


def _has_tokenizer(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, f)) for f in ("tokenizer.json", "tokenizer_config.json"))


def _torch_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        return torch.float32 if device == "cpu" else "auto"
    if not hasattr(torch, dtype) or not isinstance(getattr(torch, dtype), torch.dtype):
        raise ValueError(f"Unknown dtype {dtype!r}; use auto, bfloat16, float16 or float32.")
    return getattr(torch, dtype)


def load_model_and_tokenizer(
    model_name_or_path: str,
    *,
    base_model: str | None = None,
    dtype: str = "auto",
    device: str | None = None,
    revision: str | None = None,
    trust_remote_code: bool = False,
):
    """
    Loads a causal LM and its tokenizer for evaluation; a LoRA adapter directory is loaded onto its base model and
    merged.

    Args:
        model_name_or_path (`str`):
            Hub id, model/checkpoint directory, or adapter directory (with `adapter_config.json`).
        base_model (`str`, *optional*):
            Base model of an adapter (default: the adapter config's `base_model_name_or_path`).
        dtype (`str`, *optional*, defaults to `"auto"`):
            Weights dtype (`"auto"` is `float32` on CPU).
        device (`str`, *optional*):
            Defaults to `cuda` when available, else `cpu`.
        revision (`str`, *optional*):
            Revision of a Hub model.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom model code.

    Returns:
        `tuple[PreTrainedModel, PreTrainedTokenizerBase]`: The model in eval mode on `device`, and a left-padding
        tokenizer with a pad token.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    kwargs = dict(dtype=_torch_dtype(dtype, device), revision=revision, trust_remote_code=trust_remote_code)
    if is_adapter(model_name_or_path):
        from peft import PeftModel

        base = _adapter_base(model_name_or_path, base_model)
        model = AutoModelForCausalLM.from_pretrained(base, **kwargs)
        model = PeftModel.from_pretrained(model, model_name_or_path).merge_and_unload()
        tokenizer_path = model_name_or_path if _has_tokenizer(model_name_or_path) else base
    else:
        model = AutoModelForCausalLM.from_pretrained(model_name_or_path, **kwargs)
        tokenizer_path = model_name_or_path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path, revision=revision, trust_remote_code=trust_remote_code)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device).eval(), tokenizer
