"""BENCHMARKS.md section 8 (fused rounds as the default): the power analysis that fixed the seed count rebuilds from
the committed runs, and the pre-declared test (one-sided paired non-inferiority at margin 0.015, Holm over the 3
regimes) decides as it says, on synthetic runs written here (no training)."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.adaptive.report import ADAPTIVE, REGIMES
from benchmarks.fused import power, report
from benchmarks.fused.power import FUSED, MARGIN, SERIAL_PROBE


NOISE = np.array([-1.0, 0.0, 1.0])  # a pattern of SD 1 and mean 0, for differences of a chosen mean and spread


def write_run(folder: Path, regime: str, seed: int, methods: dict[str, tuple[float, float, int]]) -> None:
    """One (regime, seed) as `bench.py train` leaves it: each arm's last 3 evaluations at the given in-domain and OOD
    accuracy (an earlier one at 0, which the last-3 mean must not read) and its fresh rollouts."""
    path = folder / f"{regime}_s{seed}" / f"seed_{seed}" / "demo_results.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    results = {
        "config": {"seed": seed},
        "methods": {
            arm: {
                "curve": [{"test_accuracy": 0.0, "ood_accuracy": 0.0}]
                + [{"test_accuracy": test, "ood_accuracy": ood}] * 3,
                "summary": {"rollouts": rollouts},
            }
            for arm, (test, ood, rollouts) in methods.items()
        },
    }
    path.write_bytes(gzip.compress(json.dumps(results).encode()))


def write_fused(results: Path, differences: dict[str, list[float]]) -> None:
    """Fused-probe runs whose in-domain accuracy is GRPO's plus the given difference, seed by seed."""
    for regime, diffs in differences.items():
        for seed, d in enumerate(diffs):
            base = 0.8 + 0.01 * seed
            write_run(results / "runs", regime, seed, {"grpo": (base, 0.5, 1000), FUSED: (base + d, 0.5 + d, 500)})


def with_p(p: float, margin: float = MARGIN) -> pd.Series:
    """Three paired differences whose one-sided non-inferiority p-value is `p`."""
    mean = stats.t.isf(p, 2) * 0.01 / np.sqrt(3) - margin
    return pd.Series(mean + 0.01 * NOISE)


# ------------------------------------------------------------------------------------------------ the test
def test_one_regime_clearly_passes_and_one_clearly_fails(tmp_path):
    write_fused(
        tmp_path,
        {
            "carries": [0.002, -0.001, 0.003, 0.0, 0.001],  # near 0, tight: non-inferior
            "dead": [-0.05, -0.06, -0.04, -0.055, -0.045],  # far below the margin
            "arithmetic": [0.001, -0.002, 0.002, 0.0, -0.001],
        },
    )
    text = report.build(tmp_path)
    rows = {row[0]: row for row in table(text, "## The test per regime")}
    assert rows["`carries`"][-1] == "non-inferior" and rows["`arithmetic`"][-1] == "non-inferior"
    assert rows["the dead-mass regime"][-1] == "not shown"
    assert rows["the dead-mass regime"][1] == "5" and rows["the dead-mass regime"][3] == "-0.0500"
    assert float(rows["the dead-mass regime"][7]) < -MARGIN < float(rows["`carries`"][7])
    assert table(text, "## The decision")[0][:2] == ["2 of 3", "opt-in"]
    secondary = {(row[0], row[1]): row for row in table(text, "## Secondary")}
    assert secondary["the dead-mass regime", f"`{FUSED}` - `grpo`"][-1] == "0.500x"


def test_the_fused_mode_is_the_default_only_if_all_three_pass(tmp_path):
    diffs = [0.004, -0.002, 0.003, 0.001, 0.0]
    write_fused(tmp_path, dict.fromkeys(REGIMES, diffs))
    assert table(report.build(tmp_path), "## The decision")[0][:2] == ["3 of 3", "default"]
    shutil.rmtree(tmp_path / "runs" / "arithmetic_s4")  # fewer seeds in one regime: still tested, n reported
    rows = {row[0]: row for row in table(report.build(tmp_path), "## The test per regime")}
    assert rows["`arithmetic`"][1] == "4" and rows["`carries`"][1] == "5"
    for seed in range(5):  # a regime without runs cannot pass, and stays in the family of 3
        shutil.rmtree(tmp_path / "runs" / f"arithmetic_s{seed}", ignore_errors=True)
    text = report.build(tmp_path)
    rows = {row[0]: row for row in table(text, "## The test per regime")}
    assert rows["`arithmetic`"][-1] == "not tested (< 2 seeds)"
    assert table(text, "## The decision")[0][:2] == ["2 of 3", "opt-in"]


def test_holm_order_matters():
    # every p-value below 0.05 but the smallest above 0.05 / 3: Holm stops at its first step, nothing passes
    result = report.decide({"a": with_p(0.03), "b": with_p(0.02), "c": with_p(0.04)})
    assert [result[r]["step"] for r in "abc"] == [2, 1, 3]
    assert not any(result[r]["passes"] for r in "abc")
    # the smallest below 0.05 / 3: the next at 0.05 / 2 and the last at 0.05 pass too (Bonferroni would fail them)
    result = report.decide({"a": with_p(0.02), "b": with_p(0.001), "c": with_p(0.04)})
    assert all(result[r]["passes"] for r in "abc")
    assert [result[r]["level"] for r in "abc"] == pytest.approx([0.025, 0.05 / 3, 0.05])
    # Holm stops at the second step: the third fails although its own bound at 0.05 is above the margin
    result = report.decide({"a": with_p(0.03), "b": with_p(0.001), "c": with_p(0.04)})
    assert [result[r]["passes"] for r in "abc"] == [False, True, False]
    assert result["c"]["lower"] > -MARGIN > result["a"]["lower"]


