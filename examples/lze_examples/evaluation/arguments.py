"""Settings of `lze-trl eval` ([`EvalArguments`]) and the benchmark names and titles."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lze_trl.data import KINDS

from ..tasks import TASKS


# Column titles of the Markdown table (Table 1 of the paper names its columns so).
BENCHMARK_TITLES = {
    "gsm8k": "GSM8K",
    "math": "MATH",
    "math500": "MATH-500",
    "dapo_math": "DAPO-MATH",
    "amc23": "AMC23",
    "aime24": "AIME24",
    "aime25": "AIME25",
    "carries": "carries (embedded)",
    "arithmetic": "arithmetic (embedded)",
}
# The benchmarks of Table 1 of the paper (held-out GSM8K / MATH test splits, DAPO-MATH, AMC23, AIME25).
TABLE1_BENCHMARKS = ("gsm8k", "math", "dapo_math", "amc23", "aime25")
# Split read when a benchmark comes from its canonical Hub dataset; the others use the loader's default.
_EVAL_SPLITS = {"gsm8k": "test", "math": "test"}
BENCHMARKS_HELP = f"the math benchmarks {', '.join(KINDS)} and the embedded tasks {', '.join(TASKS)} (no download)"
"""The benchmarks `lze-trl eval` accepts, in words, from the registries ([`~lze_trl.data.KINDS`] and
[`~lze_examples.tasks.TASKS`]): the help of `lze-trl` and of `--benchmarks`."""
_SEPARATORS = re.compile(r"[^\w.]+")  # what a split in a file name becomes `-` (e.g. `train[:100]`: `train-100`)


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
            columns of the paper's Table 1. The names of [`~lze_examples.tasks.TASKS`] are the embedded tasks
            ([`~lze_examples.tasks.get_task`]; no download): 200 held-out prompts (`max_samples` of them when set; with
            `dataset_split` `ood`, the task's out-of-distribution prompts), graded by the task's reward.
        dataset_source (`list[str]`, *optional*):
            Sources overriding the canonical ones, as `kind=source` (e.g. `amc23=data/amc23.jsonl` or
            `amc23=hf://JingzeShi/amc23?split=train`).
        dataset_split (`list[str]`, *optional*):
            Splits overriding the defaults, as `kind=split`. The defaults are `test` for `gsm8k`, `math` (read from
            the Hub) and the embedded tasks, the loader's default for the others; a source that names its own split
            keeps it. A run with overrides writes its own result files (see `results_name`), so that the results of
            each split are kept apart.
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
            Where the result files are written: `results.json` and `results.md`, or with `dataset_split` overrides
            `results_<kind>-<split>.json` and `.md` (e.g. `results_carries-ood.json`).
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
        metadata={"help": f"Benchmarks by name: {BENCHMARKS_HELP}."},
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
        unknown = [b for b in self.benchmarks if b not in KINDS and b not in TASKS]
        if unknown or not self.benchmarks:
            files = [b for b in unknown if "/" in b or "." in b or "://" in b]
            hint = ""
            if files:
                hint = (
                    f" {files[0]!r} looks like a file or URL: benchmarks are named by kind, and a kind's data is read "
                    f"from another source with --dataset_source, e.g. `--benchmarks amc23 --dataset_source "
                    f"amc23={files[0]}`."
                )
            raise ValueError(f"Unknown benchmarks {unknown}; valid ones are {sorted({*KINDS, *TASKS})}.{hint}")
        self.sources = _key_values(self.dataset_source, "dataset_source", self.benchmarks)
        if embedded := sorted(self.sources.keys() & TASKS.keys()):
            raise ValueError(
                f"dataset_source names the embedded task {embedded[0]!r}, whose prompts are generated, not read: drop "
                "it (its held-out prompts are "
                "`lze_examples.tasks.get_task(name).make_dataset(n, seed=0, split='test')`)."
            )
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
    def results_name(self) -> str:
        """
        The result files' name without its extension: `results`, or with `dataset_split` overrides `results_` and
        `<kind>-<split>` per override (e.g. `results_carries-ood`; a split's characters other than letters, digits,
        `.` and `_` become `-`).
        """
        overrides = [f"{kind}-{_SEPARATORS.sub('-', split).strip('-')}" for kind, split in self.splits.items()]
        return "_".join(["results", *overrides])

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
