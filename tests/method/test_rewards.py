"""Tests for `lze_trl.rewards`: answer extraction, math-verify equivalences, format reward, threads and processes."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lze_trl.rewards import _timeouts, format_reward, last_boxed, math_accuracy


def score(completion, gold):
    return math_accuracy([completion], [gold])[0]


# (gold, completion): equivalent answers that must score 1.0.
EQUIVALENT = {
    "fraction_vs_decimal": (r"\frac{1}{2}", r"The answer is $\boxed{0.5}$."),
    "decimal_vs_fraction": ("0.5", r"\boxed{\frac{1}{2}}"),
    "frac_vs_slash": (r"\frac{3}{4}", r"\boxed{3/4}"),
    "slash_vs_frac": ("3/4", r"\boxed{\frac34}"),
    "dfrac": (r"\frac{1}{2}", r"\boxed{\dfrac{1}{2}}"),
    "tfrac_inline_math": (r"\frac{1}{2}", r"So $\boxed{\tfrac12}$."),
    "dfrac_with_sqrt": (r"\dfrac{\sqrt{3}}{2}", r"\boxed{\frac{\sqrt3}{2}}"),
    "degrees_gold": (r"30^\circ", r"\boxed{30}"),
    "degrees_answer": ("30", r"\boxed{30^\circ}"),
    "degrees_braced": ("30", r"\boxed{30^{\circ}}"),
    "degrees_in_words": ("30", r"\boxed{30\text{ degrees}}"),
    "unit_cm": ("5", r"\boxed{5 \text{ cm}}"),
    "unit_mbox": ("12", r"\boxed{12\mbox{ inches}}"),
    "dollar_sign": ("18.90", r"\boxed{\$18.90}"),
    "percent": (r"10\%", r"\boxed{10\%}"),
    "half_open_interval": ("(1, 2]", r"\boxed{(1,2]}"),
    "interval_left_right": ("[2, 5)", r"\boxed{\left[2, 5\right)}"),
    "infinite_interval": (r"(-\infty, 3)", r"\boxed{(-\infty,3)}"),
    "interval_union": (r"(-\infty,1] \cup [3,\infty)", r"\boxed{(-\infty, 1]\cup[3, \infty)}"),
    "text_choice": (r"\text{(B)}", r"\boxed{B}"),
    "text_choice_both": (r"\text{(C)}", r"\boxed{\text{(C)}}"),
    "text_name": (r"\text{Evelyn}", r"\boxed{\text{Evelyn}}"),
    "textbf_number": ("4", r"\boxed{\textbf{4}}"),
    "thousands_comma": ("1000", r"\boxed{1,000}"),
    "thousands_latex_gold": (r"1,\!000", r"\boxed{1000}"),
    "thousands_braced_comma": ("1000", r"\boxed{1{,}000}"),
    "thousands_gold_plain": ("1,000", r"\boxed{1000}"),
    "several_boxes_last_wins": ("2", r"First I got \boxed{5}, but correcting the sign: \boxed{2}."),
    "equation_vs_value": ("3", r"\boxed{x = 3}"),
    "value_vs_equation": ("x=3", r"\boxed{3}"),
    "equation_of_line": ("y = 2x + 3", r"\boxed{y=2x+3}"),
    "unordered_list": ("2, 3", r"\boxed{3, 2}"),
    "set_braces": (r"\{1,2\}", r"\boxed{\{2, 1\}}"),
    "matrix": (r"\begin{pmatrix} -1 \\ 2 \end{pmatrix}", r"\boxed{\begin{pmatrix}-1\\2\end{pmatrix}}"),
    "polar_tuple": (r"\left( 3, \frac{\pi}{2} \right)", r"\boxed{(3, \pi/2)}"),
    "expanded_polynomial": ("x^2+2x+1", r"\boxed{(x+1)^2}"),
    "simplified_radical": (r"2\sqrt{5}", r"\boxed{\sqrt{20}}"),
    "sqrt_without_braces": (r"\sqrt{2}", r"\boxed{\sqrt 2}"),
    "leading_zero_aime": ("025", r"\boxed{25}"),
    "integer_vs_float": ("18", r"\boxed{18.0}"),
    "negative": ("-7", r"\boxed{-7}"),
    "fbox": ("7", r"\fbox{7}"),
    "brace_less_box": ("5", r"The answer is $\boxed 5$."),
    "box_after_think": ("9", r"<think>maybe \boxed{3}?</think> The answer is \boxed{9}."),
    "gold_is_a_worked_solution": (r"so the answer is $\boxed{\frac{14}{3}}$.", r"\boxed{\dfrac{14}{3}}"),
}

# (gold, completion): wrong or missing answers that must score 0.0.
WRONG = {
    "wrong_decimal": (r"\frac{1}{2}", r"\boxed{0.3}"),
    "wrong_fraction": (r"\frac{1}{2}", r"\boxed{\frac{1}{3}}"),
    "open_vs_half_open": ("(1, 2]", r"\boxed{(1,2)}"),
    "closed_vs_half_open": ("(1, 2]", r"\boxed{[1,2]}"),
    "wrong_equation": ("3", r"\boxed{x = 4}"),
    "order_of_magnitude": ("1000", r"\boxed{100}"),
    "sign": ("-7", r"\boxed{7}"),
    "wrong_choice": (r"\text{(B)}", r"\boxed{\text{(C)}}"),
    "wrong_polynomial": ("x^2+2x+1", r"\boxed{(x-1)^2}"),
    "wrong_list": ("2, 3", r"\boxed{2, 4}"),
    "wrong_matrix": (r"\begin{pmatrix} -1 \\ 2 \end{pmatrix}", r"\boxed{\begin{pmatrix}2\\-1\end{pmatrix}}"),
    "approximation_of_pi": (r"\pi", r"\boxed{3.14}"),
    "percent_value": (r"10\%", r"\boxed{20\%}"),
    "earlier_box_was_right": ("2", r"\boxed{2} ... no wait, \boxed{5}"),
    "right_box_only_in_reasoning": ("9", r"<think>\boxed{9}</think> The answer is \boxed{8}."),
    "unclosed_box": ("72", r"The answer is \boxed{72"),
    "empty_box": ("72", r"The answer is \boxed{}"),
    "no_answer": ("72", "I could not solve this problem."),
    "empty_completion": ("72", ""),
    "last_number_is_wrong": ("72", "I first thought 72, but it is 70."),
}


@pytest.mark.parametrize(("gold", "completion"), EQUIVALENT.values(), ids=EQUIVALENT.keys())
def test_equivalent_answers_score_one(gold, completion):
    assert score(completion, gold) == 1.0


@pytest.mark.parametrize(("gold", "completion"), WRONG.values(), ids=WRONG.keys())
def test_wrong_answers_score_zero(gold, completion):
    assert score(completion, gold) == 0.0


def test_tables_are_graded_in_one_batch_as_individually():
    golds = [g for g, _ in EQUIVALENT.values()] + [g for g, _ in WRONG.values()]
    completions = [c for _, c in EQUIVALENT.values()] + [c for _, c in WRONG.values()]
    assert math_accuracy(completions, golds) == [1.0] * len(EQUIVALENT) + [0.0] * len(WRONG)


@pytest.mark.parametrize("gold", ["", "   ", r"\frac{", "}{", "$", r"\boxed{}", r"\boxed{"])
def test_unparsable_gold_gives_none(gold):
    assert math_accuracy([r"\boxed{1}", "1"], [gold, gold]) == [None, None]


def test_none_only_for_the_unparsable_gold_in_a_batch():
    assert math_accuracy([r"\boxed{1}", r"\boxed{1}", r"\boxed{2}"], ["1", r"\frac{", "1"]) == [1.0, None, 0.0]


@pytest.mark.parametrize(
    ("gold", "completion"),
    [
        ("72", "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether.\n#### 72"),
        ("72", "She sold 72 clips."),
        ("1000", "So they have 1,000 apples in total."),
        ("15000", "In 4 days it makes 3,750 * 4 = $15,000."),
        ("1234567", "The total is 1,234,567."),
        ("-7", "The temperature at midnight was 4 - 11 = -7 degrees."),
        ("2.5", "Each costs 5/2 = 2.5 dollars."),
        (r"\$18.90", "She pays $18.90."),
        ("9", "<think>it is 5, or maybe 3</think>The answer is 9."),
    ],
)
def test_gsm8k_final_number_fallback(gold, completion):
    assert score(completion, gold) == 1.0


@pytest.mark.parametrize(
    ("gold", "completion"),
    [
        ("72", "She sold 72 clips, then 3 more."),  # the *last* number is the answer
        ("5", "<think>so 5</think>I am not sure."),  # numbers inside the reasoning are ignored
        ("11", "x2 + y11z"),  # digits glued to words are not numbers
    ],
)
def test_gsm8k_fallback_takes_only_the_final_number(gold, completion):
    assert score(completion, gold) == 0.0


def test_box_takes_precedence_over_later_numbers():
    assert score(r"The answer is \boxed{72}. Check: 70 + 2 = 72, and 3 more.", "72") == 1.0
    assert score(r"\boxed{72} and then 73", "73") == 0.0


def test_conversational_completions():
    completions = [
        [{"role": "assistant", "content": r"Therefore the answer is $\boxed{\frac{1}{3}}$."}],
        [{"role": "assistant", "content": r"Therefore the answer is $\boxed{\frac{1}{2}}$."}],
        [  # tool use: the last assistant message holds the final answer
            {"role": "assistant", "content": r"Let me compute \boxed{1}.", "tool_calls": []},
            {"role": "tool", "content": "0.3333333"},
            {"role": "assistant", "content": r"So it is \boxed{1/3}."},
        ],
        [{"role": "assistant", "content": [{"type": "text", "text": r"It is \boxed{0.33333333}"}]}],
        [{"role": "assistant", "content": None}],
        [],
    ]
    assert math_accuracy(completions, [r"\frac{1}{3}"] * len(completions)) == [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]


def test_trl_style_call_with_extra_columns():
    rewards = math_accuracy(
        completions=[[{"role": "assistant", "content": r"\boxed{4}"}]],
        solution=["4"],
        prompts=[[{"role": "user", "content": "2+2?"}]],
        level=["Level 1"],
        trainer_state=None,
        log_extra=None,
    )
    assert rewards == [1.0]


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="2 completions but 1 solutions"):
        math_accuracy([r"\boxed{1}", r"\boxed{2}"], ["1"])


def test_overlong_answers_are_not_parsed():
    long_answer = "+".join(["1"] * 600)  # 1199 characters, over MAX_ANSWER_CHARS
    assert score(rf"\boxed{{{long_answer}}}", "600") == 0.0
    assert score(rf"\boxed{{{'+'.join(['1'] * 6)}}}", "6") == 1.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{1}{\sqrt{2}}"),
        (r"a \boxed{1} b \boxed{ {2} } c", "{2}"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces do not close the box
        (r"\boxed{a \} b}", r"a \} b"),
        (r"\fbox{3}", "3"),
        (r"\boxed {4}", "4"),
        (r"so $\boxed 12$.", "12"),
        (r"\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}"),
        (r"\boxed{1} then \boxed{2", None),  # the last box is never closed
        (r"\boxed", None),
        (r"\boxedx{1}", None),
        ("no box", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (r"The answer is \boxed{4}.", 1.0),
        (r"<think>2+2</think> \boxed{4}", 1.0),
        (r"Reasoning from a prefilled <think>...</think>\boxed{4}", 1.0),
        (r"</think>\boxed{4}", 1.0),
        (r"<think>draft \boxed{3}</think> final \boxed{4}", 1.0),
        ([{"role": "assistant", "content": r"\boxed{1}"}], 1.0),
        ("The answer is 4.", 0.0),
        (r"\boxed{4} or \boxed{5}", 0.0),
        (r"\boxed{}", 0.0),
        (r"\boxed{4", 0.0),
        (r"<think>2+2 is \boxed{4}", 0.0),
        (r"</think>done<think>\boxed{4}", 0.0),
        (r"<think>2+2</think> 4", 0.0),
    ],
)
def test_format_reward(completion, expected):
    assert format_reward([completion]) == [expected]


def test_timeouts_on_main_thread_only():
    assert _timeouts() == (5, 5)
    result = []
    thread = threading.Thread(target=lambda: result.append(_timeouts()))
    thread.start()
    thread.join()
    assert result == [(None, None)]


def test_works_in_worker_threads():
    # math-verify's signal-based timeout raises off the main thread; math_accuracy must disable it there.
    completions = [r"\boxed{0.5}", r"\boxed{1}", "It is 1,000.", r"\boxed{(1,2]}"] * 4
    golds = [r"\frac12", r"\frac12", "1000", "(1, 2]"] * 4
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda pair: math_accuracy([pair[0]], [pair[1]])[0], zip(completions, golds)))
    assert results == [1.0, 0.0, 1.0, 1.0] * 4


def test_works_in_a_spawned_worker_process():
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        future = pool.submit(math_accuracy, [r"\boxed{0.5}", r"\boxed{2}", "#### 1,000"], [r"\frac12", "3", "1000"])
        assert future.result(timeout=120) == [1.0, 0.0, 1.0]


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_integers_with_and_without_separators(n):
    assert math_accuracy([rf"\boxed{{{n:,}}}", f"The answer is {n:,}.", rf"\boxed{{{n + 1}}}"], [str(n)] * 3) == [
        1.0,
        1.0,
        0.0,
    ]


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=999), st.integers(min_value=2, max_value=999))
def test_fractions_in_three_notations(p, q):
    gold = rf"\frac{{{p}}}{{{q}}}"
    assert math_accuracy([rf"\boxed{{{p}/{q}}}", rf"\boxed{{\dfrac{{{p}}}{{{q}}}}}"], [gold, gold]) == [1.0, 1.0]
    assert score(rf"\boxed{{\frac{{{p + 1}}}{{{q}}}}}", gold) == 0.0
