"""The SmolLM2 study (benchmarks/smollm2_study/, BENCHMARKS.md section 11): its evaluation sets are what the protocol
says, and its report rebuilds from the committed raw results (no training) and catches a number that differs."""

import json
import shutil

import pytest

from benchmarks.smollm2_study.report import RESULTS, main
from benchmarks.smollm2_study.run import PROTOCOL, splits


def test_the_evaluation_sets_are_distinct_held_out_questions_balanced_by_level():
    data = splits()
    text = {name: [p[0]["content"] for p in data[name]["prompt"]] for name in ("train", "test", "ood")}
    for name, per_level, levels in (
        ("test", PROTOCOL["test_per_level"], {0, 1, 2, 3, 4}),
        ("ood", PROTOCOL["ood_per_level"], {5, 6}),
    ):
        assert len(set(text[name])) == len(text[name]) == per_level * len(levels)
        counts = {level: list(data[name]["difficulty"]).count(level) for level in levels}
        assert counts == dict.fromkeys(levels, per_level)
    assert not set(text["test"]) & set(text["train"])  # held out
    pass_rate = list(data["pass_rate"]["difficulty"])
    assert sorted(set(pass_rate)) == [0, 1, 2, 3, 4] and len(pass_rate) == 5 * PROTOCOL["pass_rate_per_level"]


@pytest.mark.skipif(not (RESULTS / "runs").exists(), reason="no run of the study is committed yet")
def test_the_committed_report_rebuilds_from_the_raw_results():
    assert main(["--check"]) == 0


@pytest.mark.skipif(not (RESULTS / "runs").exists(), reason="no run of the study is committed yet")
def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "study")
    path = next((tmp_path / "study" / "runs" / "grpo").glob("seed_*.json"))
    run = json.loads(path.read_text())
    rates = run["evaluations"][-1]["test"]["rate"]
    rates[0] = 1.0 - rates[0]
    path.write_text(json.dumps(run))
    assert main(["--check", "--results", str(tmp_path / "study")]) == 1


def test_the_async_section_tabulates_the_async_runs_beside_synchronous_grpo(tmp_path):
    import pandas as pd

    from benchmarks.fused.report import interval
    from benchmarks.smollm2_study.async_report import async_section

    def record(arm, seed, test, ood, **timing):
        evaluation = {"step": 8, "test": {"rate": test}, "ood": {"rate": ood}}
        return {"arm": arm, "seed": seed, "environment": {"date": "2026-11-28 05:00 UTC"}, "evaluations": [evaluation],
                "rows_per_step": 16, **timing}  # fmt: skip

    assert async_section(tmp_path, {}) == []  # no async run: no section
    runs = {
        "grpo": [([1.0, 0.0], 90.0), ([1.0, 1.0], 80.0)],
        "probe": [([1.0, 1.0, 0.0, 0.0], 20.0), ([1.0, 1.0, 1.0, 0.0], 22.0)],
    }
    for arm, seeds in runs.items():
        (tmp_path / "async" / arm).mkdir(parents=True)
        for seed, (test, step_s) in enumerate(seeds):
            run = record(arm, seed, test, [0.0, 1.0, 1.0, 1.0], step_s=step_s, rollouts_per_step=28.0)
            (tmp_path / "async" / arm / f"seed_{seed}.json").write_text(json.dumps(run))
    table = async_section(tmp_path, {0: record("grpo", 0, [1.0, 1.0, 1.0, 0.0], [0.0])})[-1].splitlines()
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table[2:]}
    assert cells["async GRPO"] == ["2", "0.750", "", "0.750", "85.0 (80.0-90.0)", "28.0", "16"]
    # the probe minus async GRPO, paired by seed: 0.5 - 0.5 and 0.75 - 1.0
    assert cells["async LZE, probe"][:5] == [
        "2",
        "0.625",
        interval(pd.Series([0.0, -0.25])),
        "0.750",
        "21.0 (20.0-22.0)",
    ]
    assert cells["GRPO (synchronous, seeds 0)"][:4] == ["1", "0.750", "", "0.000"]


def test_the_generation_section_puts_each_paths_step_beside_the_studys(tmp_path):
    from benchmarks.smollm2_study.report import generation_section

    def record(step_s, generation, scoring, transformers="5.24.0"):
        first = {"seconds": 100.0 + step_s, "generation": 2 * generation, "scoring": scoring}
        update = step_s - generation - scoring
        later = [{"seconds": step_s + d, "generation": generation, "scoring": scoring, "update": update + d}
                 for d in (-1.0, 1.0)]  # fmt: skip
        environment = {"date": "2026-11-28 10:00 UTC", "transformers": transformers}
        return {"environment": environment, "steps": [first, *later]}

    (tmp_path / "speed").mkdir()
    (tmp_path / "speed" / "grpo.json").write_text(json.dumps(record(120.0, 27.0, 0.0)))
    assert generation_section(tmp_path) == []  # no vLLM run: no section
    (tmp_path / "speed" / "grpo_vllm.json").write_text(json.dumps(record(150.0, 20.0, 25.0, "5.17.0")))
    (tmp_path / "speed" / "grpo_vllm_uncorrected.json").write_text(json.dumps(record(118.0, 20.0, 0.0)))
    table = generation_section(tmp_path)[-1].splitlines()
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table[2:]}
    assert cells["transformers (the study's)"][:5] == ["120.0", "27.0", "0.0", "93.0", "220.0"]  # first step left out
    assert cells["vLLM colocate, CPU build"][:4] == ["150.0", "20.0", "25.0", "105.0"]
    assert cells["vLLM colocate, CPU build"][-2] == "5.17.0"
    assert cells["vLLM colocate, no IS correction"][:3] == ["118.0", "20.0", "0.0"]


def test_the_budget_section_puts_each_option_beside_the_studys_step(tmp_path):
    from benchmarks.smollm2_study.report import budget_section

    (tmp_path / "budget").mkdir(parents=True)
    (tmp_path / "speed").mkdir()
    study = {"steps": [{"seconds": 500.0, "generation": 0.0, "scoring": 0.0, "update": 0.0}]}
    study["steps"] += [{"seconds": s, "generation": 25.0, "scoring": 0.0, "update": s - 25.0} for s in (119.0, 121.0)]
    (tmp_path / "speed" / "grpo.json").write_text(json.dumps(study))
    assert budget_section(tmp_path) == []  # no budget file: no section
    environment = {"date": "2026-11-28 11:00 UTC"}
    for option, settings, seconds in (("prompts_4", {"prompts_per_step": 4}, 60.0), ("full", {}, 132.0)):
        mean = {"seconds": seconds, "generation": 10.0, "scoring": 0.0, "update": seconds - 10.0}
        record = {"option": option, "settings": settings, "environment": environment, "mean": mean}
        (tmp_path / "budget" / f"{option}.json").write_text(json.dumps(record))
    (tmp_path / "budget" / "evaluation.json").write_text(json.dumps({"environment": environment}))
    table = budget_section(tmp_path)[-1].splitlines()
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table[2:]}
    assert set(cells) == {"full", "prompts_4"}  # the evaluation's file is not an option
    assert cells["prompts_4"][:5] == ["prompts_per_step=4", "60.0", "10.0", "50.0", "0.50x"]  # of 120.0 s
    assert cells["full"][0] == "the study's"