def test_the_lower_bound_and_the_p_value_agree_at_each_step():
    for p in (0.005, 0.02, 0.03, 0.045):
        result = report.decide({"a": with_p(p), "b": with_p(0.5), "c": with_p(0.6)})["a"]
        assert result["p"] == pytest.approx(p)
        assert (result["lower"] > -MARGIN) == (p < result["level"])
    assert report.non_inferiority(pd.Series([0.01, 0.01, 0.01])) == 0.0  # no spread, above the margin
    assert report.non_inferiority(pd.Series([-0.02, -0.02])) == 1.0
    assert math.isnan(report.non_inferiority(pd.Series([0.01])))


# ------------------------------------------------------------------------------------------ the seed count
def test_the_seeds_needed_grow_with_the_spread_and_with_a_true_loss():
    sds = [0.005, 0.01, 0.02, 0.04]
    needed = [power.seeds_needed(sd) for sd in sds]
    assert needed == sorted(needed) and needed[0] < needed[-1]
    assert power.seeds_needed(0.02, true_difference=-0.005) > power.seeds_needed(0.02)
    assert math.isinf(power.seeds_needed(0.02, true_difference=-MARGIN))
    # an independent check of TTestPower: the noncentral t's power at ceil(n) reaches 80%, at one seed fewer not
    n = math.ceil(power.seeds_needed(0.02))

    def noncentral(seeds: int) -> float:
        critical = stats.t.ppf(1 - 0.05 / 3, seeds - 1)
        return 1 - stats.nct.cdf(critical, seeds - 1, MARGIN / 0.02 * np.sqrt(seeds))

    assert noncentral(n) >= 0.8 > noncentral(n - 1)
    assert power.sd_upper(0.02, 5) == pytest.approx(0.02 * np.sqrt(4 / stats.chi2.ppf(0.2, 4)))


def test_the_seed_count_is_the_largest_regime_s(tmp_path):
    spreads = {"carries": 0.01, "dead": 0.03, "arithmetic": 0.005}
    pattern = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]) / np.sqrt(2.5)  # SD 1
    for regime, sd in spreads.items():
        for seed, e in enumerate(pattern):
            write_run(tmp_path / "runs", regime, seed, {"grpo": (0.8, 0.5, 1), SERIAL_PROBE: (0.8 + sd * e, 0.5, 1)})
            write_run(tmp_path / "fitted_runs", regime, seed, {ADAPTIVE: (0.8 + 0.05 * e, 0.5, 1)})
    text = power.build(tmp_path)
    expected = math.ceil(power.seeds_needed(0.03))
    assert table(text, "## The seed count") == [
        [
            "the largest n over the regimes: serial probe, true difference 0, rounded up",
            "the dead-mass regime",
            "0.0300",
            str(expected),
        ]
    ]
    assert ["seeds per regime", str(expected)] in table(text, "## The pre-declared test")
    powers = {row[0]: row for row in table(text, "## Power at")}
    assert powers["the dead-mass regime"][2] == f"{power.power_at(expected, 0.03):.2f}"
    assert power.power_at(expected, 0.03, true_difference=-0.005) < power.power_at(expected, 0.03)
    # the fitted prior's larger spread is a sensitivity row only: it does not set the count
    assert power.seeds_needed(0.05) > expected


def test_the_committed_power_analysis_rebuilds():
    assert power.main(["--check"]) == 0


def test_the_committed_report_rebuilds_and_a_changed_number_is_caught(tmp_path):
    assert report.main(["--check"]) == 0
    write_fused(tmp_path, dict.fromkeys(REGIMES, [0.004, -0.002, 0.003]))
    (tmp_path / "report.md").write_text(report.build(tmp_path))
    assert report.main(["--check", "--results", str(tmp_path)]) == 0
    write_fused(tmp_path, dict.fromkeys(REGIMES, [0.004, -0.002, 0.0031]))
    assert report.main(["--check", "--results", str(tmp_path)]) == 1


def test_the_report_says_when_the_declared_seeds_are_not_all_run(tmp_path):
    write_fused(tmp_path, dict.fromkeys(REGIMES, [0.004, -0.002, 0.003]))
    (tmp_path / "power.md").write_text("| setting | value |\n|---|---|\n| seeds per regime | 4 |\n")
    assert table(report.build(tmp_path), "## The decision")[0] == [
        "3 of 3",
        "pending (default on these seeds)",
        "no: 3 of 4 in the smallest regime",
    ]
    write_fused(tmp_path, dict.fromkeys(REGIMES, [0.004, -0.002, 0.003, 0.001]))
    assert table(report.build(tmp_path), "## The decision")[0] == ["3 of 3", "default", "yes (4 per regime)"]


def table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first table after the one line that starts with `heading`, as the page's test reads them."""
    from test_benchmarks_page import tables

    lines = text.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith(heading)]
    return tables("\n".join(lines[start:]))[0][1]
