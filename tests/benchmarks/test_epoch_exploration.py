"""The epoch-exploration study's harness and report (benchmarks/epoch_exploration/): its arms at B reach the rollout
budget at step 150, GRPO's control is the unsolved-side study's runs only when this study's reruns equal them, the
manipulation check reads each side's share against GRPO's, and a void test stays in the Holm family."""

import copy

import pytest

from benchmarks.addition_pruning import run as harness
from benchmarks.epoch_exploration import report, run
from lze_trl import LZEGRPOConfig
from tests.benchmarks.test_unsolved_pruning import record


@pytest.mark.parametrize("arm", list(run.ARMS))
def test_every_arm_is_a_valid_config_at_b_that_reaches_the_budget_at_step_150(tmp_path, arm):
    args = LZEGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=64 * 8, num_generations=8,
                         use_cpu=True, report_to="none", **run.ARMS[arm])  # fmt: skip
    assert (args.prune_solved, args.prune_unsolved) == (arm == "grpo_prune", arm != "grpo")
    assert harness.steps(arm, run.ARMS) == 150 and harness.config(arm, 3, run.ARMS).prompts_per_step == 64
    assert args.prune_exploration == ("adaptive" if arm != "grpo" else "replay")


def later(previous_right: bool, now: list[float]) -> dict:
    """A record whose prompts 0-3 were all right (or all wrong) at their first visit and `now` at their second."""
    out = record(0.8, now)
    out["selection_log"]["pass_rate"][:4] = [1.0 if previous_right else 0.0] * 4
    return out


def test_the_check_needs_each_pruned_side_at_most_half_of_grpo_s():
    runs = {"grpo": {0: later(False, [0.0, 0.0, 0.5, 0.5])},
            "grpo_prune_unsolved": {0: later(False, [0.0, 0.5, 0.5, 0.5])},
            "grpo_prune": {0: later(False, [0.0, 0.5, 0.5, 0.5])}}  # fmt: skip
    runs["grpo"][1] = later(True, [0.5] * 4)  # GRPO: 2 of 8 later visits all wrong, 4 of 8 after an all-right group
    runs["grpo_prune"][1] = later(True, [0.5] * 4)  # as many: the solved side's rule did not act
    runs["grpo_prune_unsolved"][1] = later(False, [0.5] * 4)  # pooled: 1 of 8 all wrong, half of GRPO's 2 of 8
    lines, valid = report.manipulation(runs, {}, same=True)
    assert valid == {"grpo_prune_unsolved": True, "grpo_prune": False}
    runs["grpo_prune"][1] = later(False, [0.5] * 4)
    assert report.manipulation(runs, {}, same=True)[1] == {"grpo_prune_unsolved": True, "grpo_prune": True}
    runs["grpo_prune_unsolved"][0] = later(False, [0.0, 0.0, 0.0, 0.5])  # 3 of 8 all wrong
    assert not report.manipulation(runs, {}, same=True)[1]["grpo_prune_unsolved"]


def test_a_void_test_counts_in_holm_with_p_1():
    # paired differences: +0.0133 +- 0.01 (p 0.031, which 0.05 alone would reject), 0 +- 0.002 (p 1), and their
    # difference (p 0.014, below Holm's first level 0.05 / 3)
    noise = {"grpo": lambda s: 0.0, "grpo_prune_unsolved": lambda s: 0.0133 + 0.01 * (-1) ** s,
             "grpo_prune": lambda s: 0.002 * (-1) ** s}  # fmt: skip
    runs = {arm: {s: record(0.8 + 0.01 * s + e(s), [0.5] * 4) for s in range(6)} for arm, e in noise.items()}

    def verdicts(valid):
        lines = "\n".join(report.tests(runs, valid)).split("\n")
        return [line.rstrip(" |").rsplit("|", 1)[1].strip() for line in lines if line.startswith("| `")]

    assert verdicts({"grpo_prune_unsolved": True, "grpo_prune": True}) == ["not shown", "not shown", "differs"]
    # grpo_prune's check failed: its two tests are void and count with p = 1, so the first stays at 0.05 / 3
    void = "void (manipulation check)"
    assert verdicts({"grpo_prune_unsolved": True, "grpo_prune": False}) == ["not shown", void, void]


def test_grpo_s_control_is_the_earlier_study_s_only_when_every_rerun_equals_it(tmp_path):
    earlier = {s: record(0.8 + 0.01 * s, [0.0] * 4) for s in range(4)}
    for s, r in earlier.items():
        harness.write(harness.path(tmp_path, "grpo", s), r)
    reruns = {s: copy.deepcopy(earlier[s]) for s in range(2)}
    reruns[0]["steps"][3]["lze/step_seconds"] = 9.5  # a clock reading differs between any two runs
    control, same = report.grpo_runs(reruns, tmp_path)
    assert same and sorted(control) == [0, 1, 2, 3]
    reruns[1]["selection_log"]["pass_rate"][5] = 0.125
    control, same = report.grpo_runs(reruns, tmp_path)
    assert not same and sorted(control) == [0, 1]


def test_the_committed_report_rebuilds_from_the_committed_runs():
    assert report.main(["--check"]) == 0
