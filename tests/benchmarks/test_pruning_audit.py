"""The pruning audit (benchmarks/pruning_audit/, issue #82): its report rebuilds from the committed runs of the six
pruning studies, and the four readings BENCHMARKS.md section 14 and the README quote are the runs' numbers."""

import re

import pytest

from benchmarks.pruning_audit import report


@pytest.fixture(scope="module")
def rebuilt() -> str:
    return report.build()


def rows(text: str, heading: str, index: int = 1) -> dict[str, list[str]]:
    """The `index`-th table after `heading`, by its leading cells (joined by ` | ` where the first repeats)."""
    part = text[text.index(heading) :]
    tables = re.findall(r"((?:^\|.*\n)+)", part, flags=re.M)
    lines = tables[index - 1].splitlines()[2:]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    return {" | ".join(c[:2]): c for c in cells}


def test_the_committed_report_rebuilds_from_the_committed_runs(rebuilt):
    assert (report.RESULTS / "report.md").read_text() == rebuilt


def test_the_gain_is_on_the_test_levels_not_on_the_training_prompts(rebuilt):
    gain = rows(rebuilt, "## Where the gain is")
    both = gain["`grpo_prune` - `grpo` | `epoch_exploration`"]
    assert both[3:5] == ["+0.0342 [+0.0249, +0.0436]", "+0.0015 [-0.0053, +0.0082]"]  # test levels 1-2, all levels
    levels = rows(rebuilt, "## Where the gain is", 2)
    assert levels["`grpo` | `epoch_exploration`"][4] == "0.333"  # a third of GRPO's groups on levels 1-2
    assert levels["`grpo_prune` | `epoch_exploration`"][4] == "0.524"  # about half of the pruned arm's


def test_under_the_first_check_every_both_sides_test_is_void(rebuilt):
    check = rows(rebuilt, "## The manipulation check as")
    for key in ("`grpo_prune` | `epoch_exploration`", "`grpo_prune` | `smaller_batch`",
                "`grpo_prune_small` | `smaller_batch`", "`grpo_prune` | `dead_filter`"):  # fmt: skip
        assert check[key][6] in ("0.52", "0.53") and check[key][7:] == ["not met", "met"], key
    pilot = rows(rebuilt, "## The manipulation check as", 2)
    assert pilot["`grpo_prune` (pilot) | 100, 101"][-1] == "0.52"  # read before the epoch protocol's check


def test_the_smaller_batch_over_its_last_two_evaluations(rebuilt):
    last = rows(rebuilt, "## The smaller batch")
    assert last["`grpo_small` | 16"][2:5] == ["0.8469", "0.8479", "0.8401"]
    compared = rows(rebuilt, "## The smaller batch", 2)
    assert compared["`grpo_prune` - `grpo_small` | the mean of each arm's last two evaluations"][3] == (
        "+0.0337 [+0.0209, +0.0465]"
    )


def test_holm_over_the_eleven_declared_tests(rebuilt):
    tests = rows(rebuilt, "## Holm over every declared pruning test")
    assert len(tests) == len(report.DECLARED) == 11
    smaller = tests["`smaller_batch` 2 | `grpo_prune_small` - `grpo_small`"]
    assert smaller[6:10] == ["0.0094", "differs", "not shown", "differs"]
    standing = [key for key, row in tests.items() if row[8] in ("differs", "non-inferior")]
    assert standing == ["`epoch_exploration` 2 | `grpo_prune` - `grpo`",
                        "`epoch_exploration` 3 | `grpo_prune` - `grpo_prune_unsolved`",
                        "`smaller_batch` 1 | `grpo_prune` - `grpo_small`",
                        "`dead_filter` 1 | `grpo_prune` - `grpo_filter`"]  # fmt: skip
    assert all(row[10] in ("void", "not shown") for row in tests.values())  # the first check: none stands


def test_a_void_test_counted_with_p_1_moves_holm_s_levels():
    # four tests near 0 and one at 0.0094: beside six void tests (p = 1) the fifth level is 0.05 / 7, without them
    # 0.05 / 1
    assert report.holm([1e-6] * 4 + [0.0094] + [1.0] * 6)[4] is False
    assert report.holm([1e-6] * 4 + [0.0094])[4] is True
