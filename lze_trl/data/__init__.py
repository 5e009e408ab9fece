"""Datasets: the math benchmarks in TRL's conversational prompt-only format ([`load_math_dataset`]) and the resolution
of a training script's dataset arguments ([`load_datasets`])."""

from .math import (
    KINDS,
    KNOWN_HUB_DATASETS,
    MATH_SUBJECTS,
    PROMPT_TEMPLATE,
    SourceRef,
    gsm8k_gold,
    load_math_dataset,
    parse_source,
    strip_dapo_prompt,
)
from .script import load_datasets, resolve_math_kind


__all__ = [
    "KINDS",
    "KNOWN_HUB_DATASETS",
    "MATH_SUBJECTS",
    "PROMPT_TEMPLATE",
    "SourceRef",
    "gsm8k_gold",
    "load_datasets",
    "load_math_dataset",
    "parse_source",
    "resolve_math_kind",
    "strip_dapo_prompt",
]
