"""The tables: the demo's printed text tables (`lze_examples.demo.tables`) and the Markdown of the benchmarks and the
sweep (`benchmarks.harness.markdown`). The expected texts (`fixtures/tables/golden.json`) were written by the
formatters before they were merged into one module and then laid out by `tabulate`: the demo's tables must not change
by a character (README shows their layout); the Markdown tables must keep every cell, caption and column alignment
(tabulate pads the cells to the column's width, which Markdown does not render)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.harness import markdown
from benchmarks.harness.stats import seed_stats as stats_over_seeds
from lze_examples.demo import tables
from lze_examples.demo.summary import RATIO_KEYS


GOLDEN = json.loads((Path(__file__).parents[1] / "fixtures" / "tables" / "golden.json").read_text())


SUMMARY = {
    "final_test_accuracy": 0.6125,
    "final_ood_accuracy": 0.05,
    "final_train_accuracy": 0.75,
    "train_seconds": 12.34,
    "train_cpu_seconds": 11.0,
    "rollout_tokens": 123456,
    "update_tokens": 654321,
    "update_tokens_per_step": 5452.7,
    "update_flops": 1.234e12,
    "total_flops": 2.5e12,
    "reach_test_seconds": None,
    "reach_test_flops": 1e12,
    "reach_train_seconds": 3.5,
    "reach_train_flops": 4.5e11,
    "reach90_train_seconds": 2.0,
    "reach90_train_flops": 3e11,
    "selection_share_of_step": 0.00123,
    "target_test_informative": False,
    "target_train_informative": True,
}


def demo_results():
    lze = {**SUMMARY, "final_test_accuracy": 0.7, "update_tokens": 200000, "reach_test_seconds": 1.5}
    ratios = {k: (0.5 if k != "reach_test_seconds" else None) for k in RATIO_KEYS}
    return {
        "baseline": "grpo",
        "methods": {
            "grpo": {"summary": SUMMARY, "ratios": {k: 1.0 for k in RATIO_KEYS}},
            "lze": {"summary": lze, "ratios": ratios},
        },
    }


def headline():
    row = {
        "test_accuracy": 0.61,
        "ood_accuracy": 0.05,
        "update_tokens_ratio": 1.0,
        "generated_rollouts_ratio": 1.0,
        "total_flops_ratio": 1.0,
        "projected_vllm_step_ratio": 1.0,
        "dead_share": 0.456,
        "rollouts_to_grpo_final": 0.9,
        "flops_to_grpo_final": None,
    }
    return {
        "baseline": "grpo",
        "start": {
            "learning_zone_share": 0.34,
            "test_accuracy": 0.5,
            "ood_accuracy": 0.02,
            "test_size": 600,
            "ood_size": 200,
        },
        "methods": {"grpo": row, "lze+prune": {**row, "dead_share": None, "update_tokens_ratio": 0.3125}},
    }


def bench_results():
    def method(scale, missing):
        summary = {}
        for i, key in enumerate(
            (
                "start_test_accuracy",
                "final_test_accuracy",
                "final_ood_accuracy",
                "start_train_accuracy",
                "final_train_accuracy",
                "train_seconds",
                "train_cpu_seconds",
                "rollout_tokens",
                "update_tokens_per_step",
                "update_flops",
                "total_flops",
                "reach_train_seconds",
                "reach_train_flops",
                "reach90_train_seconds",
                "reach90_train_flops",
                "selection_share_of_step",
                "reach_test_rollout_tokens",
                "reach_test_flops",
                "reach_test_seconds",
                "utilisation",
                "dead_share",
                "dead_share_last_quarter",
            )
        ):
            base = [
                0.5,
                0.6,
                0.05,
                0.4,
                0.7,
                12.0,
                11.0,
                1e5,
                5e3,
                1e12,
                2e12,
                3.0,
                4e11,
                2.0,
                3e11,
                0.01,
                5e4,
                1e12,
                4.0,
                1.0,
                0.4,
                0.5,
            ][i] * scale
            summary[key] = stats_over_seeds([base, base * 1.1, None if missing and key.startswith("reach") else base])
        return {
            "summary": summary,
            "ratios": {k: stats_over_seeds([scale, scale * 0.9, scale]) for k in RATIO_KEYS},
        }

    return {
        "seeds": [0, 1, 2],
        "baseline": "none",
        "config": {"steps": 240, "prompts_per_step": 64, "num_generations": 8, "torch_threads": 1},
        "aggregate": {"none": method(1.0, False), "lze": method(0.5, True)},
        "runs": [{"machine": {"start": {"load_average": [1.0, 0.5, 0.25]}}}],
        "machine": {"platform": "Linux", "cpu_count": 2, "torch": "2.13.0"},
    }


def selection_results(step):
    pools = [
        {
            "pool_size": size,
            "score_select_ms": {"median": 0.1234 * k, "p90": 0.2 * k},
            "with_record_selection_ms": {"median": 0.3 * k, "p90": 0.45 * k},
            "bytes_per_prompt": 41.5,
            "nbytes": 41_500 * k,
        }
        for k, size in ((1, 1_000), (10, 100_000))
    ]
    results = {
        "groups": 512,
        "repeats": 50,
        "pools": pools,
        "machine": {"platform": "Linux", "cpu_count": 2, "load_average": [1.0, 0.5, 0.25]},
    }
    if step:
        results["step"] = {
            "groups_per_step": 64,
            "num_generations": 8,
            "seconds_per_step": 0.25,
            "selection_seconds_per_step": 0.0012,
            "selection_share": 0.0048,
        }
    return results


def sweep_rows():
    def stat(mean, std=0.01, n=3):
        return {"mean": mean, "std": std, "n": n}

    row = {
        key: stat(0.5)
        for key in (
            "final_test_accuracy",
            "late_test_accuracy",
            "final_ood_accuracy",
            "ood_gain",
            "late_ood_accuracy",
            "final_train_accuracy",
            "kept_share",
            "dead_share",
            "update_tokens_ratio",
            "total_flops_ratio",
            "cpu_seconds_ratio",
            "fresh_rollouts_ratio",
        )
    }
    base = {
        **row,
        "name": "grpo",
        "seeds": [0, 1, 2],
        "rollouts_to_base_test": stat(0.9),
        "rollouts_to_base_ood": stat(None, None, 0),
    }
    lze = {
        **row,
        "name": "lze:selection_ratio=0.2",
        "seeds": [0, 1, 2],
        "rollouts_to_base_test": stat(0.4, 0.1, 2),
        "rollouts_to_base_ood": stat(0.7),
    }
    return [base, lze]


TEXT_CASES = {
    "format_table": lambda: tables.format_table(demo_results()),
    "format_headline": lambda: tables.format_headline(headline()),
}
MARKDOWN_CASES = {
    "bench_markdown": lambda: markdown.bench_markdown(bench_results()),
    "selection_markdown step": lambda: markdown.selection_markdown(selection_results(True)),
    "selection_markdown": lambda: markdown.selection_markdown(selection_results(False)),
    "sweep_markdown": lambda: markdown.sweep_markdown(sweep_rows(), "grpo", 3),
}


def markdown_content(text: str) -> list:
    """Every line of a Markdown text, a table row as its stripped cells and a separator row as its alignments."""
    lines = []
    for line in text.split("\n"):
        if not line.startswith("|"):
            lines.append(line)
            continue
        assert line.endswith("|"), line
        cells = [cell.strip() for cell in line[1:-1].split("|")]
        if all(cell and set(cell) <= set("-:") for cell in cells):
            cells = [
                ("right" if cell.endswith(":") else "-") + (":" if cell.startswith(":") else "") for cell in cells
            ]
            lines.append(("separator", *cells))
        else:
            lines.append(tuple(cells))
    return lines


@pytest.mark.parametrize("name", list(TEXT_CASES))
def test_the_demo_tables_keep_their_text(name):
    assert TEXT_CASES[name]() == GOLDEN[name]


@pytest.mark.parametrize("name", list(MARKDOWN_CASES))
def test_the_markdown_tables_keep_their_content(name):
    text = MARKDOWN_CASES[name]()
    assert markdown_content(text) == markdown_content(GOLDEN[name])
    assert text.count("\n") == GOLDEN[name].count("\n")  # no line added or lost (the captions and the last newline)
    # the caption rows stay word for word, the table rows are padded to their column's width
    tables_rows = [line for line in text.split("\n") if line.startswith("|")]
    assert len({len(line) for line in tables_rows if line.count("|") == tables_rows[0].count("|")}) == 1


def test_one_cell_formatter_for_a_run_and_for_seeds():
    assert tables.format_value(None) == "n/a" and tables.format_value(None, "reach") == "not reached"
    assert tables.format_value(0.0123, "pct") == "1.23%" and tables.format_value(0.456, "pct0") == "46%"
    assert tables.format_value(1234567, "int") == "1,234,567" and tables.format_value(2.5, "reach") == "2.50x"
    stat = stats_over_seeds([0.5, None, 0.7])
    assert markdown.format_stat(stat, "acc") == "0.600 ± 0.141 [2/3 seeds]"
    assert markdown.format_stat({"mean": 0.5, "std": 0.01, "n": 3}, "ratio") == "0.50 ± 0.01x"
    assert markdown.format_stat(stats_over_seeds([None]), "s") == "n/a"


def test_layouts():
    assert tables.text_table(["a", "bb"], [["ccc", "d"]]) == ["a    bb", "---  --", "ccc   d"]
    # a header wider than its cells sets the column's width, cells that look like numbers stay as written
    assert tables.text_table(["metric", "ratio"], [["x", "1.50x"], ["yy", ""]]) == [
        "metric  ratio",
        "------  -----",
        "x       1.50x",
        "yy           ",
    ]
    assert tables.text_table(["a", "b"], [["1.0", "007"]]) == ["a      b", "---  ---", "1.0  007"]
    assert markdown.markdown_table(["a", "b"], [["1", "2"]], right=True) == [
        "|   a |   b |",
        "|----:|----:|",
        "|   1 |   2 |",
    ]
    assert markdown.markdown_table(["a", "bb"], [["1.50", "`x`"]]) == [
        "| a    | bb   |",
        "|------|------|",
        "| 1.50 | `x`  |",
    ]
