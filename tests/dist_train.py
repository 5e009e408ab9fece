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

from lze_trl import LZEGRPOConfig, LZEGRPOTrainer
from lze_trl.tiny import char_tokenizer, tiny_qwen2


def main(out_dir: str, mode: str) -> None:
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    rows = count_grad_rows(model)
    experimental = {
        # rollout: skipping starts past epoch 0; seeded audits: both ranks must draw the same ones
        "rollout": dict(rollout_filter="lze", rollout_filter_audit=0.5),
        # replay: each rank generates the first of its 2 candidate groups, the update takes up to 2 groups of the 4
        # candidates from the fresh ones and the buffer; the buffer's rows stay on their rank
        "replay": dict(fresh_fraction=0.5, selection_ratio=0.5),
    }.get(mode)
    # probe: each rank probes its 4 prompts with 2 rollouts, both complete the same number of groups
    probe = dict(probe_generations=2, per_device_train_batch_size=16) if mode == "probe" else {}
    trainer_class, config_class = LZEGRPOTrainer, LZEGRPOConfig
    if experimental is not None:  # the modes outside the package, through its plugin hooks
        from benchmarks.experimental import ExperimentalConfig, ExperimentalLZETrainer

        trainer_class, config_class = ExperimentalLZETrainer, ExperimentalConfig
    args = tiny_config(
        out_dir,
        config_class=config_class,
        gradient_accumulation_steps=2,
        max_steps=8 if experimental else 4,
        learning_rate=1e-2,
        prune_solved=mode == "prune",
        prune_solved_after=1,
        **(experimental or {}),
        **probe,
    )
    # mixed_reward: prompt i passes on (i % 9) of 8 completion buckets, so i = 0 never passes and i = 8 always does
    trainer = trainer_class(
        model=model, reward_funcs=mixed_reward, args=args, train_dataset=prompt_dataset(16), processing_class=tokenizer
    )
    trainer.train()
    extra = {}
    if mode == "replay":  # the buffer's metadata (and so every replay decision) must be the same on both ranks
        extra["replay_owned_rows"] = sorted(int(k) for k in trainer.replay.rows)
    save_rank_results(trainer, out_dir, flat_parameters(trainer.model), grad_rows=rows["rows"], **extra)


if __name__ == "__main__":
    main(sys.argv[1], mode=sys.argv[2] if len(sys.argv) > 2 else "select")
    end_distributed()
