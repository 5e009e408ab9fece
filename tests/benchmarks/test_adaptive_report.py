"""BENCHMARKS.md sections 1-3 (section 12 before the page's rewrite) rebuilt from their committed raw results (no
training): the committed report is what the runs say, and a number that differs is caught."""

import gzip
import json
import re
import shutil
from pathlib import Path

from benchmarks.adaptive.report import ADAPTIVE, RESULTS, main


ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_report_rebuilds_from_the_raw_results():
    assert main(["--check"]) == 0


def test_a_number_that_differs_is_caught(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "adaptive", ignore=shutil.ignore_patterns("*.png"))
    path = tmp_path / "adaptive" / "runs" / "dead_s0" / "seed_0" / "demo_results.json.gz"
    results = json.loads(gzip.open(path).read())
    results["methods"][ADAPTIVE]["curve"][-1]["test_accuracy"] += 0.01
    path.write_bytes(gzip.compress(json.dumps(results).encode()))
    assert main(["--check", "--results", str(tmp_path / "adaptive")]) == 1


def quoted_numbers(text: str) -> set[str]:
    """The three-decimal numbers of `text`, negative ones with their sign (`+0.022` and `0.893x` read `0.022` and
    `0.893`, as the report writes them in places)."""
    return set(re.findall(r"-?\d\.\d{3}", text))


def test_the_readme_and_docs_quote_section_12_as_its_report_says():
    report = quoted_numbers((RESULTS / "report.md").read_text())
    readme = (ROOT / "docs" / "source" / "benchmarks.md").read_text()  # the README's summary, moved there
    headline = readme[readme.index("What it buys, measured") : readme.index("## When LZE helps")]
    helps = readme[readme.index("## When LZE helps") : readme.index("## Reproducing")]
    for text, least in ((headline, 15), (helps, 5)):
        numbers = quoted_numbers(text)
        assert len(numbers) > least and numbers - report == set()
    benchmarks_page = readme.splitlines()
    sections = [(row, set(re.findall(r"\d+", row.split("|")[2]))) for row in benchmarks_page if row.startswith("| ")]
    rows = [row for row, numbers in sections if numbers & {"1", "2", "3"}]  # the rows that cite sections 1-3
    numbers = quoted_numbers("\n".join(rows))
    assert len(numbers) > 10 and numbers - report == set()


RUNS = {
    "LZE": "`lze`",
    "GRPO, half the group": "`grpo:num_generations=4,per_device_train_batch_size=256`",
}
SECTIONS = {
    "`carries`": "## `carries`",
    "dead-mass `carries`": "## the dead-mass regime",
    "`arithmetic`": "## `arithmetic`",
}


def table_rows(text: str) -> dict[str, list[str]]:
    """The rows of the first two tables after `text`'s start (accuracy, cost), by run, as lists of cells."""
    tables = [t for t in text.split("\n\n") if t.startswith("| run")][:2]
    return [
        {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")] for line in t.splitlines()[2:])}
        for t in tables
    ]


def test_the_summary_table_is_the_report_s_row_by_row():
    report = (RESULTS / "report.md").read_text()
    readme = (ROOT / "docs" / "source" / "benchmarks.md").read_text()
    table = readme[readme.index("| task (GRPO's dead groups)") : readme.index('"GRPO, half the group" is')]
    table = table.strip().splitlines()
    regime = None
    for line in table[2:]:
        task, run, in_domain, ood, rollouts, flops, step = (c.strip() for c in line.strip("|").split("|"))
        regime = next((k for k in SECTIONS if task.startswith(k)), regime)
        accuracy, cost = table_rows(report[report.index(SECTIONS[regime]) :])
        row, costs = accuracy[RUNS[run]], cost[RUNS[run]]
        assert in_domain == row[3]
        assert ood == (row[5] if regime != "`arithmetic`" else ood)
        assert [rollouts, flops, step] == [f"{costs[i].split()[0]}x" for i in (1, 10, 11)]


def test_the_demo_quotes_the_seed_to_seed_spread_of_section_12_on_its_task():
    from lze_examples.commands.demo import ONE_SEED_NOISE

    report = (RESULTS / "report.md").read_text()
    table = report[report.index("## How far one seed is from another") :].split("\n\n")[1]
    carries = [row.split("|") for row in table.splitlines() if row.startswith("| `carries`")]
    carries = [row for row in carries if row[2].strip() in ("`grpo`", "`lze`")]
    assert len(carries) == 2  # GRPO and LZE (the probe, whose row is there too, left the library and the demo)
    largest = [max(float(row[column]) for row in carries) for column in (3, 4)]  # in-domain, OOD
    assert re.findall(r"\d\.\d{3}", ONE_SEED_NOISE) == [f"{v:.3f}" for v in largest]
    assert "section 1," in ONE_SEED_NOISE
