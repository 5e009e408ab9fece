r"""Pass@1 / avg@k evaluation of a model, a checkpoint or a LoRA adapter on math benchmarks.

The functions here are what `lze-trl eval` runs, and work as well from Python or a notebook:

```python
>>> from lze_examples.evaluation import EvalArguments, evaluate, markdown_table

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

The package's modules: `arguments` ([`EvalArguments`]), `benchmarks` (loading and prompts), `models` (models,
checkpoints and adapters), `generation` (`transformers` or vLLM), `metrics` (grading, pass@1 / avg@k), `runner`
([`evaluate`]) and `reports` (tables and files).
"""

from .arguments import BENCHMARK_TITLES, TABLE1_BENCHMARKS, EvalArguments
from .benchmarks import load_benchmark, render_prompts
from .generation import Completion, generate_transformers, generate_vllm, vllm_available
from .metrics import benchmark_metrics
from .models import is_adapter, load_model_and_tokenizer
from .reports import markdown_table, merge_results, write_results
from .runner import evaluate, evaluate_model


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
