"""The `carries` task: levels by number of carries, the slipping warm-start solver, splits and the task registry."""

import numpy as np
import pytest

from lze_examples.tasks import TASKS, arithmetic_reward, carries, get_task, is_test_prompt
from lze_examples.tasks.carries import (
    DEFAULT_N_OOD,
    LEVELS,
    OOD_LEVELS,
    TRAIN_LEVELS,
    WARM_START_LEVELS,
    column_sum,
    count_carries,
    in_ood_range,
    make_dataset,
    make_problem,
    make_splits,
    ood_problems,
    warm_start_examples,
)


def operands(prompt):
    a, b = prompt[:-1].split("+")
    return int(a), int(b)


def test_column_sum_counts_carries_and_forgets_the_chosen_ones():
    assert column_sum(38, 25) == (63, 1)
    assert column_sum(999, 1) == (1000, 3)  # a carry chain: every column carries
    assert count_carries(95, 17) == 2 and count_carries(12, 34) == 0
    assert column_sum(38, 25, [True]) == (53, 1)  # the carry forgotten: 8+5 -> 3, 3+2 -> 5
    assert column_sum(287, 790, [True]) == (977, 1)  # the tens' carry forgotten: no chain into the hundreds
    assert column_sum(95, 17, [False, True]) == (12, 2)  # the last carry forgotten: the leading 1 is lost
    with pytest.raises(ValueError, match="non-negative"):
        column_sum(-1, 2)


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_each_level_has_its_digits_and_carries(level):
    rng = np.random.default_rng(level)
    digits, carries_wanted = LEVELS[level]
    for _ in range(100):
        problem = make_problem(rng, level)
        a, b = operands(problem["prompt"])
        assert int(problem["answer"]) == a + b == eval(problem["prompt"][:-1])
        assert len(str(a)) == len(str(b)) == digits
        assert count_carries(a, b) == carries_wanted
    with pytest.raises(ValueError, match="difficulty"):
        make_problem(rng, 9)


def test_the_ood_split_is_the_operand_range_rl_never_trains_on():
    ood = make_dataset(DEFAULT_N_OOD, seed=0, split="ood")
    prompts = list(ood["prompt"])
    assert len(prompts) == len(set(prompts)) == DEFAULT_N_OOD == 180  # every prompt of the range, once
    for prompt in prompts:
        a, b = operands(prompt)
        assert in_ood_range(prompt) and 80 <= min(a, b) and max(a, b) <= 99 and count_carries(a, b) == 2
    assert set(ood["difficulty"]) == set(OOD_LEVELS) == {2}
    assert LEVELS[2][1] <= max(WARM_START_LEVELS)  # the warm start was shown two carries (with slips), RL never here
    assert sorted(prompts) == sorted(p["prompt"] for p in ood_problems())
    assert list(make_dataset(20, seed=0, split="ood")["prompt"]) == prompts[:20]  # a seeded subset
    assert list(make_dataset(20, seed=1, split="ood")["prompt"]) != prompts[:20]
    assert len(ood_problems((1, 2))) == 400 and not ood_problems((0,))  # both operands >= 80: the tens carry
    with pytest.raises(ValueError, match=r"holds 180 prompts.*n_ood"):
        make_dataset(200, split="ood")
    with pytest.raises(ValueError, match="two-digit"):
        ood_problems((4,))
    # RL (train and test) never holds a prompt of the range, at any level
    splits = make_splits(2000, 600, 10, seed=0)
    assert not any(in_ood_range(p) for split in ("train", "test") for p in splits[split]["prompt"])
    assert not in_ood_range("79+99=") and not in_ood_range("180+190=") and in_ood_range("80+80=")


def test_the_demo_evaluates_the_whole_ood_range_by_default():
    from lze_examples.demo import DemoConfig

    assert DemoConfig().n_ood is None and DemoConfig().resolved_n_ood() == 180
    assert DemoConfig(task="arithmetic").resolved_n_ood() == 200 and DemoConfig(n_ood=50).resolved_n_ood() == 50


def test_splits_are_disjoint_balanced_and_reproducible():
    splits = make_splits(300, 120, 60, seed=0)
    train, test, ood = (set(splits[k]["prompt"]) for k in ("train", "test", "ood"))
    assert not train & test
    assert not any(is_test_prompt(p) for p in train) and all(is_test_prompt(p) for p in test)
    assert sorted(set(splits["train"]["difficulty"])) == list(TRAIN_LEVELS)
    assert sorted(set(splits["ood"]["difficulty"])) == list(OOD_LEVELS)
    assert np.bincount(splits["train"]["difficulty"]).tolist() == [75] * 4
    assert make_dataset(50, seed=0)[:] == make_dataset(50, seed=0)[:]
    assert make_dataset(50, seed=0)["prompt"] != make_dataset(50, seed=1)["prompt"]
    with pytest.raises(ValueError, match="split"):
        make_dataset(5, split="valid")


def test_warm_start_forgets_each_carry_with_the_given_probability():
    clean = warm_start_examples(3000, seed=0)
    assert {len(t.split("+")[0]) for t in clean} == {2, 3}
    with pytest.raises(ValueError, match="numbers of carries"):
        warm_start_examples(3, levels=[3])
    assert clean == warm_start_examples(3000, seed=0, carry_drop_prob=0.0)
    assert all(eval(t.split("=")[0]) == int(t.split("=")[1]) for t in clean)
    assert not any(is_test_prompt(t.split("=")[0] + "=") for t in clean)
    q = 0.4
    slipped = warm_start_examples(3000, seed=0, carry_drop_prob=q)
    by_carries: dict[int, list[bool]] = {}
    for text in slipped:
        prompt, answer = text.rstrip("\n").split("=")
        a, b = operands(prompt + "=")
        by_carries.setdefault(count_carries(a, b), []).append(int(answer) == a + b)
    # a prompt with k carries is written correctly with probability (1 - q) ** k
    for k, correct in by_carries.items():
        assert np.mean(correct) == pytest.approx((1 - q) ** k, abs=0.05), k
    assert max(by_carries) == 2  # the warm start never sees three carries
    with pytest.raises(ValueError, match="carry_drop_prob"):
        warm_start_examples(3, carry_drop_prob=1.5)


def test_registry_and_reward():
    assert get_task("carries") is carries and set(TASKS) == {"carries", "arithmetic", "word_problems"}
    with pytest.raises(ValueError, match="task='sums' is not an embedded task"):
        get_task("sums")
    assert arithmetic_reward(["63", "53", " 63"], ["63", "63", "63"]) == [1.0, 0.0, 1.0]
