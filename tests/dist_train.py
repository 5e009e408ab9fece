"""Two-process CPU run for tests/test_distributed.py: `torchrun --nproc_per_node 2 tests/dist_train.py OUT_DIR`."""

import sys

from testing_utils import (
    count_grad_rows,
    end_distributed,
    flat_parameters,
    mixed_reward,
    prompt_dataset,
    save_rank_results,
    tiny_config,
)

from lze_trl import LZEGRPOTrainer
from lze_trl.tiny import char_tokenizer, tiny_qwen2


def main(out_dir: str, mode: str) -> None:
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    rows = count_grad_rows(model)
    args = tiny_config(
        out_dir,
        gradient_accumulation_steps=2,
        max_steps=8 if mode in ("rollout", "replay") else 4,  # rollout: past epoch 0, where skipping starts
        learning_rate=1e-2,
        prune_solved=mode == "prune",
        prune_solved_after=1,
        rollout_filter="lze" if mode == "rollout" else "none",
        rollout_filter_audit=0.5,  # seeded draws: both ranks must take the same ones
        # replay: each rank generates the first of its 2 candidate groups, the update takes up to 2 groups of the 4
        # candidates from the fresh ones and the buffer; the buffer's rows stay on their rank
        **(dict(fresh_fraction=0.5, selection_ratio=0.5) if mode == "replay" else {}),
    )
    # mixed_reward: prompt i passes on (i % 9) of 8 completion buckets, so i = 0 never passes and i = 8 always does
    trainer = LZEGRPOTrainer(
        model=model, reward_funcs=mixed_reward, args=args, train_dataset=prompt_dataset(16), processing_class=tokenizer
    )
    trainer.train()
    extra = {}
    if mode == "replay":  # the buffer's metadata (and so every replay decision) must be the same on both ranks
        extra["replay_owned_rows"] = sorted(int(k) for k in trainer.lze.replay.rows)
    save_rank_results(trainer, out_dir, flat_parameters(trainer.model), grad_rows=rows["rows"], **extra)


if __name__ == "__main__":
    main(sys.argv[1], mode=sys.argv[2] if len(sys.argv) > 2 else "select")
    end_distributed()
