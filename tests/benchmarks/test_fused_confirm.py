"""The confirmatory test of fused rounds (benchmarks/fused_confirm): its seeds, rebuilt from section 10's runs, and its
reports, rebuilt from the committed runs (fused rounds left the library with BENCHMARKS.md section 15's verdict)."""

import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.fused_confirm import power  # noqa: E402


def test_the_committed_seeds_rebuild_from_section_10s_runs():
    assert power.main(["--check"]) == 0
    planned = power.seeds()
    counts = {regime: len(s) for regime, s in planned.items()}
    assert counts == {"carries": 18, "dead": 33, "arithmetic": 12, "solved": 40}
    assert all(min(s) >= power.FIRST_SEED > 22 for s in planned.values())  # none of section 8's or 10's seeds


def test_the_committed_report_rebuilds_from_the_raw_runs():
    from benchmarks.fused_confirm import report

    assert report.main(["--check"]) == 0


def test_the_step_times_are_the_median_over_repeats_of_the_steady_steps(tmp_path):
    import json

    from benchmarks.fused_confirm import report

    def write(repeat, arm, seconds):
        # 4 steps: the first (the staircase) and the last (no batch drawn ahead) are left out
        steps = [{"seconds": s, "generation": s / 2, "scoring": 1.0} for s in (99.0, seconds, seconds, 1.0)]
        path = tmp_path / "smollm2" / f"repeat_{repeat}" / "speed" / f"{arm}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"steps": steps}))

    for repeat, (serial, fused) in enumerate([(10.0, 9.0), (12.0, 6.0), (30.0, 8.0)], start=1):
        write(repeat, "probe", serial)
        write(repeat, "probe_fused", fused)
    lines = [line for line in report.timing_section(tmp_path).splitlines() if line.startswith("| transformers")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    # per arm the median over repeats (12.0 and 8.0); no vLLM runs, no vLLM rows
    assert rows == [
        ["transformers", "serial", "3", "12.0", "6.0", "1.0", "1.00x"],
        ["transformers", "fused", "3", "8.0", "4.0", "1.0", "0.67x"],
    ]


def test_the_vllm_tests_seeds_rebuild_from_the_transformers_tests_runs():
    from benchmarks.fused_confirm import on_vllm

    assert on_vllm.main(["power", "--check"]) == 0
    assert on_vllm.main(["report", "--check"]) == 0  # the committed report, from the committed runs
    counts = {regime: len(s) for regime, s in on_vllm.seeds().items()}
    assert counts == {"carries": 12, "dead": 23, "arithmetic": 16, "solved": 24}
    assert all(min(s) >= on_vllm.FIRST_SEED > 139 for s in on_vllm.seeds().values())  # fresh: none of 100-139
    # the arms differ in fuse_rounds alone, both on vLLM with TRL's correction
    assert on_vllm.SERIAL.replace("fuse_rounds=false", "fuse_rounds=true") == on_vllm.CORRECTED
    assert "use_vllm=true" in on_vllm.SERIAL and "vllm_importance_sampling_correction=true" in on_vllm.SERIAL
