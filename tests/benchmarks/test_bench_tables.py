"""The committed tables of `bench.py train` / `selection` (BENCHMARKS.md section 2's selection table, the per-seed
`bench_train.md` of sections 1-3's runs, and the earlier tables kept under benchmarks/results) rebuilt from the JSON
committed beside each (no training): every table is what its JSON says, and a number that differs is caught."""

import json
import shutil

from benchmarks.tables import RESULTS, main, tables


def test_every_committed_table_rebuilds_from_its_json():
    assert len(tables(RESULTS)) >= 36  # the bench.py tables committed under benchmarks/results
    assert main(["--check"]) == 0


def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS / "sweep_carries", tmp_path / "sweep_carries", ignore=shutil.ignore_patterns("*.png"))
    path = tmp_path / "sweep_carries" / "s13_seed0" / "bench_train.json"
    results = json.loads(path.read_text())
    results["aggregate"]["lze"]["summary"]["final_test_accuracy"]["mean"] += 0.001
    path.write_text(json.dumps(results))
    assert main(["--check", "--results", str(tmp_path)]) == 1


def test_a_selection_timing_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS / "selection", tmp_path / "selection")
    path = tmp_path / "selection" / "bench_selection.json"
    results = json.loads(path.read_text())
    results["pools"][0]["score_select_ms"]["median"] *= 2
    path.write_text(json.dumps(results))
    assert main(["--check", "--results", str(tmp_path)]) == 1
