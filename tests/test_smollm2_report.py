"""The SmolLM2 case study's report (benchmarks/smollm2/REPORT.md) rebuilt from its committed raw results
(benchmarks/results/smollm2/, no training): the committed report is what the runs say, and a number that differs is
caught."""

import json
import shutil

from benchmarks.smollm2.report import RESULTS, main


def test_the_committed_report_rebuilds_from_the_raw_results():
    assert main(["--check"]) == 0


def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "smollm2")
    path = tmp_path / "smollm2" / "runs" / "lze.json"
    run = json.loads(path.read_text())
    run["measured"]["test"]["rate"][0] = 1.0 - run["measured"]["test"]["rate"][0]
    path.write_text(json.dumps(run))
    assert main(["--check", "--results", str(tmp_path / "smollm2")]) == 1
