"""Two-process CPU runs of the selector that needs extra collectives (DAPO's refill), for tests/test_selectors.py.

`torchrun --nproc_per_node 2 tests/dist_selectors.py OUT_DIR`: trains `"dapo"` with refill (groups straddling the
processes: 6 rows per process, groups of 4) and writes each rank's final state under `OUT_DIR/dapo/`.
"""

import sys
from pathlib import Path

from testing_utils import (
    count_grad_rows,
    end_distributed,
    flat_parameters,
    make_trainer,
    prompt_dataset,
    save_rank_results,
)

from lze_trl.tiny import char_tokenizer, tiny_qwen2


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
    selection = log[["generation", "prompt_id", "pass_rate", "weight"]].to_dict("list")
    save_rank_results(trainer, out_dir, flat_parameters(trainer.model), grad_rows=rows["rows"], selection=selection)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    run(out / "dapo", "dapo", per_device_train_batch_size=6, dapo_max_resample=3)
    end_distributed()
