"""Two-process CPU runs of the selectors that need extra collectives, for tests/test_selectors.py.

`torchrun --nproc_per_node 2 tests/dist_selectors.py OUT_DIR`: trains `"dapo"` with refill (groups straddling the
processes: 6 rows per process, groups of 4), `"prefilter"` (judged on both processes) and `"softmax"` with rollout
allocation, and writes each rank's final state under `OUT_DIR/<selector>/`.
"""

import json
import sys
import zlib
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset

from lze_trl import LZEGRPOConfig, LZEGRPOTrainer
from lze_trl.tiny import char_tokenizer, tiny_qwen2


def reward(prompts, completions, **kwargs):
    return [float(zlib.crc32(c.encode()) % 8 < int(p.split("+")[0]) % 9) for p, c in zip(prompts, completions)]


def run(out_dir: Path, selector: str, num_prompts: int = 32, **overrides) -> None:
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    rows = {"n": 0}

    def count(module, args, kwargs):
        if torch.is_grad_enabled():
            rows["n"] += kwargs["input_ids"].shape[0]

    model.register_forward_pre_hook(count, with_kwargs=True)
    values = dict(
        output_dir=str(out_dir),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        max_steps=3,
        logging_steps=1,
        learning_rate=1e-2,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        selector=selector,
    )
    values.update(overrides)
    dataset = Dataset.from_dict({"prompt": [f"{i}+{i % 7}=" for i in range(num_prompts)]})
    trainer = LZEGRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=LZEGRPOConfig(**values),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    rank = trainer.accelerator.process_index
    arrays, counters = trainer.lze_state()
    params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()]).numpy()
    np.savez(out_dir / f"rank{rank}.npz", params=params, **arrays)
    metrics = [{k: v for k, v in e.items() if k.startswith("lze/") or k == "loss"} for e in trainer.state.log_history]
    log = trainer.selection_log.to_pandas()
    info = {
        "counters": counters,
        "grad_rows": rows["n"],
        "world": trainer.accelerator.num_processes,
        "log": metrics,
        "selection": log[["generation", "prompt_id", "pass_rate", "weight"]].to_dict("list"),
    }
    (out_dir / f"rank{rank}.json").write_text(json.dumps(info))


if __name__ == "__main__":
    out = Path(sys.argv[1])
    run(out / "dapo", "dapo", per_device_train_batch_size=6, dapo_max_resample=3)
    run(out / "prefilter", "prefilter", prefilter_mode="remove_both", prefilter_cache_dir=str(out / "cache"))
    run(out / "softmax", "softmax", num_prompts=8, max_steps=4, softmax_allocate_rollouts=True)
