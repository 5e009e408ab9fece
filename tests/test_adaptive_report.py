"""BENCHMARKS.md section 12 rebuilt from its committed raw results (no training): the committed report is what the
runs say, and a number that differs is caught."""

import gzip
import json
import shutil

from benchmarks.adaptive.report import ADAPTIVE, RESULTS, main


def test_the_committed_report_rebuilds_from_the_raw_results():
    assert main(["--check"]) == 0


def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "adaptive", ignore=shutil.ignore_patterns("*.png"))
    path = tmp_path / "adaptive" / "runs" / "dead_s0" / "seed_0" / "demo_results.json.gz"
    results = json.loads(gzip.open(path).read())
    results["methods"][ADAPTIVE]["curve"][-1]["test_accuracy"] += 0.01
    path.write_bytes(gzip.compress(json.dumps(results).encode()))
    assert main(["--check", "--results", str(tmp_path / "adaptive")]) == 1
