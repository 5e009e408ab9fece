"""The unsolved-side pruning study's harness and report (benchmarks/unsolved_pruning/): its pruned arm prunes the
unsolved side alone at B, both arms reach the rollout budget at step 150, and the report reads the manipulation check
on the all-wrong share of later visits, the declared test and the reproduction of the addition study's GRPO runs."""

import copy

import pytest

from benchmarks.addition_pruning import run as harness
from benchmarks.unsolved_pruning import report, run
from lze_trl import LZEGRPOConfig


@pytest.mark.parametrize("arm", list(run.ARMS))
def test_every_arm_is_a_valid_config_at_b_that_reaches_the_budget_at_step_150(tmp_path, arm):
    args = LZEGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=64 * 8, num_generations=8,
                         use_cpu=True, report_to="none", **run.ARMS[arm])  # fmt: skip
    assert (args.prune_solved, args.prune_unsolved) == (False, arm == "grpo_prune_unsolved")
    assert harness.steps(arm, run.ARMS) == 150 == harness.PROTOCOL["equal_steps"]
    cfg = harness.config(arm, 5, run.ARMS)
    assert cfg.prompts_per_step == 64 and cfg.seed == 5 and cfg.methods[0].overrides == run.ARMS[arm]


def test_the_queue_is_this_study_s_arms_and_seeds(tmp_path, capsys):
    assert run.main(["jobs", "--seeds", "2", "--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split("\n")[:4] == ["grpo 0", "grpo_prune_unsolved 0", "grpo 1",
                                                       "grpo_prune_unsolved 1"]  # fmt: skip
    assert run.SEEDS == 24


def test_a_pruned_run_prunes_only_the_unsolved_side(tmp_path):
    from lze_examples.demo import DemoConfig

    record = harness.train("grpo_prune_unsolved", 0, run.ARMS, warm_start=DemoConfig.tiny().warm_start, n_train=32,
                           n_test=8, n_ood=4, n_train_eval=4, progress=False, steps=3, eval_steps=1,
                           prompts_per_step=4)  # fmt: skip
    last = record["steps"][-1]
    assert "lze/keep_probability_unsolved" in last and "lze/keep_probability_solved" not in last
    assert record["settings"] == run.ARMS["grpo_prune_unsolved"]


def record(test, later_pass_rates, rollouts=76_800, explored=4, explored_live=1):
    """A finished run's record with the fields the report reads: prompts 0-3 visited at steps 0 and 1 (their first
    visits all wrong, their second with `later_pass_rates`) and at step 300, after R (step 150), which is not read."""
    steps = [{"step": s, "lze/dead_frac": 0.5, "lze/fresh_rollouts": 512.0, "lze/update_tokens": 100.0,
              "lze/revisits_scored_unsolved": explored, "lze/revisits_live_unsolved": explored_live,
              "lze/skipped_prompts_unsolved": 10.0} for s in range(1, 151)]  # fmt: skip
    later = list(later_pass_rates)
    return {
        "evaluations": [
            {
                "step": 150,
                "rollouts": rollouts,
                "points": ["budget", "equal_steps"],
                "test_accuracy": test,
                "ood_accuracy": test / 2,
            }
        ],  # fmt: skip
        "steps": steps,
        "selection_log": {
            "step": [0] * 4 + [1] * 4 + [300] * 4,
            "batch": [0] * 4 + [1] * 4 + [300] * 4,
            "prompt_key": [0, 1, 2, 3] * 3,
            "pass_rate": [0.0] * 4 + later + [0.0] * 4,
            "live": [False] * 4 + [0 < p < 1 for p in later] + [False] * 4,
        },
    }


def test_the_manipulation_check_reads_the_all_wrong_share_of_later_visits_up_to_r():
    runs = {"grpo": {0: record(0.8, [0.0, 0.0, 0.0, 1.0])},  # later visits: 3 of 4 all wrong, 1 all right
            "grpo_prune_unsolved": {0: record(0.8, [0.0, 0.5, 0.5, 1.0])}}  # 1 of 4  # fmt: skip
    lines, valid = report.manipulation(runs)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2].splitlines()[2:]]
    # all wrong, dead, all right after first visits; precision 1 - 1/4 of the explored; explored; skipped
    assert [r[2:8] for r in rows] == [["0.750", "1.000", "0.250", "0.750", "4", "10"],
                                      ["0.250", "0.500", "0.250", "0.750", "4", "10"]]  # fmt: skip
    verdict = lines[-1]
    assert valid and "0.250 against 0.750" in verdict and "exactly 76,800" in verdict
    runs["grpo_prune_unsolved"][0] = record(0.8, [0.0, 0.0, 0.5, 1.0])  # 2 of 4 all wrong: more than half of 3 of 4
    lines, valid = report.manipulation(runs)
    assert not valid and "the test is void" in lines[-1]
    runs["grpo_prune_unsolved"][0] = record(0.8, [0.0, 0.5, 0.5, 1.0], rollouts=76_000)
    assert "`grpo_prune_unsolved` seed 0" in report.manipulation(runs)[0][-1]


def test_the_declared_test_pairs_by_seed_and_is_void_without_the_manipulation():
    runs = {"grpo": {s: record(0.80 + 0.01 * s, [0.0] * 4) for s in range(4)},
            "grpo_prune_unsolved": {s: record(0.82 + 0.01 * s + 0.002 * (s % 2), [0.5] * 4)
                                    for s in range(4)}}  # fmt: skip
    assert report.paired(runs, "grpo_prune_unsolved", "grpo", "budget").round(4).tolist() == [0.02, 0.022] * 2
    text = "\n".join(report.tests(runs, valid=True))
    assert "| differs " in text and "| 4       |" in text
    assert "void (manipulation check)" in "\n".join(report.tests(runs, valid=False))


def test_the_reproduction_of_the_addition_study_s_grpo_runs_is_checked(tmp_path):
    earlier = {s: record(0.8, [0.0] * 4) for s in range(2)}
    for s, r in earlier.items():
        harness.write(harness.path(tmp_path, "grpo", s), r)
    runs = {"grpo": copy.deepcopy(earlier)}
    runs["grpo"][0]["steps"][3]["lze/step_seconds"] = 9.5  # a clock reading differs between any two runs
    runs["grpo"][0]["evaluations"][0]["train_seconds"] = 1.5
    assert "seeds 0-1: 2 of 2 equal" in report.reproduced(runs, tmp_path)
    runs["grpo"][1]["selection_log"]["pass_rate"][5] = 0.125
    assert "seeds 0-1: 1 of 2 equal" in report.reproduced(runs, tmp_path)


def test_the_committed_report_rebuilds_from_the_committed_runs():
    assert report.main(["--check"]) == 0


def test_each_epoch_plan_s_explored_share_is_read_from_the_logged_steps():
    pairs = [(0, 0), (0, 0), (90, 10), (90, 10), (5, 95), (5, 95), (5, 95), (80, 20)]
    steps = [{"lze/skipped_prompts_unsolved": a, "lze/revisited_prompts_unsolved": b} for a, b in pairs]
    assert report.explored_shares({"steps": steps}) == [0.1, 0.95, 0.2]
