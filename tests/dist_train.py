"""Two-process CPU run for tests/test_distributed.py: `torchrun --nproc_per_node 2 tests/dist_train.py OUT_DIR`."""

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
    # prompt i passes on (i % 9) of 8 completion buckets: i = 0 never passes and i = 8 always does (dead groups)
    return [float(zlib.crc32(c.encode()) % 8 < int(p.split("+")[0]) % 9) for p, c in zip(prompts, completions)]


def main(out_dir: str, mode: str) -> None:
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    rows = {"n": 0}

    def count(module, args, kwargs):
        if torch.is_grad_enabled():
            rows["n"] += kwargs["input_ids"].shape[0]

    model.register_forward_pre_hook(count, with_kwargs=True)
    args = LZEGRPOConfig(
        output_dir=out_dir,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        num_generations=4,
        max_completion_length=6,
        max_steps=8 if mode == "rollout" else 4,  # rollout: past epoch 0, where skipping starts
        logging_steps=1,
        learning_rate=1e-2,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        prune_solved=mode == "prune",
        prune_after_epochs=1,
        rollout_filter="lze" if mode == "rollout" else "none",
        rollout_filter_audit=0.5,  # seeded draws: both ranks must take the same ones
    )
    dataset = Dataset.from_dict({"prompt": [f"{i}+{i % 7}=" for i in range(16)]})
    trainer = LZEGRPOTrainer(
        model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    trainer.train()
    rank = trainer.accelerator.process_index
    arrays, counters = trainer.lze_state()
    params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()]).numpy()
    np.savez(Path(out_dir) / f"rank{rank}.npz", params=params, **arrays)
    metrics = [{k: v for k, v in e.items() if k.startswith("lze/") or k == "loss"} for e in trainer.state.log_history]
    info = {"counters": counters, "grad_rows": rows["n"], "world": trainer.accelerator.num_processes, "log": metrics}
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(info))


if __name__ == "__main__":
    main(sys.argv[1], mode=sys.argv[2] if len(sys.argv) > 2 else "select")
