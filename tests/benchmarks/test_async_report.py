"""BENCHMARKS.md section 9 (LZE on TRL's async trainer): the report rebuilds from the committed runs exactly, and its
table is the mean and spread over seeds of what the runs recorded, on synthetic runs written here (no training)."""

from __future__ import annotations

import json

import numpy as np

from benchmarks.asynchronous import report


def test_the_committed_report_is_what_the_committed_runs_give():
    assert (report.RESULTS / "report.md").read_text() == report.report(report.load())


def write_run(folder, arm, seed, step_s, informative, test):
    run = {
        "arm": arm, "seed": seed, "steps": 10, "started": "2026-11-27 00:00:00 UTC", "step_s": step_s,
        "informative_groups_per_s": informative, "groups_trained_per_s": informative, "rollouts_per_step": 128.0,
        "rollouts_per_informative_group": 8.0, "trained_tokens": [0.0, 0.0, 100.0, 300.0],
        "accuracy_before": {"test": 0.8, "ood": 0.4}, "accuracy_after": {"test": test, "ood": 0.5},
    }  # fmt: skip
    (folder / f"{arm}_s{seed}.json").write_text(json.dumps(run))


def test_the_table_is_the_mean_and_spread_over_seeds_with_the_ratio_to_grpo(tmp_path):
    for seed, (grpo, lze) in enumerate([(1.0, 0.5), (2.0, 0.7), (3.0, 0.9)]):
        write_run(tmp_path, "grpo", seed, grpo, 10.0, 0.9)
        write_run(tmp_path, "lze", seed, lze, 5.0, 0.8 + 0.05 * seed)
    frame = report.load(tmp_path)
    assert list(frame["tokens_per_step"]) == [200.0] * 6  # the steps after the first two
    text = report.report(frame)
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| async")}
    assert "| 2 ± 1 " in rows["async GRPO (TRL's trainer)"]
    assert f"| 0.7 ± {np.std([0.5, 0.7, 0.9], ddof=1):.2g} (0.35x) " in rows["async LZE, unselected dropped"]
    assert f"0.85 ± {np.std([0.8, 0.85, 0.9], ddof=1):.2g} (0.94x)" in rows["async LZE, unselected dropped"]
