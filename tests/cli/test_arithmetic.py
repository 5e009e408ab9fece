import re

import numpy as np
import pytest
from datasets import Dataset
from hypothesis import given, settings
from hypothesis import strategies as st

from lze_examples.tasks import arithmetic
from lze_examples.tasks.arithmetic import (
    CHARSET,
    OOD_LEVELS,
    TRAIN_LEVELS,
    arithmetic_reward,
    carry_dropped_answer,
    is_test_prompt,
    make_dataset,
    make_problem,
    make_splits,
    parse_completion,
    warm_start_examples,
)


ALL_LEVELS = list(range(8))
_NUMBER = re.compile(r"[0-9]+")
_OPERATOR = re.compile(r"[-+*]")


def _problems(level: int, n: int = 300, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [make_problem(rng, level) for _ in range(n)]


def _operands(prompt: str) -> list[int]:
    return [int(x) for x in _NUMBER.findall(prompt)]


def _operators(prompt: str) -> list[str]:
    return _OPERATOR.findall(prompt)


def _check_problem(problem: dict, level: int) -> None:
    prompt, answer = problem["prompt"], problem["answer"]
    assert problem["difficulty"] == level
    assert prompt.endswith("=") and prompt.count("=") == 1
    assert re.fullmatch(r"-?(0|[1-9][0-9]*)", answer), answer
    # Python's own evaluation of the expression is the verifier's ground truth.
    assert int(answer) == eval(prompt[:-1])
    assert len(prompt) <= 24 and len(answer) <= 8
    assert set(prompt + answer) <= set(CHARSET)


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_answers_match_python_eval(level):
    for problem in _problems(level):
        _check_problem(problem, level)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), level=st.sampled_from(ALL_LEVELS))
def test_property_answer_equals_eval(seed, level):
    _check_problem(make_problem(np.random.default_rng(seed), level), level)


def test_level_generators_follow_docstring():
    for p in _problems(0):
        assert _operators(p["prompt"]) == ["+"] and max(_operands(p["prompt"])) <= 9
    for p in _problems(1):
        a, b = _operands(p["prompt"])
        if _operators(p["prompt"]) == ["-"]:
            assert a <= 9 and b <= 9
        else:
            assert 10 <= a <= 99 and 10 <= b <= 99 and a % 10 + b % 10 < 10 and a + b <= 99
    for p in _problems(2):
        (op,), (a, b) = _operators(p["prompt"]), _operands(p["prompt"])
        assert 10 <= a <= 99 and 10 <= b <= 99
        assert a % 10 + b % 10 >= 10 if op == "+" else a % 10 < b % 10
    for p in _problems(3):
        a, b = _operands(p["prompt"])
        assert _operators(p["prompt"]) == ["*"] and 2 <= a <= 99 and 2 <= b <= 9
    for p in _problems(4):
        assert len(_operators(p["prompt"])) == 2 and "*" not in p["prompt"]
        assert all(1 <= x <= 99 for x in _operands(p["prompt"]))
    for p in _problems(5):
        assert len(_operators(p["prompt"])) == 1 and "*" not in p["prompt"]
        assert all(100 <= x <= 9999 for x in _operands(p["prompt"]))
    for p in _problems(6):
        assert len(_operators(p["prompt"])) == 2 and "*" not in p["prompt"]
        assert all(1000 <= x <= 9999 for x in _operands(p["prompt"]))
    for p in _problems(7):
        ops = _operators(p["prompt"])
        assert len(ops) == 3 and "*" in ops and ({"+", "-"} & set(ops))
        assert all(1 <= x <= 99 for x in _operands(p["prompt"]))


def test_levels_cover_their_variants():
    # Both branches of the mixed levels are actually drawn.
    assert {tuple(_operators(p["prompt"])) for p in _problems(1)} == {("+",), ("-",)}
    assert {tuple(_operators(p["prompt"])) for p in _problems(2)} == {("+",), ("-",)}
    assert {len(str(_operands(p["prompt"])[0])) for p in _problems(3)} == {1, 2}
    assert {len(str(x)) for p in _problems(5) for x in _operands(p["prompt"])} == {3, 4}
    assert {"(" in p["prompt"] for p in _problems(7)} == {True, False}
    assert any(int(p["answer"]) < 0 for p in _problems(4))


def test_invalid_level_raises():
    with pytest.raises(ValueError):
        make_problem(np.random.default_rng(0), 8)
    with pytest.raises(ValueError):
        make_problem(np.random.default_rng(0), -1)


