"""BENCHMARKS.md section 11 rebuilt from its committed raw results (no training): the report is what the runs say, and
the comparison fails on a number that differs."""

import gzip
import json
import shutil

import pytest

from benchmarks.same_numbers.compare import ROOT, compare, main


@pytest.mark.parametrize("root", [ROOT, ROOT / "smaller_core"], ids=["one-path", "smaller-core"])
def test_the_committed_report_rebuilds_from_the_raw_results(capsys, root):
    assert main(["--results", str(root)]) == 0
    assert capsys.readouterr().out == (root / "report.md").read_text()


def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(ROOT, tmp_path / "same_numbers")
    path = tmp_path / "same_numbers" / "after" / "demo.json.gz"
    results = json.loads(gzip.open(path).read())
    results["methods"]["lze"]["summary"]["final_test_accuracy"] += 0.001
    path.write_bytes(gzip.compress(json.dumps(results).encode()))
    rows, ok = compare(tmp_path / "same_numbers")
    assert not ok and any("final_test_accuracy" in row[2] for row in rows)
