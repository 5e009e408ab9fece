"""The addition pruning study's harness and report (benchmarks/addition_pruning/): its arms prune as the protocol says
and reach the rollout budget in whole steps, a run's record marks its evaluations at R and at equal steps and keeps
the selection log, and the report reads the manipulation check and the tests from the records."""

import pytest

from benchmarks.addition_pruning import report, run
from lze_trl import LZEGRPOConfig


@pytest.mark.parametrize("arm", list(run.ARMS))
def test_every_arm_is_a_valid_config_that_reaches_the_budget(tmp_path, arm):
    settings = dict(run.ARMS[arm])
    prompts = settings.pop("prompts_per_step", run.PROTOCOL["prompts_per_step"])
    args = LZEGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=prompts * 8, num_generations=8,
                         use_cpu=True, report_to="none", **settings)  # fmt: skip
    pruned = "prune" in arm
    assert (args.prune_solved, args.prune_unsolved) == (pruned, pruned)
    assert run.steps(arm) * prompts * 8 == run.PROTOCOL["rollout_budget"]
    assert run.steps(arm) == (240 if "small" in arm else 150)
    assert run.config(arm, 3).train_levels == [0, 0, 1, 2, 6, 6] and run.config(arm, 3).seed == 3


def test_evaluations_mark_the_first_at_the_budget_and_the_one_at_equal_steps():
    per_step = 40 * 8
    curve = [{"step": s, "rollouts": s * per_step} for s in range(0, 271, 30)]
    marked = run.evaluations(curve)
    assert [e["step"] for e in marked if "budget" in e["points"]] == [240]
    assert [e["step"] for e in marked if "equal_steps" in e["points"]] == [150]


def test_a_run_records_its_evaluations_selection_log_and_pruner_metrics(tmp_path, monkeypatch):
    from lze_examples.demo import DemoConfig

    monkeypatch.setitem(run.PROTOCOL, "rollout_budget", 3 * 4 * 8)
    monkeypatch.setitem(run.PROTOCOL, "equal_steps", 2)
    record = run.train("grpo_prune_small", 0, warm_start=DemoConfig.tiny().warm_start, n_train=32, n_test=8, n_ood=4,
                       n_train_eval=4, progress=False, steps=3, eval_steps=1, prompts_per_step=4)  # fmt: skip
    assert [e["points"] for e in record["evaluations"]] == [[], [], ["equal_steps"], ["budget"]]
    assert record["evaluations"][-1]["rollouts"] == 96
    log = record["selection_log"]
    assert set(log) == set(run.SELECTION_LOG) and len(log["prompt_key"]) == 12 and set(log["step"]) == {0, 1, 2}
    assert "lze/keep_probability_unsolved" in record["steps"][-1]
    run.write(run.path(tmp_path, "grpo_prune_small", 0), record)
    assert report.load_runs(tmp_path)["grpo_prune_small"][0] == record
    assert run.jobs(2, ["grpo_prune_small", "grpo"], tmp_path) == [("grpo", 0), ("grpo_prune_small", 1), ("grpo", 1)]


def record(test, later_live, rollouts=76_800, scored=(0, 4), live=(0, 1)):
    """A finished run's record with the fields the report reads: prompts 0 and 1 visited at steps 0 and 1 (their
    later visits live as `later_live` says) and at step 300, after R (step 240), which is not read."""
    steps = [{"step": s, "lze/dead_frac": 0.5, "lze/fresh_rollouts": 320.0, "lze/update_tokens": 100.0,
              "lze/revisits_scored_solved": scored[0], "lze/revisits_scored_unsolved": scored[1],
              "lze/revisits_live_solved": live[0], "lze/revisits_live_unsolved": live[1]}
             for s in range(1, 241)]  # fmt: skip
    return {
        "evaluations": [
            {"step": 150, "rollouts": 48_000, "points": ["equal_steps"], "test_accuracy": test[0], "ood_accuracy": 0},
            {"step": 240, "rollouts": rollouts, "points": ["budget"], "test_accuracy": test[1], "ood_accuracy": 0},
        ],  # fmt: skip
        "steps": steps,
        "selection_log": {
            "step": [0, 0, 1, 1, 300, 300],
            "batch": [0, 0, 1, 1, 300, 300],
            "prompt_key": [0, 1, 0, 1, 0, 1],
            "pass_rate": [0.0, 0.5, 0.0, 0.5, 0.5, 0.5],
            "live": [False, True, *later_live, True, True],
        },  # fmt: skip
    }


def test_the_manipulation_check_reads_later_visits_up_to_r_and_voids_test_1_when_it_fails():
    runs = {"grpo_small": {0: record((0.5, 0.5), [False, False])},  # later visits: 2 of 2 dead
            "grpo_prune_small": {0: record((0.5, 0.5), [False, True])}}  # 1 of 2  # fmt: skip
    lines, valid = report.manipulation(runs)
    assert valid and "0.500 against 1.000" in lines[-1] and "0.750" in lines[2]  # precision 1 - 1/4
    assert "exactly 76,800" in lines[-1]
    runs["grpo_prune_small"][0] = record((0.5, 0.5), [False, False], rollouts=76_000)
    lines, valid = report.manipulation(runs)
    assert not valid and "test 1 is void" in lines[-1] and "`grpo_prune_small` seed 0" in lines[-1]


def test_the_declared_tests_pair_by_seed_and_void_test_1_without_the_manipulation():
    pruned = {s: record((0.80 + 0.01 * s, 0.85 + 0.01 * s + 0.002 * (s % 2)), [False, True]) for s in range(4)}
    small = {s: record((0.80, 0.84 + 0.01 * s), [False, False]) for s in range(4)}
    grpo = {s: record((0.80 + 0.01 * s + 0.001 * (s % 2), 0.80), [False, False]) for s in range(4)}
    runs = {"grpo_prune_small": pruned, "grpo_small": small, "grpo": grpo}
    assert report.paired(runs, "grpo_prune_small", "grpo_small", "budget").round(4).tolist() == [0.01, 0.012] * 2
    table = "\n".join(report.tests(runs, valid=True))
    assert "differs" in table and "non-inferior" in table
    table = "\n".join(report.tests(runs, valid=False))
    assert "void (manipulation check)" in table and "differs" not in table


def test_the_committed_report_rebuilds_from_the_committed_runs():
    assert report.main(["--check"]) == 0
