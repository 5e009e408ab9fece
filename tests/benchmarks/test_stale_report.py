"""BENCHMARKS.md section 10 (fused rounds with the stale-rollout correction): the seed counts and the report rebuild
from the committed runs, and a number that differs is caught (no training)."""

from __future__ import annotations

import gzip
import json
import shutil

from benchmarks.stale_rollouts import power, report
from benchmarks.stale_rollouts.power import CORRECTED, RESULTS


def test_the_seed_counts_rebuild_from_the_runs_measured_before_the_correction():
    assert power.main(["--check"]) == 0
    text = (RESULTS / "power.md").read_text()
    assert "| `carries`" in text and "| the solved regime" in text


def test_the_report_rebuilds_from_the_committed_runs():
    assert report.main(["--check"]) == 0
    text = (RESULTS / "report.md").read_text()
    assert "Non-inferior in 2 of 4 regimes: serial rounds stay the default." in text


def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "stale_rollouts")
    path = tmp_path / "stale_rollouts" / "runs" / "carries_s0" / "seed_0" / "demo_results.json.gz"
    results = json.loads(gzip.decompress(path.read_bytes()))
    results["methods"][CORRECTED]["curve"][-1]["test_accuracy"] += 0.01
    path.write_bytes(gzip.compress(json.dumps(results).encode()))
    assert report.main(["--check", "--results", str(tmp_path / "stale_rollouts")]) == 1
