"""The SmolLM2 pruning study's harness (benchmarks/smollm2_pruning/run.py): its arms are valid configs that prune as
the protocol says, and its queue goes seed by seed, skipping finished runs."""

import json

import pytest

from benchmarks.smollm2_pruning import run
from lze_trl import LZEGRPOConfig


@pytest.mark.parametrize("arm", list(run.ARMS))
def test_every_arm_is_a_valid_config(tmp_path, arm):
    settings = dict(run.ARMS[arm])
    prompts = settings.pop("prompts_per_step", run.PROTOCOL["prompts_per_step"])
    args = LZEGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=prompts * 8, num_generations=8,
                         use_cpu=True, report_to="none", **settings)  # fmt: skip
    pruned = "prune" in arm
    assert (args.prune_solved, args.prune_unsolved) == (pruned, pruned)
    assert args.per_device_train_batch_size // 8 == (5 if "small" in arm else 8)


def test_the_small_arms_generate_the_budget_in_whole_steps_and_the_pilot_runs_the_tests_arms():
    p = run.PROTOCOL
    assert p["rollout_budget"] == p["equal_steps"] * p["prompts_per_step"] * p["num_generations"]
    assert p["small_prompts_per_step"] == run.ARMS["grpo_small"]["prompts_per_step"]
    assert run.ARMS["grpo_prune_small"] == {**run.ARMS["grpo_small"], **run.PRUNING}
    assert set(run.PILOT) == {"grpo", "grpo_small", "grpo_prune_small"}


def test_jobs_go_seed_by_seed_and_skip_finished_runs(tmp_path):
    (tmp_path / "runs" / "grpo_small").mkdir(parents=True)
    (tmp_path / "runs" / "grpo_small" / "seed_0.json").write_text(json.dumps({}))
    jobs = run.jobs(2, run.PILOT, tmp_path)
    assert jobs == [("grpo_prune_small", 0), ("grpo", 0), ("grpo_prune_small", 1), ("grpo_small", 1), ("grpo", 1)]