def test_make_problem_deterministic_for_rng_seed():
    assert _problems(4, seed=3) == _problems(4, seed=3)
    assert _problems(4, seed=3) != _problems(4, seed=4)


@pytest.mark.parametrize("split", ["train", "test", "ood"])
def test_make_dataset_deterministic_and_seed_dependent(split):
    first = make_dataset(60, seed=1, split=split)
    assert isinstance(first, Dataset)
    assert first.column_names == ["prompt", "answer", "difficulty"]
    assert len(first) == 60
    assert first.to_list() == make_dataset(60, seed=1, split=split).to_list()
    assert first["prompt"] != make_dataset(60, seed=2, split=split)["prompt"]


def test_make_dataset_levels_and_balance():
    train = make_dataset(600, seed=0, split="train")
    counts = np.bincount(train["difficulty"], minlength=8)
    assert counts.tolist() == [100] * 6 + [0, 0]
    assert sorted(set(make_dataset(50, seed=0, split="ood")["difficulty"])) == list(OOD_LEVELS)
    assert set(make_dataset(50, seed=0, levels=[2, 5], split="test")["difficulty"]) == {2, 5}
    # Rows are shuffled, not in round-robin order.
    assert train["difficulty"][:6] != list(TRAIN_LEVELS)
    for row in train:
        _check_problem(row, row["difficulty"])


def test_make_dataset_invalid_split_raises():
    with pytest.raises(ValueError):
        make_dataset(10, seed=0, split="validation")


def test_train_test_disjoint_across_seeds():
    train = make_dataset(3000, seed=0, split="train")
    test = make_dataset(600, seed=0, split="test")
    other_seed_test = make_dataset(600, seed=7, split="test")
    assert not set(train["prompt"]) & set(test["prompt"])
    assert not set(train["prompt"]) & set(other_seed_test["prompt"])
    assert all(is_test_prompt(p) for p in test["prompt"])
    assert not any(is_test_prompt(p) for p in train["prompt"])
    # The partition is a non-trivial split of the level-0 pool (all 100 prompts `a+b=`).
    pool = [f"{a}+{b}=" for a in range(10) for b in range(10)]
    assert 5 <= sum(map(is_test_prompt, pool)) <= 40


def test_ood_prompts_are_longer_or_have_more_terms():
    train = make_dataset(600, seed=0, split="train")["prompt"]
    ood = make_dataset(200, seed=0, split="ood")["prompt"]

    def hard(prompt: str) -> bool:
        ops, operands = _operators(prompt), _operands(prompt)
        return len(ops) >= 3 or (len(ops) >= 2 and min(operands) >= 1000)

    assert all(hard(p) for p in ood)
    assert not any(hard(p) for p in train)
    assert max(len(_operators(p)) for p in ood) > max(len(_operators(p)) for p in train)
    assert np.mean([len(p) for p in ood]) > np.mean([len(p) for p in train])


def test_make_splits():
    splits = make_splits(30, 20, 10, seed=0)
    assert {name: len(ds) for name, ds in splits.items()} == {"train": 30, "test": 20, "ood": 10}
    assert splits["train"].to_list() == make_dataset(30, seed=0, split="train").to_list()
    assert set(splits["ood"]["difficulty"]) <= set(OOD_LEVELS)
    assert set(splits["test"]["difficulty"]) <= set(TRAIN_LEVELS)


def test_warm_start_examples():
    examples = warm_start_examples(200, seed=0)
    assert examples == warm_start_examples(200, seed=0)
    assert examples != warm_start_examples(200, seed=1)
    assert len(examples) == 200
    for text in examples:
        assert text.endswith("\n") and text.count("\n") == 1
        prompt, answer = text[:-1].split("=")
        assert int(answer) == eval(prompt)
        assert not is_test_prompt(prompt + "=")
        assert len(_operators(prompt)) == 1  # levels 0-3 only
    assert set(warm_start_examples(20, seed=0, levels=[0])) <= {
        f"{a}+{b}={a + b}\n" for a in range(10) for b in range(10)
    }


def _no_carry(a: int, b: int, op: str) -> int:
    """Reference for carry_dropped_answer, written independently: pad to equal width, one column at a time."""
    if op == "-" and a < b:
        return -_no_carry(b, a, "-")
    if op == "*":
        big, small = max(a, b), min(a, b)
        return int("".join(str(int(d) * small % 10) for d in str(big)))
    width = max(len(str(a)), len(str(b)))
    sa, sb = str(a).zfill(width), str(b).zfill(width)
    sign = 1 if op == "+" else -1
    return int("".join(str((int(x) + sign * int(y)) % 10) for x, y in zip(sa, sb)))


