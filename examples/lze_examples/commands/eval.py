"""`lze-trl eval`: Pass@1 / avg@k of models, checkpoints or LoRA adapters on math benchmarks and the embedded tasks.

Examples:

```bash
lze-trl eval --model Qwen/Qwen2.5-Math-1.5B outputs/qwen2.5-math-1.5b-math-lze \
    --model_names base lze --benchmarks gsm8k math dapo_math amc23 aime25
lze-trl eval --model outputs/lora-run --benchmarks amc23 --dataset-source amc23=data/amc23.jsonl \
    --num_samples 8 --temperature 0.6
lze-trl eval --config recipes/eval/table1.yaml --model outputs/my-run
lze-trl eval --config recipes/eval/cpu-carries.yaml --model outputs/cpu-carries  # on a CPU, offline
```

Writes `results.json` (per benchmark: n, k, pass@1, avg@k, pass@k, optionally every sample; the source and the split
read) and `results.md` (a table shaped like the paper's Table 1) into `--output_dir`. A run with `--dataset_split`
overrides writes files of its own, named after them (`--dataset_split carries=ood`: `results_carries-ood.json` and
`results_carries-ood.md`), so that the in-domain results are kept. The logic lives in [`lze_examples.evaluation`].
"""

from __future__ import annotations

import os
import sys

from lze_trl.commands import UsageError, parse_args

from ..evaluation.arguments import BENCHMARKS_HELP


SUMMARY = f"Pass@1 / avg@k of a model, checkpoint or LoRA adapter on {BENCHMARKS_HELP}."
"""The command's line in `lze-trl --help`."""


def make_parser(prog: str | None = "lze-trl eval"):
    """The `lze-trl eval` parser: TRL's `TrlParser` over [`~lze_examples.evaluation.EvalArguments`] (`--config`
    YAML)."""
    from trl import TrlParser

    from lze_examples.evaluation import EvalArguments

    return TrlParser((EvalArguments,), prog=prog, description=__doc__.split("\n\n")[0])


def main(argv: list[str]) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from lze_examples.evaluation import evaluate, markdown_table

    try:
        (args,) = parse_args(make_parser(), argv, ("model_name_or_path", "base_model"))
    except UsageError as error:
        print(f"lze-trl eval: error: {error}", file=sys.stderr)
        return 2
    from lze_trl.common.engines import apply_thread_policy

    apply_thread_policy()  # as training: one thread on a small CPU unless OMP_NUM_THREADS is set
    results = evaluate(args)
    print(markdown_table(results))
    print(f"Results written to {os.path.join(args.output_dir, args.results_name)}.json and .md.")
    return 0
