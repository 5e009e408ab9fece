"""BENCHMARKS.md section 4 (section 13 before the page's rewrite) rebuilt from its committed raw results (no training):
the committed report is what the runs say, and a number that differs is caught."""

import json
import shutil

from benchmarks.agentic.report import RESULTS, main


def test_the_committed_report_rebuilds_from_the_raw_results():
    assert main(["--check"]) == 0


def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "agentic", ignore=shutil.ignore_patterns("*.png"))
    path = tmp_path / "agentic" / "runs" / "dead_s0" / "turns.json"
    turns = json.loads(path.read_text())
    turns["arms"]["lze+probe"][0]["model_turns"] += 100
    path.write_text(json.dumps(turns))
    assert main(["--check", "--results", str(tmp_path / "agentic")]) == 1
