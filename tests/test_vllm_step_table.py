"""BENCHMARKS.md section 10's step times with vLLM (and the README's, which cite it) rebuilt from the committed run,
`benchmarks/results/vllm_cpu/2026-11-24_probe.json` (no vLLM, no training): every figure of the table and every step
ratio the README quotes is what the run says, and a number that differs is caught."""

import copy
import json
from pathlib import Path

import pytest

from benchmarks.bench_vllm_cpu import step_table


ROOT = Path(__file__).resolve().parents[1]
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
    rows are GRPO, LZE, the probe, GRPO at half the prompts; columns 5 and 7 the measured and the shipped-profile
    ratios."""
    grpo, lze, probe, half = table[:4]
    share = float(grpo[2]) / float(grpo[1])
    return [
        f"LZE's step is {lze[5]}x GRPO's, the probe's {probe[5]}x, GRPO's at half the prompts {half[5]}x",
        f"thirds, {lze[7]}x, {probe[7]}x and {half[7]}x",
        f"where generation is {share:.0%} of GRPO's step",
        f"a projected {lze[7]}x of GRPO's step",
        f"({lze[5]}x measured on vLLM's CPU build, where it is {share:.0%})",
        f"generation ({probe[7]}x projected, {probe[5]}x measured; section 2's timing)",
    ]


def test_the_published_table_rebuilds_from_the_committed_run():
    table = step_table(json.loads(SAVED.read_text()))
    assert published_rows((ROOT / "BENCHMARKS.md").read_text()) == table


def test_the_readme_quotes_the_committed_run():
    readme = " ".join((ROOT / "README.md").read_text().split())  # whatever the line breaks
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