@given(a=st.integers(0, 9999), b=st.integers(0, 9999), op=st.sampled_from("+-*"))
def test_carry_dropped_answer_drops_every_carry(a, b, op):
    prompt = f"{a}{op}{b}="
    dropped = carry_dropped_answer(prompt)
    if op == "*" and min(a, b) > 9:
        assert dropped is None
        return
    assert dropped == _no_carry(a, b, op)
    if op == "+" and all(int(x) + int(y) < 10 for x, y in zip(str(a).zfill(5), str(b).zfill(5))):
        assert dropped == a + b  # nothing to carry: the slip changes nothing


def test_carry_dropped_answer_examples():
    prompts = ("38+25=", "52-17=", "17-52=", "47*3=", "7*8=", "12+7=")
    assert [carry_dropped_answer(p) for p in prompts] == [53, 45, -45, 21, 6, 19]
    assert carry_dropped_answer("1+2+3=") is None and carry_dropped_answer("(1+2)*3=") is None


def test_warm_start_carry_drop_changes_answers_only():
    clean = warm_start_examples(2000, seed=0)
    assert warm_start_examples(2000, seed=0, carry_drop_prob=0.0) == clean
    for prob in (0.5, 1.0):
        noisy = warm_start_examples(2000, seed=0, carry_drop_prob=prob)
        assert [t.split("=")[0] for t in noisy] == [t.split("=")[0] for t in clean]  # same prompts, same order
        slips = [t != c for t, c in zip(noisy, clean)]
        carries = [carry_dropped_answer(c.split("=")[0] + "=") != eval(c.split("=")[0]) for c in clean]
        assert not any(s and not c for s, c in zip(slips, carries))  # only carrying examples change
        for text, changed in zip(noisy, slips):
            if changed:
                assert int(text.split("=")[1]) == carry_dropped_answer(text.split("=")[0] + "=")
        share = sum(slips) / sum(carries)
        assert share == 1.0 if prob == 1.0 else abs(share - prob) < 0.05
    with pytest.raises(ValueError, match="carry_drop_prob"):
        warm_start_examples(10, carry_drop_prob=1.5)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("19", 19),
        ("19\n", 19),
        ("-3 junk", -3),
        ("42=7", 42),
        ("007", 7),
        (" 7", 7),  # leading spaces are skipped
        ("  -12\n5", -12),
        ("abc", None),
        ("", None),
        ("-", None),
        ("- 3", None),
        ("+5", None),
        ("\n5", None),  # a leading newline ends the answer
        ("x19", None),
    ],
)
def test_parse_completion(text, expected):
    assert parse_completion(text) == expected


def test_arithmetic_reward():
    completions = ["19\n", "18", "abc", "", "-3 junk", "19 and more", " 19"]
    answers = ["19", "19", "19", "0", "-3", "19", "19"]
    assert arithmetic_reward(completions, answer=answers) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    # Extra keyword arguments passed by the trainer are ignored.
    assert arithmetic_reward(["5"], answer=["5"], prompts=["2+3="], difficulty=[0]) == [1.0]


def test_arithmetic_reward_conversational():
    completions = [
        [{"role": "assistant", "content": "12"}],
        [{"role": "assistant", "content": "13"}],
        [],
    ]
    assert arithmetic_reward(completions, answer=["12", "12", "12"]) == [1.0, 0.0, 0.0]


def test_arithmetic_reward_length_mismatch_raises():
    with pytest.raises(ValueError):
        arithmetic_reward(["1", "2"], answer=["1"])


def test_reward_on_dataset_answers():
    dataset = make_dataset(50, seed=0, levels=ALL_LEVELS, split="train")
    assert arithmetic_reward(dataset["answer"], answer=dataset["answer"]) == [1.0] * 50
    off_by_one = [str(int(a) + 1) for a in dataset["answer"]]
    assert arithmetic_reward(off_by_one, answer=dataset["answer"]) == [0.0] * 50


def test_charset():
    assert len(set(CHARSET)) == len(CHARSET)
    assert set("0123456789+-*=()\n") <= set(CHARSET)
    used = set()
    for level in ALL_LEVELS:
        for p in _problems(level):
            used |= set(p["prompt"] + p["answer"])
    used |= set("".join(warm_start_examples(100, seed=0)))
    assert used <= set(CHARSET)
    assert set(CHARSET) - used <= {" "}


def test_module_constants():
    assert arithmetic.TRAIN_LEVELS == (0, 1, 2, 3, 4, 5)
    assert arithmetic.OOD_LEVELS == (6, 7)
