"""Math reward functions following the TRL reward-function convention.

A TRL reward function receives the generated `completions` (plain strings, or conversational lists of messages) plus
every dataset column as a keyword argument, and returns one float per completion (`None` skips the example). The
datasets built by [`lze_trl.data.load_math_dataset`] carry the gold answer in a `solution` column, so
[`math_accuracy`] can be passed directly to `GRPOTrainer(reward_funcs=[math_accuracy])`.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
import signal
import threading
from collections.abc import Sequence
from typing import Any


__all__ = ["format_reward", "last_boxed", "math_accuracy"]

# Seconds given to math-verify for parsing one expression / comparing one pair. math-verify enforces them with
# `signal.alarm`, which needs whole seconds, a POSIX system and the main thread (see `_timeouts`).
PARSING_TIMEOUT = 5
VERIFY_TIMEOUT = 5
# Extracted answers longer than this are scored 0.0 without being parsed: a cheap guard for the cases where
# math-verify runs without a timeout (worker threads), where a pathological expression could otherwise stall sympy.
MAX_ANSWER_CHARS = 1000

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\b")
# A number as written in GSM8K-style text: optional sign, optional thousands separators, optional decimals.
_NUMBER_RE = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


@functools.cache
def _math_verify():
    r"""Imports math-verify (an optional dependency: `pip install "lze-trl[math]"`) and builds the extraction configs.

    Returns `(parse, verify, boxed_extraction, number_extraction)`. Boxed content is parsed as LaTeX with
    math-verify's default normalisation (units, `\text{}`, `^\circ`, malformed `\frac12`, ...), plain-text
    expressions such as `3/4` by the expression extractor; bare numbers only by the expression extractor.
    """
    if importlib.util.find_spec("math_verify") is None:
        raise ImportError('math_accuracy needs the `math-verify` package: pip install "lze-trl[math]"')
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    latex = LatexExtractionConfig(
        boxed_match_priority=0,
        normalization_config=NormalizationConfig(
            basic_latex=True, units=True, malformed_operators=True, nits=True, boxed="all", equations=False
        ),
    )
    return parse, verify, [latex, ExprExtractionConfig()], [ExprExtractionConfig()]


class _DropTimeoutDisabledWarning(logging.Filter):
    """Hides math-verify's one-off "Timeout is disabled" warning, emitted when we deliberately pass `None`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


_timeout_warning_filter = _DropTimeoutDisabledWarning()


def _timeouts() -> tuple[int | None, int | None]:
    """Returns `(parsing_timeout, verify_timeout)` for math-verify in the calling context.

    math-verify 0.9 implements timeouts with `signal.signal(SIGALRM)` + `signal.alarm`, which raises `ValueError` off
    the main thread, and on non-POSIX systems it falls back to spawning one process per call. Outside the main thread
    of a POSIX process we therefore pass `None`, which math-verify documents as "no timeout". Worker *processes*
    (e.g. a `multiprocessing` pool) run on their own main thread, so they keep the timeouts.
    """
    if os.name == "posix" and hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread():
        return PARSING_TIMEOUT, VERIFY_TIMEOUT
    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if _timeout_warning_filter not in logger.filters:
            logger.addFilter(_timeout_warning_filter)
    return None, None


def last_boxed(text: str) -> str | None:
    r"""
    Returns the content of the last `\boxed{...}` (or `\fbox{...}`, or the brace-less `\boxed 5`) in `text`.

    Braces are matched with nesting, so `\boxed{\frac{1}{2}}` gives `\frac{1}{2}`; escaped braces (`\{`, `\}`) do not
    count. Returns `None` when there is no box, or when the last box is never closed (e.g. a truncated completion).

    Args:
        text (`str`):
            Text to search, e.g. a model completion or a MATH reference solution.

    Returns:
        `str` or `None`: The stripped content of the last box.
    """
    matches = list(_BOX_RE.finditer(text))
    if not matches:
        return None
    i = matches[-1].end()
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] != "{":
        # Brace-less form, as in some MATH solutions: `\boxed 5$`.
        token = re.match(r"[^\s$]+", text[i:])
        return token.group(0) if token and i > matches[-1].end() else None
    depth, start = 0, i + 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:i].strip()
        i += 1
    return None


def _completion_text(completion: str | Sequence[dict[str, Any]]) -> str:
    """Text of a completion: the string itself, or the content of the last assistant message."""
    if isinstance(completion, str):
        return completion
    messages = list(completion)
    if not messages:
        return ""
    message = next((m for m in reversed(messages) if m.get("role", "assistant") == "assistant"), messages[-1])
    content = message.get("content")
    if isinstance(content, list):  # multimodal-style content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _answer_region(text: str) -> str:
    """The part of a completion that holds the final answer: everything after the last `</think>`, if any."""
    return text.rsplit(_THINK_CLOSE, 1)[-1]


def _parse_answer(answer: str, boxed: bool, parsing_timeout: int | None) -> list:
    """Parses an extracted answer with math-verify, keeping only sympy results (no raw-string fallback)."""
    if len(answer) > MAX_ANSWER_CHARS:
        return []
    parse, _, boxed_extraction, number_extraction = _math_verify()
    extraction = boxed_extraction if boxed else number_extraction
    return parse(answer, extraction_config=extraction, fallback_mode="no_fallback", parsing_timeout=parsing_timeout)


