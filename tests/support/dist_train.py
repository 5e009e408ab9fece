"""Two-process CPU run for tests/distributed/test_distributed.py: `torchrun --nproc_per_node 2
tests/support/dist_train.py OUT_DIR`."""

import sys

from datasets import Dataset
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
    # probe: each rank probes its 4 prompts with 2 rollouts, both complete the same number of groups; with a
    # rollout_func (its extra fields read by the reward) in "probe-rollout-func", an environment_factory (tools and
    # reward of the environment, a scripted tool caller) in "probe-environment"; the adaptive budget in "rounds", with
    # tools in "rounds-tools"; the probe's rounds one call after another in "probe-serial" (else fused); a fused run
    # resumed from its checkpoint of step 2, its rollouts in flight each rank's own, in "probe-resume"; forward
    # pruning on both sides with adaptive exploration, history deciding before the probe's first round, in
    # "prune-both" (4 prompts a step, sided_reward: a third always solved, a third never); the same without refilling
    # the steps in "prune-skip" (8 prompts a generation batch, 4 a rank)
    probe = (
        dict(generation_rounds=[2, 4], round_policy="probe", per_device_train_batch_size=16, fuse_rounds=True)
        if mode.startswith("probe")
        else {}
    )
    if mode.startswith("rounds"):
        probe = dict(generation_rounds=[1, 2, 4], per_device_train_batch_size=16, fuse_rounds=True)
    if mode == "probe-serial":
        probe["fuse_rounds"] = False
    if mode == "probe-resume":
        probe.update(save_strategy="steps", save_steps=2)
    reward, extra, dataset, trainer_class = mixed_reward, {}, prompt_dataset(16), LZEGRPOTrainer
    if mode == "probe-rollout-func":
        from test_probe_agentic import counting_rollout_func

        def reward(completions, tag, **kwargs):
            return [float(c[:1] in "02468") for c in completions]

        extra = dict(rollout_func=counting_rollout_func([]))
    if mode in ("probe-environment", "rounds-tools"):
        from test_drop_in import CountingEnv, tool_tokenizer
        from test_probe_agentic import AddingEnv, SometimesCallsTool, tool_answer_reward

        tokenizer, trainer_class = tool_tokenizer(), SometimesCallsTool
        model = tiny_qwen2(tokenizer, max_position_embeddings=4096)
        rows = count_grad_rows(model)
        probe["max_completion_length"] = 256
        if mode == "probe-environment":
            dataset = Dataset.from_dict({"question": [f"{i}+{i % 7}" for i in range(16)]})
            reward, extra = [], dict(environment_factory=AddingEnv)
        else:
            dataset = Dataset.from_dict(
                {"prompt": [[{"role": "user", "content": f"{i}+{i % 7}="}] for i in range(16)]}
            )
            reward, extra = tool_answer_reward, dict(tools=[CountingEnv().add])
    if mode == "shadow":  # trains as GRPO, logs what LZE would keep and skip: the same metrics on both ranks
        reward, probe = sided_reward, dict(shadow=True, max_steps=8, prune_solved_after=1)
    if mode == "prune-both":
        reward = sided_reward
        probe = dict(generation_rounds=[2, 4], round_policy="probe", per_device_train_batch_size=8,
                     gradient_accumulation_steps=1, max_steps=10, prune_unsolved=True,
                     prune_exploration="adaptive")  # fmt: skip
    if mode == "prune-skip":  # both sides skipped at each step without refilling it, as many groups on each rank
        reward = sided_reward
        probe = dict(max_steps=10, prune_unsolved=True, prune_exploration="adaptive", prune_refill=False)
    args = tiny_config(
        out_dir,
        **{
            "gradient_accumulation_steps": 2,
            "max_steps": 4,
            "learning_rate": 1e-2,
            "prune_solved": mode in ("prune", "prune-both", "prune-skip"),
            "prune_solved_after": 1,
            **probe,
        },
    )
    # mixed_reward: prompt i passes on (i % 9) of 8 completion buckets, so i = 0 never passes and i = 8 always does
    trainer = trainer_class(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        **extra,
    )
    trainer.train()
    logged, info = ("loss", "tools/call_frequency"), {}
    if mode == "probe-resume":
        args.output_dir = f"{out_dir}/resumed"
        model = tiny_qwen2(tokenizer)  # its weights come from the checkpoint
        resumed = trainer_class(model, reward, args=args, train_dataset=dataset, processing_class=tokenizer)
        resumed.train(resume_from_checkpoint=f"{out_dir}/checkpoint-2")
        info["resumed_equals_full"] = bool((flat_parameters(resumed.model) == flat_parameters(trainer.model)).all())
        after = lambda t: [e.get("lze/energy_mean") for e in t.state.log_history if e.get("step", 0) > 2]  # noqa: E731
        info["resumed_log_equals_full"] = after(resumed) == after(trainer) and len(after(trainer)) > 0
    params = flat_parameters(trainer.model)
    save_rank_results(trainer, out_dir, params, log_keys=logged, grad_rows=rows["rows"], **info)


if __name__ == "__main__":
    main(sys.argv[1], mode=sys.argv[2] if len(sys.argv) > 2 else "select")
    end_distributed()
