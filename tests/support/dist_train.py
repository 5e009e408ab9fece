"""Two-process CPU run for tests/distributed/test_distributed.py: `torchrun --nproc_per_node 2
tests/support/dist_train.py OUT_DIR`."""

import sys

from testing_utils import (
    count_grad_rows,
    end_distributed,
    flat_parameters,
    mixed_reward,
    prompt_dataset,
    save_rank_results,
    sided_reward,
    tiny_config,
)

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl import LZEGRPOTrainer


def main(out_dir: str, mode: str) -> None:
    tokenizer = char_tokenizer()
    model = tiny_qwen2(tokenizer)
    rows = count_grad_rows(model)
    # "select": LZE's selection; "prune": forward pruning of solved prompts; "prune-both": both sides with adaptive
    # exploration (4 prompts a step, sided_reward: a third always solved, a third never); "prune-skip": the same
    # without refilling the steps (8 prompts a generation batch, 4 a rank); "shadow": trains as GRPO, logs what LZE
    # would keep and skip; "resume": LZE resumed from its checkpoint of step 2 on both ranks
    reward, settings = mixed_reward, {}
    if mode == "shadow":  # the same metrics on both ranks
        reward, settings = sided_reward, dict(shadow=True, max_steps=8, prune_solved_after=1)
    if mode == "prune-both":
        reward = sided_reward
        settings = dict(per_device_train_batch_size=8, gradient_accumulation_steps=1, max_steps=10,
                        prune_unsolved=True, prune_exploration="adaptive")  # fmt: skip
    if mode == "prune-skip":  # both sides skipped at each step without refilling it, as many groups on each rank
        reward = sided_reward
        settings = dict(max_steps=10, prune_unsolved=True, prune_exploration="adaptive", prune_refill=False)
    if mode == "resume":
        settings = dict(save_strategy="steps", save_steps=2)
    dataset = prompt_dataset(16)
    args = tiny_config(
        out_dir,
        **{
            "gradient_accumulation_steps": 2,
            "max_steps": 4,
            "learning_rate": 1e-2,
            "prune_solved": mode in ("prune", "prune-both", "prune-skip"),
            "prune_solved_after": 1,
            **settings,
        },
    )
    # mixed_reward: prompt i passes on (i % 9) of 8 completion buckets, so i = 0 never passes and i = 8 always does
    trainer = LZEGRPOTrainer(
        model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    trainer.train()
    info = {}
    if mode == "resume":
        args.output_dir = f"{out_dir}/resumed"
        model = tiny_qwen2(tokenizer)  # its weights come from the checkpoint
        resumed = LZEGRPOTrainer(model, reward, args=args, train_dataset=dataset, processing_class=tokenizer)
        resumed.train(resume_from_checkpoint=f"{out_dir}/checkpoint-2")
        info["resumed_equals_full"] = bool((flat_parameters(resumed.model) == flat_parameters(trainer.model)).all())
        after = lambda t: [e.get("lze/energy_mean") for e in t.state.log_history if e.get("step", 0) > 2]  # noqa: E731
        info["resumed_log_equals_full"] = after(resumed) == after(trainer) and len(after(trainer)) > 0
    params = flat_parameters(trainer.model)
    save_rank_results(trainer, out_dir, params, log_keys=("loss",), grad_rows=rows["rows"], **info)


if __name__ == "__main__":
    main(sys.argv[1], mode=sys.argv[2] if len(sys.argv) > 2 else "select")
    end_distributed()
