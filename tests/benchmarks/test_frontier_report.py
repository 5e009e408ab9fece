"""The frontier report (`benchmarks/frontier/report.py`): targets, reach, the matched control, paired
differences and the guard column, on hand-built bench results."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from benchmarks.frontier import report


def method(accuracies: list[float], rollouts_per_eval: int, warnings: list[str] | None = None) -> dict:
    """A bench method result whose in-domain curve is `accuracies` (OOD 0.1 lower), one evaluation every
    `rollouts_per_eval` generated rollouts, 2 FLOPs per rollout."""
    curve = [
        {
            "test_accuracy": a,
            "ood_accuracy": a - 0.1,
            "train_accuracy": a + 0.05,
            "rollouts": i * rollouts_per_eval,
            "total_flops": 2.0 * i * rollouts_per_eval,
        }
        for i, a in enumerate(accuracies)
    ]
    result = {
        "curve": curve,
        "summary": {
            "optimizer_steps": 10,
            "rollouts": curve[-1]["rollouts"],
            "final_test_accuracy": accuracies[-1],
            "final_ood_accuracy": accuracies[-1] - 0.1,
            "dead_share": 0.2,
            "total_flops": curve[-1]["total_flops"],
            "projected_vllm_step_seconds": float(rollouts_per_eval),
            "train_cpu_seconds": 1.0,
            # totals a profile re-projects: 3 completion tokens per rollout, updates on 5 tokens of a tenth of them
            "rollout_tokens": 3 * curve[-1]["rollouts"],
            "update_processed_tokens": 5 * curve[-1]["rollouts"] // 10,
        },
    }
    if warnings is not None:
        result["warnings"] = warnings
    return result


def write(folder, seed: int, methods: dict, compress: bool = False) -> None:
    path = folder / f"seed_{seed}" / ("demo_results.json.gz" if compress else "demo_results.json")
    path.parent.mkdir(parents=True)
    text = json.dumps({"config": {"seed": seed}, "methods": methods})
    path.write_bytes(gzip.compress(text.encode())) if compress else path.write_text(text)


@pytest.fixture
def frame(tmp_path):
    control = "grpo:per_device_train_batch_size=128"
    for seed in range(3):
        up = 0.01 * seed
        write(
            tmp_path / "main",
            seed,
            {
                # GRPO: target = mean of its last 3 evaluations = 0.8 + up
                "grpo": method([0.5, 0.7, 0.8, 0.8, 0.8], 400, warnings=[]),
                # the quarter batch generates a quarter and ends 0.1 lower
                control: method([0.5, 0.6, 0.7, 0.7, 0.7], 100),
                # the arm generates a quarter too, ends 0.05 above its control, and warned on seed 1
                "lze:fresh_fraction=0.25": method(
                    [0.5, 0.6, 0.75 + up, 0.75 + up, 0.75 + up], 100, warnings=["replay degenerates"] * (seed == 1)
                ),
            },
            compress=seed == 2,
        )
        # the same arm run longer, labelled: its 3-evaluation mean reaches GRPO's target at its 5th evaluation
        write(tmp_path / "long", seed, {"lze:fresh_fraction=0.25": method([0.5, 0.6, 0.8, 0.8, 0.8, 0.8], 100)})
    arms = report.load([str(tmp_path / "main"), f"{tmp_path / 'long'}@long"])
    return report.rows(arms, "grpo", [control])


def test_the_arm_is_judged_against_the_control_that_generates_what_it_generates(frame):
    text, summary = report.report(frame, "grpo", ["grpo:per_device_train_batch_size=128"])
    arm = summary["lze:fresh_fraction=0.25"]
    assert arm["seeds"] == 3
    assert arm["matched_control"] == "grpo:per_device_train_batch_size=128"
    assert arm["fresh_rollouts_ratio"] == pytest.approx(0.25)
    assert arm["test_last3_gap"] == pytest.approx(-0.05 + 0.01)  # mean over seeds of 0.75 + up - 0.8
    assert arm["test_last3_minus_matched"] == pytest.approx(0.05 + 0.01)
    assert arm["reached"] == 0 and not arm["within_one_se_test"]
    # the labelled run has no control of its label to match, and reaches the target on every seed
    longer = summary["lze:fresh_fraction=0.25@long"]
    assert longer["matched_control"] is None and longer["reached"] == 3
    # 0.8 x 3 first at 400 rollouts (0.6, 0.8, 0.8 before it is below); GRPO's at 1600
    assert longer["rollouts_to_target_vs_base"] == pytest.approx(400 / 1600)
    assert summary["grpo"]["reached"] == 3 and summary["grpo"]["rollouts_to_target_vs_base"] == pytest.approx(1.0)
    assert "| `lze:fresh_fraction=0.25` " in text


def test_the_report_says_which_runs_warned_and_where_it_was_not_recorded(frame):
    _, summary = report.report(frame, "grpo", ["grpo:per_device_train_batch_size=128"])
    assert summary["lze:fresh_fraction=0.25"]["warned"] == "1/3"
    assert summary["grpo"]["warned"] == "0/3"
    assert summary["grpo:per_device_train_batch_size=128"]["warned"] is None


def test_a_profile_reprojects_each_run_from_its_totals(tmp_path):
    main = tmp_path / "main"
    for seed in range(2):
        write(main, seed, {"grpo": method([0.5, 0.8], 400), "half": method([0.5, 0.7], 200)})
    arms = report.load([str(main)])
    stored = report.rows(arms, "grpo", [])
    assert stored.set_index("arm").loc["half", "projected_vllm_step_ratio"].tolist() == [0.5, 0.5]
    # a profile where only the update costs: 10 s per update token; the other parts free
    profile = {"generation_seconds_per_token": 0.0, "scoring_seconds_per_rollout": 0.0, "sync_seconds": 0.0}
    steps = 10  # `method`'s optimizer steps
    frame = report.rows(arms, "grpo", [], {**profile, "update_seconds_per_token": 10.0})
    half = frame.set_index("arm").loc["half"]
    assert half["projected_vllm_step_ratio"].tolist() == [0.5, 0.5]  # update tokens: 100 vs 200
    # a fixed cost per step (the weight sync) is paid by both runs: the ratio moves towards 1
    sync = report.rows(arms, "grpo", [], {**profile, "update_seconds_per_token": 10.0, "sync_seconds": 100.0})
    grpo_step, half_step = 10.0 * 200 / steps + 100.0, 10.0 * 100 / steps + 100.0
    assert sync.set_index("arm").loc["half", "projected_vllm_step_ratio"].tolist() == [half_step / grpo_step] * 2


def test_a_missing_profile_is_refused_not_ignored(tmp_path, monkeypatch, capsys):
    write(tmp_path / "main", 0, {"grpo": method([0.5, 0.8], 400)})
    missing = tmp_path / "nope.json"
    argv = ["report.py", str(tmp_path / "main"), "--output", str(tmp_path / "out"), "--profile", str(missing)]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit):
        report.main()
    assert f"--profile {missing}: no such file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written with the stored projections instead


def test_a_run_is_judged_against_grpos_best_use_of_its_budget(tmp_path):
    # GRPO's frontier at half its rollouts: fewer prompts (ends 0.75) or fewer rollouts per prompt (ends 0.72 in-domain
    # but, here, higher OOD); a probe arm generating 0.496x ends 0.78
    half_prompts, half_group = "grpo:per_device_train_batch_size=256", "grpo:num_generations=4"
    for seed in range(3):
        group = method([0.5, 0.7, 0.72, 0.72, 0.72], 200)
        for record in group["curve"]:
            record["ood_accuracy"] += 0.2
        probe = method([0.5, 0.7, 0.78, 0.78, 0.78 + 0.01 * seed], 198)
        probe["steps"] = [
            {"lze/completed_dead_frac": 0.25, "lze/first_round_agreement": 1.0},
            {"lze/completed_dead_frac": 0.75, "lze/first_round_agreement": 0.5},
        ]
        write(
            tmp_path / "main",
            seed,
            {
                "grpo": method([0.5, 0.8, 0.8, 0.8, 0.8], 400),
                half_prompts: method([0.5, 0.7, 0.75, 0.75, 0.75], 200),
                half_group: group,
                "lze:probe_generations=2": probe,
            },
        )
    frame = report.rows(report.load([str(tmp_path / "main")]), "grpo", [half_prompts, half_group])
    text, summary = report.report(frame, "grpo", [half_prompts, half_group])
    arm = summary["lze:probe_generations=2"]
    assert arm["test_last3_best_frontier"] == half_prompts  # full GRPO generates more: not at the arm's budget
    assert arm["test_last3_minus_best_frontier"] == pytest.approx(0.03 + 0.01 / 3)
    assert arm["ood_last3_best_frontier"] == half_group  # the best point is chosen per metric
    assert arm["ood_last3_minus_best_frontier"] == pytest.approx(0.78 - 0.72 - 0.2 + 0.01 / 3)
    assert arm["update_dead_share"] == pytest.approx(0.5)  # a probe's completed groups, not every group it scored
    assert summary["grpo"]["update_dead_share"] == pytest.approx(0.2)
    assert arm["probe_agreement"] == pytest.approx(0.75)  # how often a probe's verdict held, over its steps
    assert np.isnan(summary["grpo"]["probe_agreement"])  # no probe: no agreement to report
    assert "Against GRPO's frontier at the run's budget" in text


def test_the_tables_rebuild_from_a_committed_report_json(frame, tmp_path, monkeypatch):
    # The per-seed runs are large; their rows in report.json are what the tables need: a clone rebuilds them
    controls = ["grpo:per_device_train_batch_size=128"]
    text, _ = report.report(frame, "grpo", controls)
    stored = tmp_path / "report.json"
    stored.write_text(json.dumps({"rows": frame.to_dict("records")}))
    argv = ["report.py", "--from_json", str(stored), "--controls", *controls, "--output", str(tmp_path / "again")]
    monkeypatch.setattr("sys.argv", argv)
    report.main()
    assert (tmp_path / "again" / "report.md").read_text() == text + "\n"
    assert not (tmp_path / "again" / "accuracy_vs_rollouts.png").exists()  # no curves in the rows: no figure
