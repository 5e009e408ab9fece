"""The savers' verdict (benchmarks/savers_verdict/, issue #84): its report rebuilds from the committed runs of
BENCHMARKS.md sections 11 and 13 (and, for fused rounds on the addition tasks, sections 8 and 10), and the verdicts
BENCHMARKS.md quotes are the runs' numbers."""

import re

import pandas as pd
import pytest

from benchmarks.savers_verdict import report


@pytest.fixture(scope="module")
def rebuilt() -> str:
    return report.build()


def table(text: str, heading: str, index: int = 1) -> list[list[str]]:
    """The rows (cells) of the `index`-th table after `heading`."""
    part = text[text.index(heading) :]
    tables = re.findall(r"((?:^\|.*\n)+)", part, flags=re.M)
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in tables[index - 1].splitlines()[2:]]


def rows(text: str, heading: str, index: int = 1) -> dict[str, list[str]]:
    """The `index`-th table after `heading`, by its first cell."""
    return {cells[0]: cells for cells in table(text, heading, index)}


def test_the_committed_report_rebuilds_from_the_committed_runs(rebuilt):
    assert (report.RESULTS / "report.md").read_text() == rebuilt


def test_no_saver_is_above_grpo_with_as_many_rollouts(rebuilt):
    verdict = rows(rebuilt, "## The verdict")
    assert list(verdict) == ["the probe", "the adaptive budget", "fused rounds"]
    assert all(row[-1] == "not above: leaves the library" for row in verdict.values())
    assert verdict["the probe"][2] == (
        "section 11: +0.0006 [-0.1966, +0.1978], 3 seeds; section 13: -0.0594 [-0.2881, +0.1693], 3 seeds"
    )
    assert verdict["the adaptive budget"][2] == "section 11: +0.0566 [-0.1231, +0.2364], 3 seeds"
    assert verdict["fused rounds"][2] == "section 11: -0.0096 [-0.1448, +0.1257], 3 seeds"


def test_the_differences_at_equal_generated_rollouts(rebuilt):
    equal = rows(rebuilt, "## At equal generated rollouts")
    # (seeds, budget, difference; the study's own point, as its report computes it)
    own_probe, own_adaptive = "-0.1608 [-0.3957, +0.0740] (step 8)", "-0.0958 [-0.2664, +0.0747] (step 8)"
    expected = {
        "`probe` - `grpo`, section 11": ("3", "224", "-0.0948 [-0.3236, +0.1340]", own_probe),
        "`probe` - `grpo_half`, section 11": ("3", "224", "+0.0006 [-0.1966, +0.1978]", None),
        "`probe` - `grpo`, section 13": ("3", "1,024-1,088", "+0.0096 [-0.1066, +0.1258]", None),
        "`probe` - `grpo_4x8`, section 13": ("3", "1,088-1,152", "-0.0594 [-0.2881, +0.1693]", None),
        "`adaptive` - `grpo`, section 11": ("3", "376-444", "-0.0793 [-0.2509, +0.0924]", own_adaptive),
        "`adaptive` - `grpo_half`, section 11": ("3", "256", "+0.0566 [-0.1231, +0.2364]", None),
        "`probe_fused` - `grpo_half`, section 11": ("3", "212", "-0.0096 [-0.1448, +0.1257]", None),
        "`probe_fused` - `probe`, section 11": ("3", "212", "-0.0054 [-0.1554, +0.1446]", None),
    }
    for key, (seeds, budget, difference, own) in expected.items():
        row = equal[key]
        assert (row[3], row[7], row[10], row[12]) == (seeds, budget, difference, "no"), key
        if own is not None:  # section 11's own table: BENCHMARKS.md's "minus GRPO" at equal steps
            assert row[13] == own, key
    per_seed = [r for r in table(rebuilt, "Per seed:") if r[0] == "`adaptive` - `grpo_half`, section 11"]
    assert [r[1:3] for r in per_seed] == [["0", "256"], ["1", "256"], ["2", "256"]]  # GRPO with half the group's last


def test_the_probe_is_read_at_each_of_its_evaluations(rebuilt):
    found = [r[1:] for r in table(rebuilt, "## At each of") if r[0] == "`probe` - `grpo_4x8`, section 13"]
    assert found == [
        ["step 16", "448", "3 of 3", "-0.0105 [-0.1291, +0.1080]"],
        ["T/2", "728-756", "3 of 3", "-0.0148 [-0.1080, +0.0784]"],
        ["T", "1,540-1,792", "0 of 3", "beyond the control's last evaluation"],
    ]


def test_a_curve_is_read_linearly_between_evaluations_and_never_beyond_its_last():
    curve = pd.DataFrame({"rollouts": [0.0, 100.0, 200.0], "accuracy": [0.3, 0.5, 0.6]})
    assert report.read_at(curve, 150.0) == pytest.approx(0.55)
    with pytest.raises(ValueError, match="beyond the run's last evaluation"):
        report.read_at(curve, 201.0)
    longer = pd.DataFrame({"rollouts": [0.0, 100.0, 400.0], "accuracy": [0.3, 0.4, 0.7]})
    frame = report.compare({0: curve}, {0: longer})  # the common budget: the shorter run's last, 200
    assert frame.loc[0, "budget"] == 200.0
    assert frame.loc[0, "difference"] == pytest.approx(0.6 - 0.5)


def test_a_saver_is_above_only_where_every_study_s_lower_end_is_above_zero(monkeypatch):
    def summary(low_11: float, low_13: float, seeds: int = 3) -> dict:
        out = {}
        for _, study, arm, control in report.COMPARISONS:
            low = low_13 if study == "smollm2_revisits" else low_11
            out[(study, arm, control)] = {"seeds": seeds, "mean": low + 0.1, "low": low, "high": low + 0.2}
        return out

    assert report.verdicts(summary(0.01, 0.02))["probe"]["verdict"] == "above the control"
    assert report.verdicts(summary(0.01, -0.01))["probe"]["verdict"] == "not above: leaves the library"
    assert report.verdicts(summary(0.01, -0.01))["adaptive"]["verdict"] == "above the control"  # section 11 alone
    assert report.verdicts(summary(0.01, 0.02, seeds=1))["fused"]["verdict"].startswith("cannot say")
