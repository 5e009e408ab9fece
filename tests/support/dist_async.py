"""Two-process CPU run of `LZEAsyncGRPOTrainer` for tests/async/test_async_lze.py:
`torchrun --nproc_per_node 2 tests/support/dist_async.py OUT_DIR`. The main process draws, decides and dispatches
(TRL's async trainer reads its worker's queue there only); both processes train on what it dispatched."""

import json
import os
import sys

import numpy as np
import torch
from datasets import Dataset

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl.async_grpo.trainer import LZEAsyncGRPOConfig, LZEAsyncGRPOTrainer
from lze_trl.testing.async_stand_ins import InProcessWeightTransfer, StandInRolloutWorker


def correct(completions, **kwargs):
    return [float(c == "1") for c in completions]


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    tokenizer = char_tokenizer()
    path = f"{out_dir}/tiny{os.environ['RANK']}"
    rates = [0.0, 0.5, 1.0, 0.25, 0.75, 0.5, 0.0, 0.5]
    dataset = Dataset.from_dict({"prompt": [f"q{i}=" for i in range(8)], "pass_rate": rates})
    # every process saves and loads its own copy, before the config starts the process group (transformers then saves
    # the model's config on the main process only)
    tiny_qwen2(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    args = LZEAsyncGRPOConfig(
        output_dir=f"{out_dir}/out", use_cpu=True, report_to="none", max_steps=3, num_generations=4, token_budget=0,
        logging_steps=1, save_strategy="no", learning_rate=0.05, selection_noise=0.0, per_device_train_batch_size=4,
        selection_ratio=0.5, window_groups=4,
    )  # fmt: skip
    policy = tiny_qwen2(tokenizer)
    worker = StandInRolloutWorker(policy, tokenizer, dataset, [correct])
    trainer = LZEAsyncGRPOTrainer(
        path, [correct], args=args, train_dataset=dataset, processing_class=tokenizer, rollout_worker=worker,
        weight_transfer=InProcessWeightTransfer(policy),
    )  # fmt: skip
    trainer.train()
    rank = trainer.accelerator.process_index
    weights = torch.cat([p.detach().flatten() for p in trainer.model.parameters()]).numpy()
    np.save(f"{out_dir}/weights{rank}.npy", weights)
    info = {
        "world": trainer.accelerator.num_processes,
        "step": trainer.state.global_step,
        "decisions": [list(d) for d in trainer.lze_window.decisions],
        "batches_recorded": trainer.lze.batches_recorded,
        "trained_groups": sorted(int(g) for g in trainer._trained_groups),
        "log": [e for e in trainer.state.log_history if "lze/selected_frac" in e],
    }
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(info, f)


if __name__ == "__main__":
    main(sys.argv[1])
