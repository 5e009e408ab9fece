"""The math datasets the loader knows ([`KINDS`]): each kind's canonical Hub source, how its problem text and its gold
answer are read from a row of its own schema, and the metadata columns kept; the prompt template; the gold-answer
helpers (`gsm8k_gold`, `strip_dapo_prompt`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..rewards import last_boxed


# Instruction used by DeepSeek-R1 / Qwen2.5-Math evaluations: step-by-step reasoning, final answer in \boxed{}.
PROMPT_TEMPLATE = "{problem}\nPlease reason step by step, and put your final answer within \\boxed{{}}."

MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)

# DAPO-Math-17k wraps every problem in an "Answer: $Answer" instruction; we replace it with our own template.
_DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
_DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


# --------------------------------------------------------------------------------------------------- gold answers


def gsm8k_gold(answer: str) -> str:
    """Gold answer of a GSM8K `answer` field: the text after `####`, with thousands separators removed."""
    if "####" not in answer:
        return ""
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def strip_dapo_prompt(text: str) -> str:
    """Removes DAPO-Math-17k's instruction wrapper from a prompt, returning the bare problem (unchanged if absent)."""
    text = text.strip()
    if text.startswith(_DAPO_PREFIX.strip()):
        text = text[len(_DAPO_PREFIX.strip()) :]
    if text.endswith(_DAPO_SUFFIX.strip()):
        text = text[: -len(_DAPO_SUFFIX.strip())]
    return text.strip()


def _answer_text(value: Any) -> str:
    """Gold answer as a string; integral floats (AMC answers are stored as e.g. `27.0`) lose the `.0`."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value).strip()


def _user_text(prompt: Any) -> str:
    """Text of the first user message of a conversational prompt (or the prompt itself if it is a string)."""
    if isinstance(prompt, str):
        return prompt
    return next((m["content"] for m in prompt if m.get("role") == "user"), "")


# --------------------------------------------------------------------------------------------------- dataset kinds


@dataclass(frozen=True)
class _Kind:
    hub_id: str  # canonical source
    problem: Callable[[dict], str]
    gold: Callable[[dict], str]
    metadata: tuple[str, ...] = ()  # columns kept as-is when the source has them
    deduplicate: bool = False


def _first(*keys: str) -> Callable[[dict], Any]:
    """Reads the first of `keys` present in a row (schemas of mirrors differ, e.g. `problem` vs `question`)."""

    def get(row: dict) -> Any:
        for key in keys:
            if key in row:
                return row[key]
        raise KeyError(keys[0])

    return get


def _answer_or_boxed_solution(row: dict) -> str:
    """`answer` column when present, else the last box of `solution` (math-ai/aime24 stores `\\boxed{204}` there)."""
    if "answer" in row:
        return _answer_text(row["answer"])
    return last_boxed(row["solution"]) or ""


KINDS: dict[str, _Kind] = {
    "gsm8k": _Kind("openai/gsm8k", _first("question"), lambda row: gsm8k_gold(row["answer"])),
    "math": _Kind(
        "EleutherAI/hendrycks_math",
        _first("problem"),
        lambda row: last_boxed(row["solution"]) or "",
        metadata=("level", "type"),
    ),
    "math500": _Kind(
        "HuggingFaceH4/MATH-500",
        _first("problem"),
        lambda row: _answer_text(row["answer"]),
        metadata=("level", "subject", "unique_id"),
    ),
    "dapo_math": _Kind(
        "BytedTsinghua-SIA/DAPO-Math-17k",
        lambda row: strip_dapo_prompt(_user_text(row["prompt"])),
        lambda row: _answer_text(row["reward_model"]["ground_truth"]),
        metadata=("data_source",),
        deduplicate=True,
    ),
    "amc23": _Kind("math-ai/amc23", _first("question", "problem"), _answer_or_boxed_solution, ("id", "url")),
    "aime24": _Kind(
        "HuggingFaceH4/aime_2024", _first("problem", "question"), _answer_or_boxed_solution, ("id", "url", "year")
    ),
    "aime25": _Kind("math-ai/aime25", _first("problem", "question"), _answer_or_boxed_solution, ("id",)),
}
