r"""Pass@1 / avg@k evaluation of a model, a checkpoint or a LoRA adapter on math benchmarks.

The functions here are what `lze-trl eval` runs, and work as well from Python or a notebook:

```python
>>> from lze_trl.evaluation import EvalArguments, evaluate, markdown_table

>>> results = evaluate(EvalArguments(model_name_or_path=["Qwen/Qwen2.5-Math-1.5B"], benchmarks=["math500", "amc23"]))
>>> print(markdown_table(results))
```

Benchmarks are the kinds of [`~lze_trl.data.load_math_dataset`] (`gsm8k`, `math`, `math500`, `dapo_math`, `amc23`,
`aime24`, `aime25`), read from their canonical Hub datasets or from any source that function accepts (a local
`.jsonl`/`.parquet` file in the dataset's own schema, an `hf://` or `https://huggingface.co/datasets/...` reference).
Completions are graded by [`~lze_trl.rewards.math_accuracy`] (math-verify on the last `\boxed{}` after the reasoning).

Generation uses vLLM when it is installed and a GPU is present, otherwise batched `transformers` generation (left
padding). Prompts are rendered with the tokenizer's chat template; a tokenizer without one gets the messages' contents
joined by blank lines.
"""

from __future__ import annotations

import copy
import gc
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


__all__ = [
    "BENCHMARK_TITLES",
    "TABLE1_BENCHMARKS",
    "Completion",
    "EvalArguments",
    "benchmark_metrics",
    "evaluate",
    "evaluate_model",
    "generate_transformers",
    "generate_vllm",
    "is_adapter",
    "load_benchmark",
    "load_model_and_tokenizer",
    "markdown_table",
    "merge_results",
    "render_prompts",
    "vllm_available",
    "write_results",
]

logger = logging.getLogger(__name__)

# Column titles of the Markdown table (Table 1 of the paper names its columns so).
BENCHMARK_TITLES = {
    "gsm8k": "GSM8K",
    "math": "MATH",
    "math500": "MATH-500",
    "dapo_math": "DAPO-MATH",
    "amc23": "AMC23",
    "aime24": "AIME24",
    "aime25": "AIME25",
}
# The benchmarks of Table 1 of the paper (held-out GSM8K / MATH test splits, DAPO-MATH, AMC23, AIME25).
TABLE1_BENCHMARKS = ("gsm8k", "math", "dapo_math", "amc23", "aime25")
# Split read when a benchmark comes from its canonical Hub dataset; the others use the loader's default.
_EVAL_SPLITS = {"gsm8k": "test", "math": "test"}
RESULTS_JSON = "results.json"
RESULTS_MARKDOWN = "results.md"


