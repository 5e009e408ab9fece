"""BENCHMARKS.md section 10's step times with vLLM (and the README's, which cite it) rebuilt from the committed run,
`benchmarks/results/vllm_cpu/2026-11-24_probe.json` (no vLLM, no training): every figure of the table and every step
ratio the README quotes is what the run says, and a number that differs is caught. And the rest of
`benchmarks/bench_vllm_cpu.py` that needs no vLLM: its arms' overrides typed by the config fields, the medians over
the repeats and their report (also of the committed runs of fused rounds, which left the library)."""

import copy
import json
from pathlib import Path

import pytest

from benchmarks.bench_vllm_cpu import (
    REPORT_HEADER,
    medians,
    parse_run,
    report,
    report_table,
    step_table,
)


ROOT = Path(__file__).resolve().parents[2]
SAVED = ROOT / "benchmarks" / "results" / "vllm_cpu" / "2026-11-24_probe.json"
HEADER = "| run | rollouts | s/step | generation | scoring | update | measured / GRPO |"


def published_rows(text: str) -> list[list[str]]:
    """The figures of BENCHMARKS.md's step-time table of section 10 (every cell but the run's name)."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")][1:])
    return rows


def readme_phrases(table: list[list[str]]) -> list[str]:
    """The README's step figures (BENCHMARKS.md section 2's timing), as the README words them, from the rebuilt table:
    rows are GRPO, LZE, the probe (which left the library: the README quotes it no more), GRPO at half the prompts;
    columns 5 and 7 the measured and the shipped-profile ratios."""
    grpo, lze, _, half = table[:4]
    share = float(grpo[2]) / float(grpo[1])
    return [
        f"LZE's step is {lze[5]}x GRPO's, GRPO's at half the prompts {half[5]}x",
        f"two thirds, {lze[7]}x and {half[7]}x",
        f"where generation is {share:.0%} of GRPO's step",
        f"a projected {lze[7]}x of GRPO's step",
        f"({lze[5]}x measured on vLLM's CPU build, where it is {share:.0%}",
    ]


def test_the_published_table_rebuilds_from_the_committed_run():
    table = step_table(json.loads(SAVED.read_text()))
    assert published_rows((ROOT / "BENCHMARKS.md").read_text()) == table


def test_the_summary_quotes_the_committed_run():
    # the README's summary of the results, on the benchmarks page since the README links it
    readme = " ".join((ROOT / "docs" / "source" / "benchmarks.md").read_text().split())  # whatever the line breaks
    for phrase in readme_phrases(step_table(json.loads(SAVED.read_text()))):
        assert phrase in readme, phrase


@pytest.mark.parametrize("part", ["total", "generation", "projected_shipped"])
def test_a_number_that_differs_is_caught(part):
    saved = json.loads(SAVED.read_text())
    changed = copy.deepcopy(saved)
    changed["results"][1][part] *= 1.1
    published = published_rows((ROOT / "BENCHMARKS.md").read_text())
    assert step_table(changed) != published
    assert step_table(saved) == published


def test_a_run_spec_is_typed_by_the_config_fields():
    spec = "lze:energy_terms=anchor+uncertainty,selection_ratio=0.33,prune_solved=False"
    assert parse_run(spec) == (
        "lze",
        {"energy_terms": ["anchor", "uncertainty"], "selection_ratio": 0.33, "prune_solved": False},
    )
    assert parse_run("lze:prune_solved=false")[1]["prune_solved"] is False
    assert parse_run("lze:prune_solved=True")[1]["prune_solved"] is True
    assert parse_run("none:num_generations=4,per_device_train_batch_size=64") == (
        "none",
        {"num_generations": 4, "per_device_train_batch_size": 64},
    )
    assert parse_run("none") == ("none", {})
    with pytest.raises(ValueError, match="not an LZEGRPOConfig field"):
        parse_run("lze:prune_solve=false")
    with pytest.raises(ValueError, match="not an LZEGRPOConfig field"):  # the settings of the removed savers
        parse_run("lze:fuse_rounds=false")


def synthetic_run(selector, total, generation, rollouts, calls):
    return {
        "selector": selector,
        "steps": 4,
        "skipped_steps": 1,
        "total": total,
        "generation": generation,
        "rollouts": rollouts,
        "generation_calls": calls,
        "shadow": True,  # a flag is not a figure: not in the medians
        "per_step": [{"total": total}],
    }


def test_the_report_gives_each_arms_medians_over_the_repeats_and_their_ratios_to_grpo():
    runs = [
        [synthetic_run("none", 10.0, 4.0, 128, 1), synthetic_run("lze:selection_ratio=0.33", 5.0, 3.0, 64, 1)],
        [synthetic_run("none", 12.0, 5.0, 128, 1), synthetic_run("lze:selection_ratio=0.33", 9.0, 2.0, 60, 1)],
        [synthetic_run("none", 20.0, 6.0, 128, 1), synthetic_run("lze:selection_ratio=0.33", 6.0, 2.5, 62, 1)],
    ]
    results = medians(runs)
    assert results[1] == {
        "selector": "lze:selection_ratio=0.33",
        "steps": 4.0,
        "skipped_steps": 1.0,
        "total": 6.0,
        "generation": 2.5,
        "rollouts": 62.0,
        "generation_calls": 1.0,
    }
    saved = {"results": results, "runs": runs}
    assert report_table(saved) == [
        ["none", "128.0", "1.00", "5.00", "12.00", "1.00", "1.00", "1.00"],
        ["lze:selection_ratio=0.33", "62.0", "1.00", "2.50", "6.00", "0.50", "0.48", "0.50"],
    ]
    text = report(saved)
    assert "Medians over 3 run(s)" in text and "| " + " | ".join(REPORT_HEADER) + " |" in text


@pytest.mark.parametrize("name", ["2026-11-27_fused", "2026-11-27_fused_corrected"])
def test_the_committed_fused_report_is_what_its_run_says(name):
    # BENCHMARKS.md section 8 quotes the rerun with the stale-rollout correction; the first run is in git history
    folder = ROOT / "benchmarks" / "results" / "vllm_cpu"
    saved = json.loads((folder / f"{name}.json").read_text())
    committed = (folder / f"{name}.md").read_text()
    assert committed.rstrip("\n").endswith(report(saved))
    rows = {row[0]: row for row in report_table(saved)}
    fused = rows["lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33,fuse_rounds=true"]
    serial = rows["lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33,fuse_rounds=false"]
    assert (fused[2], serial[2]) == ("1.00", "2.00")  # generation calls per step
