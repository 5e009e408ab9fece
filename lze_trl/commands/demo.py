"""`lze-trl demo`: a short LZE training on a tiny offline model, printing what the selection did."""

from __future__ import annotations

import argparse
import os

from datasets import Dataset


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lze-trl demo", description=__doc__)
    parser.add_argument("--output-dir", default="outputs/demo", help="Where the run writes its files.")
    parser.add_argument("--steps", type=int, default=20, help="Optimizer steps.")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("WANDB_MODE", "offline")
    from lze_trl import LZEGRPOConfig, LZEGRPOTrainer
    from lze_trl.tasks.arithmetic import CHARSET, arithmetic_reward, make_dataset
    from lze_trl.tiny import char_tokenizer, tiny_qwen2

    tokenizer = char_tokenizer(CHARSET)
    train: Dataset = make_dataset(256, seed=args.seed, split="train")
    config = LZEGRPOConfig(
        output_dir=args.output_dir,
        per_device_train_batch_size=16,
        gradient_accumulation_steps=2,
        num_generations=4,
        max_completion_length=6,
        max_steps=args.steps,
        learning_rate=5e-3,
        logging_steps=5,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=args.seed,
        temperature=1.0,
    )
    trainer = LZEGRPOTrainer(
        model=tiny_qwen2(tokenizer, hidden_size=64),
        reward_funcs=arithmetic_reward,
        args=config,
        train_dataset=train,
        processing_class=tokenizer,
    )
    trainer.train()
    rows = [e for e in trainer.state.log_history if "lze/selected_frac" in e]
    print(f"\n{'step':>5} {'pass_rate':>9} {'dead':>6} {'selected':>8} {'tokens_saved':>12}")
    for e in rows:
        print(
            f"{e['step']:>5} {e['lze/pass_rate_mean']:>9.3f} {e['lze/dead_frac']:>6.2f} "
            f"{e['lze/selected_frac']:>8.2f} {e['lze/update_tokens_saved_frac']:>12.2f}"
        )
    table = trainer.prompt_table()
    print(f"\n{len(table)} prompts observed; per-prompt state and selection log written to {args.output_dir}/")
    return 0
