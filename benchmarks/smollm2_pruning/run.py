"""The SmolLM2 pruning study (issue #71; BENCHMARKS.md section 14 once it reports): does forward pruning on both sides,
which skips the prompts history predicts dead before they are generated, buy GRPO's learning for fewer generated
rollouts on SmolLM2-135M-Instruct? Judged at equal generated rollouts.

    python benchmarks/smollm2_pruning/run.py jobs [--seeds N] [--arms A,B]  # runs not yet in results: `ARM SEED`
    python benchmarks/smollm2_pruning/run.py train ARM SEED                 # one run, its evaluations included
    python benchmarks/smollm2_pruning/report.py                             # report.md from the raw results

The protocol is `benchmarks/results/smollm2_pruning/protocol.md`, committed before the runs; its settings are
`PRUNING`, `PROTOCOL` and `ARMS` here. The model, the 32-prompt pool, the test and the completion length are the
revisit study's (`benchmarks/smollm2_revisits/`, BENCHMARKS.md section 13: its `start.json`), in float32. A run trains
at a constant learning rate until it has generated `rollout_budget` rollouts and made `equal_steps` steps; its test
accuracy is measured after step `equal_steps` and when its generated rollouts first reach `rollout_budget`. Each run
writes `runs/<arm>/seed_<k>.json` atomically when it has finished; finished runs are skipped, so the queue resumes
across sessions. The runs go from a git worktree of the protocol's commit (`--results` pointing at this checkout's
results), one torch thread each, two at a time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "smollm2_pruning"
REVISITS = ROOT / "benchmarks" / "results" / "smollm2_revisits"
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from benchmarks.smollm2_revisits import run as revisits  # noqa: E402  (model, pool, evaluation, time model)
from benchmarks.smollm2_study import run as study  # noqa: E402


PRUNING: dict[str, Any] = {
    "prune_solved": True,
    "prune_solved_after": 1,
    "prune_unsolved": True,
    "prune_unsolved_after": 1,
    "prune_exploration": "adaptive",
    "prune_target_dead_frac": 0.1,
}
"""Forward pruning on both sides: a prompt whose last group was dead (either side) is predicted dead; the adaptive
exploration toward a dead share of 0.1 (the issue's target). This study's runs, the addition study's and the unsolved
side's were made at their protocols' commits, where `p` moved by `prune_exploration_step=0.05` after every generation
batch; that rule swung (BENCHMARKS.md section 14) and was replaced by the move once an epoch, which this file now
runs: reproduce those runs from their protocols' commits."""
PROTOCOL: dict[str, Any] = {
    **{k: revisits.PROTOCOL[k] for k in ("train_prompts", "test_per_level", "num_generations", "temperature")},
    **{k: revisits.PROTOCOL[k] for k in ("learning_rate", "lr_scheduler_type", "long_completion_length")},
    "prompts_per_step": 8,  # B: the revisit study's
    "small_prompts_per_step": 5,  # B' = about B x (1 - GRPO's dead share 0.386)
    "rollout_budget": 1024,  # R: GRPO's rollouts in 16 steps at B (16 x 8 x 8)
    "equal_steps": 16,
    "step_cap": 60,
    "pool_samples": revisits.PROTOCOL["pool_samples"],
    "bf16": False,  # float32: this machine's CPU has no bf16 instructions (a bf16 matmul runs at 1/65 of float32's)
}
ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "grpo_small": {"selector": "none", "prompts_per_step": 5},
    "grpo_prune_small": {"selector": "none", "prompts_per_step": 5, **PRUNING},
    "grpo_prune": {"selector": "none", **PRUNING},
    "lze": {"selector": "lze", "selection_ratio": 0.4},
    "lze_prune": {"selector": "lze", "selection_ratio": 0.4, **PRUNING},
}
"""GRPO at B; GRPO at B' (the control: as many prompts, chosen at random by the epoch order); GRPO with the pruning at
B' (about GRPO's live groups for B'/B of its rollouts); GRPO with the pruning at B (refilled: more live groups for
the same rollouts); LZE and LZE with the pruning at B."""
PILOT = ["grpo_prune_small", "grpo_small", "grpo"]
"""The arms of the declared tests, whose pilot seeds size the study; the other arms follow."""


def protocol(results: Path = REVISITS) -> dict[str, Any]:
    """`PROTOCOL` with the revisit study's completion length (its `start.json`)."""
    return {**PROTOCOL, "max_completion_length": revisits.protocol(results)["max_completion_length"]}


def train(arm: str, seed: int, data: dict[str, Any]) -> dict[str, Any]:
    """One run of `arm` to the rollout budget; its record (see the module's docstring)."""
    from transformers import TrainerCallback

    p = protocol()
    budget = p["rollout_budget"]
    trainer, clock, tokenizer = revisits.make_run(arm, seed, data, p, p["step_cap"], ARMS[arm], bf16=p["bf16"])
    steps: list[dict[str, Any]] = []
    evaluations: list[dict[str, Any]] = []

    class Budget(TrainerCallback):
        """Counts each step's generated rollouts; evaluates after step `equal_steps` and when the generated rollouts
        first reach R; stops once both are past."""

        rollouts = 0.0

        def on_step_end(self, args, state, control, **kwargs):
            work = meter.step()
            before, self.rollouts = self.rollouts, self.rollouts + work["rollouts"]
            steps.append({**clock.steps[-1], **work, "total_rollouts": self.rollouts})
            points = ["budget"] if before < budget <= self.rollouts else []
            if state.global_step == p["equal_steps"]:
                points.append("equal_steps")
            if points:
                result = revisits.evaluate(trainer.model, tokenizer, data, p["max_completion_length"], final=False)
                evaluations.append({"points": points, "step": state.global_step, "rollouts": self.rollouts, **result})
            if self.rollouts >= budget and state.global_step >= p["equal_steps"]:
                control.should_training_stop = True
            return control

    meter = revisits.StepWork(trainer)
    trainer.add_callback(Budget())
    trainer.train()
    return {
        "arm": arm,
        "seed": seed,
        "settings": ARMS[arm],
        "protocol": p,
        **revisits.run_record(trainer, data),
        "reached_budget": bool(steps and steps[-1]["total_rollouts"] >= budget),
        "steps": steps,
        "evaluations": evaluations,
        "pruner": None
        if trainer.lze.pruner is None
        else {k: v.tolist() for k, v in trainer.lze.pruner.state_dict().items()},
    }


def jobs(seeds: int, arms: list[str], results: Path) -> list[tuple[str, int]]:
    """The runs of `arms`, seeds `0..seeds-1`, seed by seed, not yet in `results`."""
    return [
        (arm, seed)
        for seed in range(seeds)
        for arm in arms
        if not (results / "runs" / arm / f"seed_{seed}.json").exists()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["jobs", "train"])
    parser.add_argument("arm", nargs="?", choices=list(ARMS))
    parser.add_argument("seed", nargs="?", type=int)
    parser.add_argument("--seeds", type=int, default=3, help="jobs: seeds 0..N-1")
    parser.add_argument("--arms", default=",".join(PILOT), help="jobs: the arms, comma-separated")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.what == "jobs":
        for arm, seed in jobs(args.seeds, args.arms.split(","), args.results):
            print(arm, seed)
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