@dataclass
class EvalArguments:
    r"""
    Arguments of [`evaluate`] and of `lze-trl eval`.

    Parameters:
        model_name_or_path (`list[str]`):
            Models to evaluate, one table row each: Hub ids, local model or checkpoint directories, or LoRA adapter
            directories (holding an `adapter_config.json`; the base model is read from it, or from `base_model`).
        model_names (`list[str]`, *optional*):
            Row labels, one per model. Defaults to the models' paths.
        base_model (`str`, *optional*):
            Base model of the LoRA adapters, overriding the `base_model_name_or_path` of their `adapter_config.json`.
        benchmarks (`list[str]`, *optional*, defaults to `["math500", "amc23", "aime25"]`):
            Benchmarks, by [`~lze_trl.data.load_math_dataset`] kind. `gsm8k math dapo_math amc23 aime25` are the
            columns of the paper's Table 1.
        dataset_source (`list[str]`, *optional*):
            Sources overriding the canonical ones, as `kind=source` (e.g. `amc23=data/amc23.jsonl` or
            `amc23=hf://JingzeShi/amc23?split=train`).
        dataset_split (`list[str]`, *optional*):
            Splits overriding the defaults, as `kind=split`. The defaults are `test` for `gsm8k` and `math` read from
            the Hub, the loader's default for the others; a source that names its own split keeps it.
        max_samples (`int`, *optional*):
            Evaluate only the first `max_samples` problems of each benchmark.
        system_prompt (`str`, *optional*):
            System message put before each problem.
        chat_template_only (`bool`, *optional*, defaults to `False`):
            Use the bare problem as the user message, without the "reason step by step ... \boxed{}" instruction.
        enable_thinking (`bool`, *optional*):
            `enable_thinking` switch passed to the chat template (Qwen3 hybrid thinking). Unset: the template's
            default.
        num_samples (`int`, *optional*, defaults to `1`):
            Completions per problem, `k` of avg@k. More than one needs `temperature > 0`.
        temperature (`float`, *optional*, defaults to `0.0`):
            Sampling temperature; `0` is greedy decoding (the usual Pass@1).
        top_p (`float`, *optional*, defaults to `1.0`):
            Nucleus sampling probability (sampling only).
        max_new_tokens (`int`, *optional*, defaults to `4096`):
            Longest completion, in tokens (Qwen3 thinking needs more, e.g. `16384`).
        backend (`str`, *optional*, defaults to `"auto"`):
            `"vllm"`, `"transformers"`, or `"auto"`: vLLM when it is installed and a GPU is present.
        batch_size (`int`, *optional*, defaults to `16`):
            Problems per `generate` call of the transformers backend (each with `num_samples` sequences).
        dtype (`str`, *optional*, defaults to `"auto"`):
            Weights dtype: `"auto"` (the checkpoint's dtype on GPU, `float32` on CPU), `"bfloat16"`, `"float16"`,
            `"float32"`.
        device (`str`, *optional*):
            Device of the transformers backend. Defaults to `cuda` when available, else `cpu`.
        revision (`str`, *optional*):
            Revision of Hub models.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom model code from the Hub.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the sampling.
        vllm_gpu_memory_utilization (`float`, *optional*, defaults to `0.9`):
            GPU memory fraction vLLM may use.
        vllm_tensor_parallel_size (`int`, *optional*, defaults to `1`):
            GPUs a model is split over by vLLM.
        vllm_max_model_length (`int`, *optional*):
            vLLM context length (prompt + completion). Defaults to the model's.
        output_dir (`str`, *optional*, defaults to `"outputs/eval"`):
            Where `results.json` and `results.md` are written.
        save_samples (`bool`, *optional*, defaults to `False`):
            Also store every prompt, completion and grade in `results.json`.
    """

    model_name_or_path: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Models to evaluate: Hub ids, model/checkpoint directories or LoRA adapter directories.",
            "aliases": ["--model", "--models"],
        },
    )
    model_names: list[str] | None = field(default=None, metadata={"help": "Row labels, one per model."})
    base_model: str | None = field(
        default=None, metadata={"help": "Base model of LoRA adapters (default: read from adapter_config.json)."}
    )
    benchmarks: list[str] = field(
        default_factory=lambda: ["math500", "amc23", "aime25"],
        metadata={"help": "Benchmarks by kind: gsm8k, math, math500, dapo_math, amc23, aime24, aime25."},
    )
    dataset_source: list[str] | None = field(
        default=None,
        metadata={"help": "Source overrides as kind=source (local file, hf://..., Hub id).", "aliases": ["--source"]},
    )
    dataset_split: list[str] | None = field(default=None, metadata={"help": "Split overrides as kind=split."})
    max_samples: int | None = field(default=None, metadata={"help": "Evaluate only the first N problems."})
    system_prompt: str | None = field(default=None, metadata={"help": "System message before each problem."})
    chat_template_only: bool = field(
        default=False, metadata={"help": "User message = bare problem, without the \\boxed{} instruction."}
    )
    enable_thinking: bool | None = field(
        default=None, metadata={"help": "`enable_thinking` switch of the chat template (Qwen3)."}
    )
    num_samples: int = field(default=1, metadata={"help": "Completions per problem (k of avg@k)."})
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature; 0 = greedy."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling probability."})
    max_new_tokens: int = field(default=4096, metadata={"help": "Longest completion, in tokens."})
    backend: str = field(
        default="auto", metadata={"help": "Generation backend.", "choices": ["auto", "vllm", "transformers"]}
    )
    batch_size: int = field(default=16, metadata={"help": "Problems per generate call (transformers backend)."})
    dtype: str = field(default="auto", metadata={"help": "Weights dtype: auto, bfloat16, float16, float32."})
    device: str | None = field(default=None, metadata={"help": "Device of the transformers backend."})
    revision: str | None = field(default=None, metadata={"help": "Revision of Hub models."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow custom model code."})
    seed: int = field(default=0, metadata={"help": "Sampling seed."})
    vllm_gpu_memory_utilization: float = field(default=0.9, metadata={"help": "GPU memory fraction for vLLM."})
    vllm_tensor_parallel_size: int = field(default=1, metadata={"help": "Tensor parallel size of vLLM."})
    vllm_max_model_length: int | None = field(default=None, metadata={"help": "vLLM context length."})
    output_dir: str = field(default="outputs/eval", metadata={"help": "Where results.json / results.md go."})
    save_samples: bool = field(default=False, metadata={"help": "Store every completion and grade in the JSON."})

    def __post_init__(self):
        from .data import KINDS

        if isinstance(self.model_name_or_path, str):
            self.model_name_or_path = [self.model_name_or_path]
        if isinstance(self.benchmarks, str):
            self.benchmarks = [self.benchmarks]
        if not self.model_name_or_path:
            raise ValueError("Give at least one model to evaluate (`--model PATH_OR_ID [...]`).")
        if self.model_names is not None and len(self.model_names) != len(self.model_name_or_path):
            raise ValueError(
                f"Got {len(self.model_names)} model_names for {len(self.model_name_or_path)} models; give one each."
            )
        unknown = [b for b in self.benchmarks if b not in KINDS]
        if unknown or not self.benchmarks:
            raise ValueError(f"Unknown benchmarks {unknown}; valid ones are {sorted(KINDS)}.")
        self.sources = _key_values(self.dataset_source, "dataset_source", self.benchmarks)
        self.splits = _key_values(self.dataset_split, "dataset_split", self.benchmarks)
        if self.num_samples < 1:
            raise ValueError(f"num_samples={self.num_samples} is invalid: use an integer >= 1.")
        if self.temperature < 0:
            raise ValueError(f"temperature={self.temperature} is invalid: use 0 (greedy) or a positive value.")
        if self.num_samples > 1 and self.temperature == 0:
            raise ValueError(
                f"num_samples={self.num_samples} with greedy decoding gives {self.num_samples} identical completions; "
                "set a temperature > 0 (e.g. 0.6) for avg@k."
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p} is invalid: use a value in (0, 1].")
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError("max_new_tokens and batch_size must be >= 1.")
        if self.max_samples is not None and self.max_samples < 1:
            raise ValueError(f"max_samples={self.max_samples} is invalid: use an integer >= 1.")

    @property
    def chat_template_kwargs(self) -> dict[str, Any]:
        return {} if self.enable_thinking is None else {"enable_thinking": self.enable_thinking}

    def generation_settings(self) -> dict[str, Any]:
        """The settings that shape the numbers, recorded in `results.json`."""
        keys = (
            "num_samples",
            "temperature",
            "top_p",
            "max_new_tokens",
            "seed",
            "system_prompt",
            "chat_template_only",
            "enable_thinking",
            "max_samples",
        )
        return {key: getattr(self, key) for key in keys}


def _key_values(items: Sequence[str] | None, name: str, benchmarks: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise ValueError(f"`{name}` entries look like kind=value, got {item!r}.")
        if key not in benchmarks:
            raise ValueError(f"`{name}` entry {item!r} names {key!r}, which is not among the benchmarks {benchmarks}.")
        out[key] = value
    return out


# --------------------------------------------------------------------------------------------------- data


def load_benchmark(
    name: str,
    source: str | None = None,
    split: str | None = None,
    *,
    max_samples: int | None = None,
    system_prompt: str | None = None,
    chat_template_only: bool = False,
):
    """
    Loads a benchmark as a conversational dataset with a `solution` column.

    Args:
        name (`str`):
            A [`~lze_trl.data.load_math_dataset`] kind.
        source (`str`, *optional*):
            Where to read it (see [`~lze_trl.data.parse_source`]). Defaults to the kind's canonical Hub dataset.
        split (`str`, *optional*):
            Split to read. Defaults to `test` for `gsm8k` and `math` from the Hub, else the loader's default; not
            applied to a `source` that names its own split unless given explicitly.
        max_samples (`int`, *optional*):
            Keep only the first `max_samples` rows.
        system_prompt (`str`, *optional*):
            System message before each problem.
        chat_template_only (`bool`, *optional*, defaults to `False`):
            Bare problem as the user message.

    Returns:
        `datasets.Dataset`: Rows with `prompt` (chat messages) and `solution`.
    """
    from .data import load_math_dataset

    if split is None and source is None:
        split = _EVAL_SPLITS.get(name)
    dataset = load_math_dataset(
        name, source=source, split=split, system_prompt=system_prompt, chat_template_only=chat_template_only
    )
    if max_samples is not None:
        dataset = dataset.select(range(min(max_samples, len(dataset))))
    return dataset


def render_prompts(
    prompts: Sequence[str | Sequence[Mapping[str, str]]],
    tokenizer,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> tuple[list[str], bool]:
    """
    Renders prompts to text for generation.

    Conversational prompts (lists of messages) go through the tokenizer's chat template with a generation prompt;
    if the tokenizer has no chat template, the messages' contents are joined by blank lines. Plain strings are used as
    they are.

    Args:
        prompts (`Sequence[str | Sequence[Mapping[str, str]]]`):
            Prompts: strings, or lists of `{"role", "content"}` messages.
        tokenizer (`PreTrainedTokenizerBase`):
            Tokenizer of the model.
        chat_template_kwargs (`Mapping[str, Any]`, *optional*):
            Extra variables of the chat template, e.g. `{"enable_thinking": True}`.

    Returns:
        `tuple[list[str], bool]`: The texts, and whether they came from the chat template (which then already holds
        the special tokens, so they must be tokenized with `add_special_tokens=False`).
    """
    has_template = bool(getattr(tokenizer, "chat_template", None))
    templated = False
    texts = []
    for prompt in prompts:
        if isinstance(prompt, str):
            texts.append(prompt)
        elif has_template:
            texts.append(
                tokenizer.apply_chat_template(
                    list(prompt), tokenize=False, add_generation_prompt=True, **dict(chat_template_kwargs or {})
                )
            )
            templated = True
        else:
            texts.append("\n\n".join(str(m["content"]) for m in prompt))
    return texts, templated


# --------------------------------------------------------------------------------------------------- models


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


# --------------------------------------------------------------------------------------------------- generation


@dataclass
class Completion:
    """One generated completion: its text, its length in tokens, and whether it hit `max_new_tokens`."""

    text: str
    num_tokens: int
    truncated: bool


def vllm_available() -> bool:
    """Whether the vLLM backend can run here: vLLM is installed and a CUDA GPU is present."""
    import importlib.util

    import torch

    return importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


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
) -> list[list[Completion]]:
    """
    Generates `num_samples` completions per prompt with `model.generate`, in left-padded batches.

    Prompts are sorted by length so that each batch pads little; results come back in the prompts' order. Only the
    settings given here shape the decoding (the model's own `generation_config` sampling defaults, e.g. a
    repetition penalty, are not applied), so that both backends decode alike.

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
    order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
    results: list[list[Completion]] = [[] for _ in prompts]
    device = next(model.parameters()).device
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
    Generates `num_samples` completions per prompt with vLLM (needs vLLM and a GPU).

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


# --------------------------------------------------------------------------------------------------- metrics


def benchmark_metrics(correct: Sequence[Sequence[float]], completions: Sequence[Sequence[Completion]] = ()):
    """
    Metrics of one benchmark from the grades of its completions.

    With `c_i` correct completions out of `k` for problem `i` of `n`:

    - `pass@1 = mean_i c_i / k`: with `k = 1` the accuracy of the single (e.g. greedy) completion; with `k > 1` the
      unbiased pass@1 estimate from `k` samples, which is what "avg@k" names, so `avg@k` holds the same number;
    - `pass@k = mean_i [c_i > 0]`: the fraction of problems solved by at least one of the `k` completions.

    Args:
        correct (`Sequence[Sequence[float]]`):
            Per problem, the grade (1.0 / 0.0) of each of its `k` completions.
        completions (`Sequence[Sequence[Completion]]`, *optional*):
            The completions themselves, for their mean length and truncation rate.

    Returns:
        `dict[str, float | int]`: `n`, `k`, `pass@1`, `avg@k`, `pass@k`, and, with completions,
        `mean_completion_tokens` and `truncated_frac`.
    """
    n = len(correct)
    k = len(correct[0]) if n else 0
    if any(len(c) != k for c in correct):
        raise ValueError("Every problem must have the same number of graded completions.")
    per_problem = [sum(c) / k for c in correct] if k else []
    pass1 = sum(per_problem) / n if n else math.nan
    metrics: dict[str, float | int] = {
        "n": n,
        "k": k,
        "pass@1": pass1,
        "avg@k": pass1,
        "pass@k": sum(any(x > 0 for x in c) for c in correct) / n if n else math.nan,
    }
    flat = [c for row in completions for c in row]
    if flat:
        metrics["mean_completion_tokens"] = sum(c.num_tokens for c in flat) / len(flat)
        metrics["truncated_frac"] = sum(c.truncated for c in flat) / len(flat)
    return metrics


def _grade(completions: Sequence[Sequence[Completion]], solutions: Sequence[str]) -> tuple[list[list[float]], int]:
    """Grades completions with `math_accuracy`; returns the grades and the number of unparsable gold answers."""
    from .rewards import math_accuracy

    texts = [c.text for row in completions for c in row]
    golds = [sol for row, sol in zip(completions, solutions) for _ in row]
    flat = math_accuracy(texts, golds)
    grades, unparsable, i = [], 0, 0
    for row in completions:
        grades.append([float(x or 0.0) for x in flat[i : i + len(row)]])
        unparsable += flat[i] is None if row else 0
        i += len(row)
    return grades, unparsable


# --------------------------------------------------------------------------------------------------- evaluation


def _resolve_backend(backend: str) -> str:
    if backend == "auto":
        return "vllm" if vllm_available() else "transformers"
    if backend == "vllm" and not vllm_available():
        raise RuntimeError("backend='vllm' needs the `vllm` package and a CUDA GPU; use backend='transformers'.")
    return backend


def evaluate_model(
    model_name_or_path: str, benchmarks: Mapping[str, Any], args: EvalArguments
) -> dict[str, dict[str, Any]]:
    """
    Evaluates one model (or adapter) on already loaded benchmarks.

    Args:
        model_name_or_path (`str`):
            Hub id, model directory or adapter directory.
        benchmarks (`Mapping[str, datasets.Dataset]`):
            Benchmark name -> dataset with `prompt` and `solution` columns (see [`load_benchmark`]).
        args ([`EvalArguments`]):
            Generation settings.

    Returns:
        `dict[str, dict[str, Any]]`: Benchmark name -> metrics (see [`benchmark_metrics`]) plus
        `unparsable_gold`, and with `args.save_samples` a `samples` list.
    """
    backend = _resolve_backend(args.backend)
    names = list(benchmarks)
    sampling = dict(
        num_samples=args.num_samples,
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
    )
    start = time.perf_counter()
    if backend == "transformers":
        model, tokenizer = load_model_and_tokenizer(
            model_name_or_path,
            base_model=args.base_model,
            dtype=args.dtype,
            device=args.device,
            revision=args.revision,
            trust_remote_code=args.trust_remote_code,
        )
        texts = {b: render_prompts(benchmarks[b]["prompt"], tokenizer, args.chat_template_kwargs) for b in names}
        flat = [t for b in names for t in texts[b][0]]
        templated = any(texts[b][1] for b in names)
        generated = generate_transformers(
            model, tokenizer, flat, add_special_tokens=not templated, batch_size=args.batch_size, **sampling
        )
        del model
        _free_memory()
    else:
        from transformers import AutoTokenizer

        merged = _merged_adapter_dir(args, model_name_or_path) if is_adapter(model_name_or_path) else None
        path = merged or model_name_or_path
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                path, revision=None if merged else args.revision, trust_remote_code=args.trust_remote_code
            )
            texts = {b: render_prompts(benchmarks[b]["prompt"], tokenizer, args.chat_template_kwargs) for b in names}
            flat = [t for b in names for t in texts[b][0]]
            templated = any(texts[b][1] for b in names)
            ids = [tokenizer(t, add_special_tokens=not templated)["input_ids"] for t in flat]
            generated = generate_vllm(
                path,
                ids,
                dtype=args.dtype,
                revision=None if merged else args.revision,
                trust_remote_code=args.trust_remote_code,
                gpu_memory_utilization=args.vllm_gpu_memory_utilization,
                tensor_parallel_size=args.vllm_tensor_parallel_size,
                max_model_length=args.vllm_max_model_length,
                **sampling,
            )
        finally:
            if merged:
                shutil.rmtree(merged, ignore_errors=True)
    elapsed = time.perf_counter() - start

    results: dict[str, dict[str, Any]] = {}
    offset = 0
    for name in names:
        dataset = benchmarks[name]
        rows = generated[offset : offset + len(dataset)]
        offset += len(dataset)
        grades, unparsable = _grade(rows, dataset["solution"])
        metrics: dict[str, Any] = benchmark_metrics(grades, rows)
        metrics["unparsable_gold"] = unparsable
        if unparsable:
            logger.warning("%s: %d gold answers could not be parsed; counted as wrong.", name, unparsable)
        if args.save_samples:
            metrics["samples"] = [
                {
                    "index": i,
                    "prompt": prompt,
                    "solution": solution,
                    "completions": [c.text for c in row],
                    "correct": grade,
                    "num_tokens": [c.num_tokens for c in row],
                    "truncated": [c.truncated for c in row],
                }
                for i, (prompt, solution, row, grade) in enumerate(
                    zip(texts[name][0], dataset["solution"], rows, grades)
                )
            ]
        results[name] = metrics
    logger.info("Evaluated %s on %s with %s in %.1f s.", model_name_or_path, names, backend, elapsed)
    return results


def _average(benchmarks: Mapping[str, Mapping[str, Any]], metric: str) -> float:
    values = [b[metric] for b in benchmarks.values() if metric in b]
    return sum(values) / len(values) if values else math.nan


def evaluate(args: EvalArguments, write: bool = True) -> dict[str, Any]:
    """
    Evaluates every model of `args` on every benchmark, and writes `results.json` and `results.md`.

    Args:
        args ([`EvalArguments`]):
            What to evaluate and how.
        write (`bool`, *optional*, defaults to `True`):
            Write the result files into `args.output_dir`.

    Returns:
        `dict[str, Any]`: `{"settings": ..., "benchmarks": [...], "models": {label: {"model": path, "adapter": bool,
        "backend": ..., "benchmarks": {name: metrics}, "average": {"pass@1": ..., "pass@k": ...}}}}`.
    """
    backend = _resolve_backend(args.backend)
    benchmarks = {
        name: load_benchmark(
            name,
            source=args.sources.get(name),
            split=args.splits.get(name),
            max_samples=args.max_samples,
            system_prompt=args.system_prompt,
            chat_template_only=args.chat_template_only,
        )
        for name in args.benchmarks
    }
    labels = args.model_names or args.model_name_or_path
    results: dict[str, Any] = {
        "settings": {**args.generation_settings(), "backend": backend},
        "benchmarks": list(args.benchmarks),
        "sources": {name: args.sources.get(name) for name in args.benchmarks},
        "models": {},
    }
    for label, path in zip(labels, args.model_name_or_path):
        scores = evaluate_model(path, benchmarks, args)
        results["models"][label] = {
            "model": path,
            "adapter": is_adapter(path),
            "benchmarks": scores,
            "average": {m: _average(scores, m) for m in ("pass@1", "pass@k")},
        }
        if write:  # after each model, so that a long multi-model run keeps what it has
            write_results(results, args.output_dir)
    return results


# --------------------------------------------------------------------------------------------------- reports


def merge_results(*results: Mapping[str, Any]) -> dict[str, Any]:
    """
    Merges the results of several [`evaluate`] runs (e.g. one per model, read back from their `results.json`) into
    one, for a single table. Later runs win for a model label that appears twice.
    """
    merged: dict[str, Any] = {"settings": {}, "benchmarks": [], "sources": {}, "models": {}}
    for result in results:
        merged["settings"] = merged["settings"] or dict(result.get("settings", {}))
        for name in result.get("benchmarks", []):
            if name not in merged["benchmarks"]:
                merged["benchmarks"].append(name)
        merged["sources"].update(result.get("sources", {}))
        merged["models"].update(copy.deepcopy(dict(result["models"])))
    return merged


def markdown_table(results: Mapping[str, Any], metric: str = "pass@1", digits: int = 3) -> str:
    """
    A Markdown table shaped like the paper's Table 1: one row per model, one column per benchmark, then the average
    over the benchmarks (unweighted, as in the paper).

    Args:
        results (`Mapping[str, Any]`):
            The output of [`evaluate`] (or [`merge_results`]).
        metric (`str`, *optional*, defaults to `"pass@1"`):
            Which metric to show: `"pass@1"` (= `"avg@k"`), or `"pass@k"`.
        digits (`int`, *optional*, defaults to `3`):
            Decimals.

    Returns:
        `str`: The table.
    """
    names = list(results["benchmarks"])
    header = ["Model", *(BENCHMARK_TITLES.get(n, n) for n in names), "Avg"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]

    def cell(value: float | None) -> str:
        return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"

    for label, entry in results["models"].items():
        values = [entry["benchmarks"].get(n, {}).get(metric) for n in names]
        present = [v for v in values if v is not None]
        average = sum(present) / len(present) if present and len(present) == len(values) else None
        lines.append("| " + " | ".join([str(label), *(cell(v) for v in values), cell(average)]) + " |")
    settings = results.get("settings", {})
    k = settings.get("num_samples", 1)
    decoding = "greedy" if not settings.get("temperature") else f"temperature {settings['temperature']}"
    caption = f"{metric} ({decoding}, k={k}" + (f", avg@{k}" if k > 1 and metric == "pass@1" else "") + ")"
    return "\n".join(lines) + f"\n\n{caption}\n"


def write_results(results: Mapping[str, Any], output_dir: str) -> tuple[str, str]:
    """Writes `results.json` and `results.md` (see [`markdown_table`]) into `output_dir`; returns their paths."""
    os.makedirs(output_dir, exist_ok=True)
    json_path = os.path.join(output_dir, RESULTS_JSON)
    md_path = os.path.join(output_dir, RESULTS_MARKDOWN)
    with open(json_path, "w") as f:
        json.dump(results, f, indent=2, default=_json_default)
    with open(md_path, "w") as f:
        f.write(markdown_table(results))
    return json_path, md_path


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    raise TypeError(f"Cannot serialise {type(value).__name__} to JSON.")
