"""Benchmark data: loading a benchmark and rendering its prompts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .arguments import _EVAL_SPLITS


EMBEDDED_TEST_SIZE = 200
"""Held-out prompts of an embedded task that `lze-trl eval` grades by default (the README's evaluation)."""


def benchmark_split(name: str, source: str | None = None, split: str | None = None) -> str | None:
    """
    The split [`load_benchmark`] reads: `split` when given, else `test` for an embedded task and for `gsm8k` and
    `math` read from the Hub, else `None` (the split that `source` names, or the loader's default).
    """
    from ..tasks import TASKS

    if split is not None or name in TASKS:
        return split or "test"
    return _EVAL_SPLITS.get(name) if source is None else None


def load_benchmark(
    name: str,
    source: str | None = None,
    split: str | None = None,
    *,
    max_samples: int | None = None,
    system_prompt: str | None = None,
    chat_template_only: bool = False,
):
    """
    Loads a benchmark as a dataset with a `solution` column: a math kind as a conversational dataset, an embedded
    task ([`~lze_examples.tasks.get_task`]) as its plain `expression=` prompts (200 held-out ones by default, or the
    task's OOD prompts with `split="ood"`).

    Args:
        name (`str`):
            A [`~lze_trl.data.load_math_dataset`] kind or an embedded task's name.
        source (`str`, *optional*):
            Where to read it (see [`~lze_trl.data.parse_source`]). Defaults to the kind's canonical Hub dataset.
        split (`str`, *optional*):
            Split to read. Defaults to `test` for `gsm8k` and `math` from the Hub, else the loader's default; not
            applied to a `source` that names its own split unless given explicitly.
        max_samples (`int`, *optional*):
            Keep only the first `max_samples` rows.
        system_prompt (`str`, *optional*):
            System message before each problem.
        chat_template_only (`bool`, *optional*, defaults to `False`):
            Bare problem as the user message.

    Returns:
        `datasets.Dataset`: Rows with `prompt` (chat messages) and `solution`.
    """
    from lze_trl.data import load_math_dataset

    from ..tasks import TASKS

    split = benchmark_split(name, source, split)
    if name in TASKS:
        task = TASKS[name]
        n = max_samples or (task.DEFAULT_N_OOD if split == "ood" else EMBEDDED_TEST_SIZE)
        return task.make_dataset(n, seed=0, split=split).rename_column("answer", "solution")
    dataset = load_math_dataset(
        name, source=source, split=split, system_prompt=system_prompt, chat_template_only=chat_template_only
    )
    if max_samples is not None:
        dataset = dataset.select(range(min(max_samples, len(dataset))))
    return dataset


def render_prompts(
    prompts: Sequence[str | Sequence[Mapping[str, str]]],
    tokenizer,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> tuple[list[str], bool]:
    """
    Renders prompts to text for generation.

    Conversational prompts (lists of messages) go through the tokenizer's chat template with a generation prompt;
    if the tokenizer has no chat template, the messages' contents are joined by blank lines. Plain strings are used as
    they are.

    Args:
        prompts (`Sequence[str | Sequence[Mapping[str, str]]]`):
            Prompts: strings, or lists of `{"role", "content"}` messages.
        tokenizer (`PreTrainedTokenizerBase`):
            Tokenizer of the model.
        chat_template_kwargs (`Mapping[str, Any]`, *optional*):
            Extra variables of the chat template, e.g. `{"enable_thinking": True}`.

    Returns:
        `tuple[list[str], bool]`: The texts, and whether they came from the chat template (which then already holds
        the special tokens, so they must be tokenized with `add_special_tokens=False`).
    """
    has_template = bool(getattr(tokenizer, "chat_template", None))
    templated = False
    texts = []
    for prompt in prompts:
        if isinstance(prompt, str):
            texts.append(prompt)
        elif has_template:
            texts.append(
                tokenizer.apply_chat_template(
                    list(prompt), tokenize=False, add_generation_prompt=True, **dict(chat_template_kwargs or {})
                )
            )
            templated = True
        else:
            texts.append("\n\n".join(str(m["content"]) for m in prompt))
    return texts, templated