def _parse_completion(text: str, parsing_timeout: int | None) -> list:
    """Extracts and parses the final answer of a completion: last box, else (GSM8K-style) the last number."""
    region = _answer_region(text)
    if _BOX_RE.search(region):
        boxed = last_boxed(region)
        if not boxed:  # last box empty or never closed: no final answer
            return []
        return _parse_answer(f"\\boxed{{{boxed}}}", True, parsing_timeout)
    numbers = _NUMBER_RE.findall(region)
    if not numbers:
        return []
    # math-verify also reads "1,000" as 1000; dropping the separators keeps that independent of its number regex.
    return _parse_answer(numbers[-1].replace(",", ""), False, parsing_timeout)


def _parse_gold(solution: str, parsing_timeout: int | None) -> list:
    """Parses a gold answer (a bare answer such as `\\frac{1}{2}`, or a text whose last box holds the answer)."""
    solution = str(solution).strip()
    gold = last_boxed(solution) if _BOX_RE.search(solution) else solution
    if not gold:
        return []
    return _parse_answer(f"\\boxed{{{gold}}}", True, parsing_timeout)


def math_accuracy(
    completions: list[str] | list[list[dict[str, Any]]],
    solution: list[str],
    **kwargs,
) -> list[float | None]:
    r"""
    Reward function that checks the final answer of each completion against the gold answer with math-verify.

    The final answer is the content of the last `\boxed{...}` after the reasoning (the text after the last
    `</think>`, or the whole completion when there is none). When that text has no box at all, the last number in it is
    used instead (GSM8K style, thousands separators allowed: `1,000` reads as `1000`); a box that is empty or never
    closed counts as no answer. Answer and gold are parsed and compared by `math_verify.parse` / `math_verify.verify`,
    which handle equivalent forms such as `\frac{1}{2}` vs `0.5` vs `1/2`, `30^\circ` vs `30`, `\text{}` wrappers,
    units, intervals and `x = 3` vs `3`.

    Math-verify's signal-based timeouts are used on the main thread of POSIX processes; in other threads (where
    `signal.alarm` is unavailable) timeouts are disabled, and answers longer than `MAX_ANSWER_CHARS` are scored 0.0
    without parsing.

    Args:
        completions (`list[str]` or `list[list[dict[str, Any]]]`):
            Completions to grade: plain strings, or conversational completions (lists of messages with `"role"` and
            `"content"`), in which case the last assistant message is graded.
        solution (`list[str]`):
            Gold answers, one per completion: a bare answer (`"\\frac{1}{2}"`, `"72"`), or a worked solution whose last
            `\boxed{}` holds the answer.
        **kwargs:
            Other dataset columns and trainer-provided arguments; unused, accepted for compatibility with
            [`~trl.GRPOTrainer`].

    Returns:
        `list[float | None]`: 1.0 for a correct answer, 0.0 for a wrong or missing one, and `None` when the gold answer
        cannot be parsed (the trainer then skips the example for this reward).

    Example:
    ```python
    >>> from lze_trl.rewards import math_accuracy

    >>> math_accuracy([r"So $x = \boxed{\dfrac{1}{2}}$.", "The total is 1,000 apples."], ["0.5", "1000"])
    [1.0, 1.0]
    ```
    """
    if len(completions) != len(solution):
        raise ValueError(f"Got {len(completions)} completions but {len(solution)} solutions; they must match.")
    verify = _math_verify()[1]
    parsing_timeout, verify_timeout = _timeouts()
    gold_cache: dict[str, list] = {}
    answer_cache: dict[str, list] = {}
    rewards: list[float | None] = []
    for completion, sol in zip(completions, solution, strict=True):
        sol = str(sol)
        if sol not in gold_cache:
            gold_cache[sol] = _parse_gold(sol, parsing_timeout)
        gold = gold_cache[sol]
        if not gold:
            rewards.append(None)
            continue
        text = _completion_text(completion)
        if text not in answer_cache:
            answer_cache[text] = _parse_completion(text, parsing_timeout)
        answer = answer_cache[text]
        rewards.append(float(bool(answer) and verify(gold, answer, timeout_seconds=verify_timeout)))
    return rewards


def format_reward(completions: list[str] | list[list[dict[str, Any]]], **kwargs) -> list[float]:
    r"""
    Reward function that checks the answer format: exactly one final `\boxed{...}` answer, after a closed reasoning
    block if one is used.

    A completion scores 1.0 when (a) it contains no `<think>` / `</think>` tags, or its last `<think>` is followed by a
    `</think>` (a prompt-side `<think>`, as in DeepSeek-R1 templates, leaves only `</think>` in the completion, which
    is accepted), and (b) the text after the last `</think>` (the whole completion without tags) contains exactly one
    `\boxed{...}` whose braces are closed and whose content is not empty. Boxes inside the reasoning are ignored.
    Otherwise it scores 0.0.

    Args:
        completions (`list[str]` or `list[list[dict[str, Any]]]`):
            Completions to check: plain strings, or conversational completions (the last assistant message is used).
        **kwargs:
            Dataset columns and trainer-provided arguments; unused, accepted for compatibility with
            [`~trl.GRPOTrainer`].

    Returns:
        `list[float]`: 1.0 or 0.0 per completion.

    Example:
    ```python
    >>> from lze_trl.rewards import format_reward

    >>> format_reward(["<think>2+2</think> \\boxed{4}", "<think>2+2 is \\boxed{4}", "\\boxed{4} or \\boxed{5}"])
    [1.0, 0.0, 0.0]
    ```
    """
    rewards = []
    for completion in completions:
        text = _completion_text(completion)
        if _THINK_OPEN in text or _THINK_CLOSE in text:
            if text.rfind(_THINK_CLOSE) < text.rfind(_THINK_OPEN) or _THINK_CLOSE not in text:
                rewards.append(0.0)
                continue
        region = _answer_region(text)
        rewards.append(float(len(_BOX_RE.findall(region)) == 1 and bool(last_boxed(region))))
    return rewards
