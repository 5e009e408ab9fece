"""The skip-mode study (BENCHMARKS.md section 16, issue #83): GRPO, the dead-group filter, the filter skipping the
prompts forward pruning predicts dead without refilling the step (`prune_refill=False`), LZE, and LZE skipping them,
training SmolLM2-135M-Instruct on the revisit study's pool of 32 word problems at equal steps.

    python benchmarks/skip_mode/run.py jobs [--seeds N] [--first_seed K] [--arms a,b]  # runs not yet in results
    python benchmarks/skip_mode/run.py train ARM SEED [--results DIR]                   # one run, its evaluation
    python benchmarks/skip_mode/report.py                                                # report.md from the runs

The protocol is `benchmarks/results/skip_mode/protocol.md`, committed before the runs; its settings are `PROTOCOL`,
`SKIP` and `ARMS` here. The model, the pool, the test and the completion length are the revisit study's
(`benchmarks/smollm2_revisits/`, BENCHMARKS.md section 13: its `start.json`), in float32. Every run generates with
common random numbers (`benchmarks/skip_mode/crn.py`): a rollout's sampling noise is a function of the seed, the step,
its prompt and its index in the group, so that two arms generating a prompt at a step with the same weights draw the
same rollouts. A run trains `equal_steps` steps at a constant learning rate and is evaluated after steps 12 and 16
(`eval_steps`) on the whole held-out test (400 questions, every level). Each run writes `runs/<arm>/seed_<k>.json`
atomically when it has finished (its per-step work, logs, selection log with prompt keys, evaluation); finished runs
are skipped, so the queue resumes across sessions. The runs go from a git worktree of the protocol's commit
(`--results` pointing at this checkout's results), one torch thread each, two at a time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "skip_mode"
REVISITS = ROOT / "benchmarks" / "results" / "smollm2_revisits"
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from benchmarks.skip_mode.crn import with_common_random_numbers  # noqa: E402
from benchmarks.smollm2_revisits import run as revisits  # noqa: E402  (model, pool, evaluation)
from benchmarks.smollm2_study import run as study  # noqa: E402


SKIP: dict[str, Any] = {
    "prune_unsolved": True,
    "prune_unsolved_after": 2,
    "prune_exploration": "replay",
    "prune_explore_fraction": 0.1,
    "prune_refill": False,
}
"""The skip mode the study runs: the unsolved side (a prompt whose last two groups were all wrong is predicted dead
and not generated), a tenth of the pool explored each epoch, the step not refilled. Chosen before the runs on the
revisit study's committed GRPO runs replayed offline (`benchmarks/skip_mode/replay.py`, `replay.md`): after one
all-wrong group the rule skips 0.380 of the later visits and loses 0.091 of their live groups, after two 0.226 and
0.044; the solved side is almost never dead on this pool (0.007 of later visits after one all-right group)."""
PROTOCOL: dict[str, Any] = {
    **{k: revisits.PROTOCOL[k] for k in ("train_prompts", "test_per_level", "num_generations", "temperature")},
    **{k: revisits.PROTOCOL[k] for k in ("learning_rate", "lr_scheduler_type")},
    "prompts_per_step": 8,  # 4 steps an epoch: each prompt visited 4 times in 16 steps
    "equal_steps": 16,
    "eval_steps": [12, 16],  # 12: GRPO's rollouts there are the skip arms' at 16 if they skip a quarter after epoch 0
    "bf16": False,  # float32: this machine's CPU has no bf16 instructions
}
ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none", "shadow": True, "prune_solved_after": 1, "prune_unsolved_after": 2},
    "filter": {"selector": "lze", "selection_ratio": 1.0},
    "skip_filter": {"selector": "lze", "selection_ratio": 1.0, **SKIP},
    "lze": {"selector": "lze", "selection_ratio": 0.4},
    "lze_skip": {"selector": "lze", "selection_ratio": 0.4, **SKIP},
}
"""GRPO (in shadow mode: it trains exactly as `GRPOTrainer` and logs which groups the skip rule, and the solved side's
rule after one all-right group, would have skipped and how many of them were live); the dead-group filter (every live
group, `selection_ratio=1.0`); the filter with the skip mode (differs from the filter only by the live groups it
mispredicts and the rollouts it saves); LZE at its default quota; LZE with the skip mode."""
FIRST = ["grpo", "skip_filter", "filter"]
"""The arms of the declared tests and of the manipulation check, run first, seed by seed; LZE's arms follow."""


def protocol(results: Path = REVISITS) -> dict[str, Any]:
    """`PROTOCOL` with the revisit study's completion length (its `start.json`)."""
    return {**PROTOCOL, "max_completion_length": revisits.protocol(results)["max_completion_length"]}


def train(arm: str, seed: int, data: dict[str, Any]) -> dict[str, Any]:
    """One run of `arm`: `equal_steps` steps with common random numbers, then the evaluation; its record."""
    from transformers import TrainerCallback

    p = protocol()
    trainer, clock, tokenizer = revisits.make_run(arm, seed, data, p, p["equal_steps"], ARMS[arm], bf16=p["bf16"])
    trainer = with_common_random_numbers(trainer, seed, data["train"])
    steps: list[dict[str, Any]] = []
    evaluations: list[dict[str, Any]] = []

    class Work(TrainerCallback):
        """Each step's work (rollouts generated, the update's tokens), and the evaluations at `eval_steps`."""

        def on_step_end(self, args, state, control, **kwargs):
            steps.append({**clock.steps[-1], **meter.step()})
            if state.global_step in p["eval_steps"]:
                result = revisits.evaluate(trainer.model, tokenizer, data, p["max_completion_length"], final=False)
                rollouts = sum(s["rollouts"] for s in steps)
                evaluations.append({"step": state.global_step, "rollouts": rollouts, **result})
            return control

    meter = revisits.StepWork(trainer)
    trainer.add_callback(Work())
    trainer.train()
    return {
        "arm": arm,
        "seed": seed,
        "settings": ARMS[arm],
        "protocol": p,
        **revisits.run_record(trainer, data),
        "steps": steps,
        "evaluations": evaluations,
        "pruner": None
        if trainer.lze.pruner is None
        else {k: v.tolist() for k, v in trainer.lze.pruner.state_dict().items()},
    }


def jobs(seeds: int, first_seed: int, arms: list[str], results: Path) -> list[tuple[str, int]]:
    """The runs of `arms`, seeds `first_seed..first_seed+seeds-1`, seed by seed, not yet in `results`."""
    return [
        (arm, seed)
        for seed in range(first_seed, first_seed + seeds)
        for arm in arms
        if not (results / "runs" / arm / f"seed_{seed}.json").exists()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["jobs", "train"])
    parser.add_argument("arm", nargs="?", choices=list(ARMS))
    parser.add_argument("seed", nargs="?", type=int)
    parser.add_argument("--seeds", type=int, default=2, help="jobs: this many seeds")
    parser.add_argument("--first_seed", type=int, default=0, help="jobs: from this seed")
    parser.add_argument("--arms", default=",".join(FIRST), help="jobs: the arms, comma-separated")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.what == "jobs":
        for arm, seed in jobs(args.seeds, args.first_seed, args.arms.split(","), args.results):
            print(arm, seed, "--results", args.results)
        return 0
    if args.arm is None or args.seed is None:
        parser.error("train needs an ARM and a SEED")
    from lze_trl.common.engines import apply_thread_policy

    apply_thread_policy()
    path = args.results / "runs" / args.arm / f"seed_{args.seed}.json"
    if not path.exists():
        study.write(path, train(args.arm, args.seed, revisits.splits()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
