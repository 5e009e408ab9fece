"""Two-process CPU run of a selector that plans epochs and keeps state, for tests/method/test_selectors.py.

`torchrun --nproc_per_node 2 tests/support/dist_selectors.py OUT_DIR`: trains `"reinforce_rej"` (groups straddling the
processes: 6 rows per process, groups of 4) and writes each rank's final state under `OUT_DIR/reinforce_rej/`.
"""

import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks.peers` (torchrun runs the script alone)

from testing_utils import (  # noqa: E402
    count_grad_rows,
    end_distributed,
    flat_parameters,
    make_trainer,
    prompt_dataset,
    save_rank_results,
)

import benchmarks.peers  # noqa: E402, F401  (registers the peers)
from lze_examples.tiny import char_tokenizer, tiny_qwen2  # noqa: E402


def run(out_dir: Path, selector: str, num_prompts: int = 32, **overrides) -> None:
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    rows = count_grad_rows(model)
    trainer = make_trainer(
        out_dir,
        selector,
        dataset=prompt_dataset(num_prompts),
        model=model,
        tokenizer=tokenizer,
        **{"output_dir": str(out_dir), "max_steps": 3, "learning_rate": 1e-2, **overrides},
    )
    trainer.train()
    log = trainer.selection_log.to_pandas()
    selection = log[["batch", "prompt_key", "pass_rate", "weight"]].to_dict("list")
    save_rank_results(trainer, out_dir, flat_parameters(trainer.model), grad_rows=rows["rows"], selection=selection)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    run(out / "reinforce_rej", "reinforce_rej", num_prompts=12, per_device_train_batch_size=6, max_steps=6)
    end_distributed()
