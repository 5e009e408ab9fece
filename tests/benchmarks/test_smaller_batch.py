"""The smaller-batch study's harness and report (benchmarks/smaller_batch/): its arms reach the rollout budget at
step 150 (B) and 240 (B'), on seeds no earlier study ran; the manipulation check reads both shares of each pruned arm
against the smaller batch's."""

import pytest

from benchmarks.addition_pruning import run as harness
from benchmarks.smaller_batch import report, run
from lze_trl import LZEGRPOConfig
from tests.benchmarks.test_epoch_exploration import later


@pytest.mark.parametrize("arm", list(run.ARMS))
def test_every_arm_is_a_valid_config_that_reaches_the_budget(tmp_path, arm):
    prompts = harness.config(arm, 24, run.ARMS).prompts_per_step  # the harness's DemoConfig field, not the trainer's
    settings = {k: v for k, v in run.ARMS[arm].items() if k != "prompts_per_step"}
    args = LZEGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=prompts * 8, num_generations=8,
                         use_cpu=True, report_to="none", **settings)  # fmt: skip
    assert (args.prune_solved, args.prune_unsolved) == (arm != "grpo_small",) * 2
    assert (prompts, harness.steps(arm, run.ARMS)) == ((64, 150) if arm == "grpo_prune" else (40, 240))


def test_the_jobs_are_fresh_seeds(tmp_path):
    jobs = harness.jobs(run.SEEDS, list(run.ARMS), tmp_path, run.FIRST_SEED)
    assert {seed for _, seed in jobs} == set(range(24, 40)) and len(jobs) == 48
    harness.write(harness.path(tmp_path, "grpo_small", 24), {"arm": "grpo_small"})
    assert ("grpo_small", 24) not in harness.jobs(run.SEEDS, list(run.ARMS), tmp_path, run.FIRST_SEED)


def test_the_check_needs_both_shares_of_each_pruned_arm_at_most_half_of_the_smaller_batch_s():
    runs = {"grpo_small": {0: later(False, [0.0, 0.0, 0.5, 0.5]), 1: later(True, [0.5] * 4)},
            "grpo_prune": {0: later(False, [0.0, 0.5, 0.5, 0.5]), 1: later(False, [0.5] * 4)},
            "grpo_prune_small": {0: later(False, [0.0, 0.5, 0.5, 0.5]), 1: later(True, [0.5] * 4)}}  # fmt: skip
    # the smaller batch: 2 of 8 later visits all wrong, 4 of 8 after an all-right group; grpo_prune 1 and 0 of 8;
    # grpo_prune_small 1 of 8 all wrong but still 4 of 8 after an all-right group (its solved side did not act)
    assert report.manipulation(runs)[1] == {"grpo_prune": True, "grpo_prune_small": False}
    runs["grpo_prune"][0] = later(False, [0.0, 0.0, 0.0, 0.5])  # 3 of 8 all wrong
    assert report.manipulation(runs)[1] == {"grpo_prune": False, "grpo_prune_small": False}


def test_the_committed_report_rebuilds_from_the_committed_runs():
    assert report.main(["--check"]) == 0
