"""The dead-filter study's harness and report (benchmarks/dead_filter/): the filter arm reaches the rollout budget at
an evaluation step, and the manipulation check fails when its update keeps a dead group or its live groups a step
stray from the pruned arm's."""

import copy

from benchmarks.addition_pruning import run as harness
from benchmarks.addition_pruning.report import load_runs
from benchmarks.dead_filter import report, run
from benchmarks.smaller_batch import run as smaller


def test_the_filter_arm_reaches_the_budget_at_an_evaluation_step():
    cfg = harness.config("grpo_filter", 24, run.ARMS)
    rollouts_a_step = cfg.prompts_per_step * harness.PROTOCOL["num_generations"]
    assert harness.PROTOCOL["rollout_budget"] % rollouts_a_step == 0
    assert (harness.PROTOCOL["rollout_budget"] // rollouts_a_step) % harness.PROTOCOL["eval_steps"] == 0
    assert cfg.methods[0].overrides == {"selector": "lze", "selection_ratio": 1.0}


def test_the_check_fails_on_a_kept_dead_group_or_too_few_live_groups():
    runs = {**load_runs(smaller.RESULTS, {"grpo_prune": None}), **load_runs(report.RESULTS, report.ARMS)}
    runs = {arm: {s: seeds[s] for s in sorted(seeds)[:2]} for arm, seeds in runs.items()}
    assert report.manipulation(runs)[1] == {"grpo_filter": True}
    kept_dead = copy.deepcopy(runs)
    kept_dead["grpo_filter"][24]["steps"][3]["lze/selected_frac"] += 0.01
    assert report.manipulation(kept_dead)[1] == {"grpo_filter": False}
    fewer = copy.deepcopy(runs)
    for record in fewer["grpo_filter"].values():
        for step in record["steps"]:
            step["lze/fresh_rollouts"] *= 0.8
    assert report.manipulation(fewer)[1] == {"grpo_filter": False}


def test_the_committed_report_rebuilds_from_the_committed_runs():
    assert report.main(["--check"]) == 0
