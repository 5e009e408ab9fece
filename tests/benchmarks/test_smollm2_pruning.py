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


def test_the_committed_report_rebuilds_from_the_committed_runs():
    from benchmarks.smollm2_pruning import report

    assert report.main(["--check"]) == 0


def record(rates, live, keys, steps, pruner=None):
    """A finished run's record with the fields the report reads: its test rates at R and after 16 steps, and its
    selection log."""
    return {
        "evaluations": [
            {"points": ["equal_steps"], "step": 16, "test": {"rate": rates[0]}},
            {"points": ["budget"], "step": 26, "test": {"rate": rates[1]}},
        ],  # fmt: skip
        "selection_log": {"step": steps, "batch": steps, "prompt_key": keys, "live": live},
        "log_history": [{"lze/dead_frac": 0.5, "lze/fresh_rollouts": 40.0}],
        "steps": [{"rollouts": 40, "update_processed_tokens": 100, "seconds": 1.0, "generation": 0.5}] * 26,
        "pruner": pruner,
    }


def test_the_manipulation_check_reads_the_dead_share_of_later_visits_and_voids_test_1_when_it_fails(tmp_path):
    from benchmarks.smollm2_pruning import report

    keys, steps = [0, 1, 0, 1, 0, 1], [0, 0, 1, 1, 30, 30]  # the visits at step 30 come after R (step 26): not read
    control = record([[1, 0], [1, 0]], [False, True, False, False, True, True], keys, steps)  # later: 2 of 2 dead
    pruned = record([[1, 1], [1, 1]], [False, True, True, False, True, True], keys, steps,
                    {"revisits_scored": [0, 4], "revisits_live": [0, 1]})  # later: 1 of 2 dead  # fmt: skip
    runs = {"grpo_small": {0: control}, "grpo_prune_small": {0: pruned}}
    lines, valid = report.manipulation(runs)
    assert valid  # 0.5 is at most half of 1.0
    assert "0.500 against 1.000" in lines[2] and "0.750" in lines[1]  # precision 1 - 1/4
    pruned["selection_log"]["live"] = [False, True, False, False, True, True]  # later: 2 of 2 dead, as the control
    lines, valid = report.manipulation(runs)
    assert not valid and "1.000 against 1.000" in lines[2] and "test 1 is void" in lines[2]


def test_the_transitions_count_each_later_visit_by_its_previous_and_present_kind():
    from benchmarks.smollm2_pruning import report

    keys, steps = [0, 1, 0, 1, 0, 1], [0, 0, 1, 1, 2, 30]  # the visit at step 30 comes after R (step 26): not read
    run = record([[1], [1]], [True] * 6, keys, steps)
    run["selection_log"]["pass_rate"] = [0.0, 0.5, 0.0, 1.0, 0.5, 1.0]
    counts = report.transitions(run)
    assert counts.to_dict() == {("unsolved", "unsolved"): 1, ("live", "solved"): 1, ("unsolved", "live"): 1}
    lines = report.transitions_section({"grpo_small": {0: run}})
    row = next(line for line in lines[2].splitlines() if "grpo_small" in line)
    assert [c.strip() for c in row.strip("|").split("|")][2:] == ["1", "0", "0", "1", "0", "0", "3", "3-3"]
