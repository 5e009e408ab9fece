"""Math datasets in TRL's conversational prompt-only format, ready for `GRPOTrainer` and [`~lze_trl.rewards`].

[`load_math_dataset`] reads one of the supported math datasets (from the Hugging Face Hub or from local files in the
dataset's own schema) and returns a `datasets.Dataset` with a `prompt` column (a list of chat messages), a `solution`
column (the gold final answer as a string, which [`lze_trl.rewards.math_accuracy`] grades against) and the dataset's
useful metadata columns.

The kinds' schemas are in `kinds.py`, the source parser and the raw loading in `sources.py`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .kinds import KINDS, MATH_SUBJECTS, PROMPT_TEMPLATE, gsm8k_gold, strip_dapo_prompt
from .sources import KNOWN_HUB_DATASETS, SourceRef, _load_raw, parse_source


__all__ = [
    "KINDS",
    "KNOWN_HUB_DATASETS",
    "MATH_SUBJECTS",
    "PROMPT_TEMPLATE",
    "SourceRef",
    "gsm8k_gold",
    "load_math_dataset",
    "parse_source",
    "strip_dapo_prompt",
]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------- loading


def _first_rows(keys: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Indices of the first occurrence of each distinct key, in order; grouped in Arrow, fast on millions of rows."""
    table = pa.table({"key": keys, "row": pa.array(np.arange(len(keys)))})
    return np.sort(table.group_by("key", use_threads=False).aggregate([("row", "min")])["row_min"].to_numpy())


def _single_message_contents(dataset: datasets.Dataset) -> pa.ChunkedArray | None:
    """Content of each row's `prompt` computed in Arrow, when every prompt is a single message; else `None`."""
    if "prompt" not in dataset.column_names:
        return None
    prompts = dataset.with_format("arrow")["prompt"]
    kind = prompts.type
    if not (pa.types.is_list(kind) and pa.types.is_struct(kind.value_type)):
        return None
    if kind.value_type.get_field_index("content") < 0 or prompts.null_count:
        return None
    if not pc.all(pc.equal(pc.list_value_length(prompts), 1)).as_py():
        return None
    return pc.struct_field(pc.list_element(prompts, 0), "content")


def load_math_dataset(
    kind: str,
    source: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    split: str | None = None,
    *,
    system_prompt: str | None = None,
    chat_template_only: bool = False,
    enable_thinking: bool | None = None,
) -> datasets.Dataset:
    r"""
    Loads a math dataset as a TRL conversational prompt-only dataset with gold answers.

    Supported kinds, with their canonical source and how the gold answer (`solution` column) is obtained:

    - `"gsm8k"`: `openai/gsm8k` (config `main`); gold = text after `####` in `answer`, commas removed.
    - `"math"`: `EleutherAI/hendrycks_math` (all seven subject configs); gold = last `\boxed{}` of `solution`; keeps
      `level` and `type`.
    - `"math500"`: `HuggingFaceH4/MATH-500` (split `test`); gold = `answer`; keeps `level`, `subject`, `unique_id`.
    - `"dapo_math"`: `BytedTsinghua-SIA/DAPO-Math-17k`; gold = `reward_model["ground_truth"]`; keeps `data_source`.
    - `"amc23"`: `math-ai/amc23` (split `test`); gold = `answer`; keeps `id`, `url`.
    - `"aime24"`: `HuggingFaceH4/aime_2024`; gold = `answer` (or the last box of `solution`, as in `math-ai/aime24`);
      keeps `id`, `url`, `year`.
    - `"aime25"`: `math-ai/aime25` (split `test`); gold = `answer`; keeps `id`.

    For `dapo_math`, the dataset's own instruction wrapper ("Solve the following math problem step by step. The last
    line of your response should be of the form Answer: ...") is stripped from the problem text, and rows are
    deduplicated by problem text (the Hub copy repeats each of its ~17k problems many times), keeping the first. Rows
    whose gold answer cannot be extracted (empty) are dropped with a log message.

    Each returned row has a `prompt` (`[{"role": "system", ...}?, {"role": "user", "content": ...}]`), a `solution`
    and the extra columns listed above when the source has them. By default the user message is the problem followed
    by [`PROMPT_TEMPLATE`]'s instruction ("Please reason step by step, and put your final answer within \boxed{}.").

    Args:
        kind (`str`):
            One of `"gsm8k"`, `"math"`, `"math500"`, `"dapo_math"`, `"amc23"`, `"aime24"`, `"aime25"`.
        source (`str`, `os.PathLike`, `Sequence[str | os.PathLike]`, *optional*):
            Where to read the data: a Hub id, an `hf://` or `https://huggingface.co/datasets/...` URL (with optional
            `config`, `split` and `revision` query parameters), or local `.json`/`.jsonl`/`.parquet` file(s) (a path,
            a glob or a list) in the dataset's own schema. See [`parse_source`]. Defaults to the kind's canonical Hub
            dataset. Mirrors with the same schema work too (e.g. `opencompass/AIME2025`, whose two configs are both
            loaded, or `math-ai/aime24`).
        split (`str`, *optional*):
            Hub split to load. Defaults to the split given in `source`, else the dataset's usual split (`"train"` for
            training sets; `"test"` for MATH-500, AMC23, AIME25 and other test-only benchmarks, `"train"` for
            `HuggingFaceH4/aime_2024`, whose only split is named so). Ignored for local files, which are read as one
            split.
        system_prompt (`str`, *optional*):
            If given, a system message with this content is put before the user message.
        chat_template_only (`bool`, *optional*, defaults to `False`):
            If `True`, the user message is the bare problem text, without the step-by-step / `\boxed{}` instruction,
            leaving the formatting to the model's own chat template (and system prompt).
        enable_thinking (`bool`, *optional*):
            Thinking switch of hybrid reasoning chat templates such as Qwen3's. The prompt text is never modified. If
            not `None`, it is recorded as a `chat_template_kwargs` column (`{"enable_thinking": ...}`), which TRL's
            `apply_chat_template`/`maybe_apply_chat_template` and `SFTTrainer` read per example. `GRPOTrainer` does
            *not* read that column: set `GRPOConfig(chat_template_kwargs={"enable_thinking": False})` for GRPO.

    Returns:
        `datasets.Dataset`: The conversational dataset.

    Raises:
        `ValueError`: For an unknown `kind`, a malformed `source`, a `split` that conflicts with `source`, an
            `enable_thinking` that is not `None`/`True`/`False`, or source rows that lack the kind's columns.
        `FileNotFoundError`: If a local `source` matches no file.

    Example:
    ```python
    >>> from lze_trl.data import load_math_dataset

    >>> dataset = load_math_dataset("gsm8k", split="test")
    >>> dataset[0]["prompt"][-1]["content"].endswith("put your final answer within \\boxed{}.")
    True
    ```
    """
    if kind not in KINDS:
        raise ValueError(f"Unknown `kind` {kind!r}; valid kinds are {sorted(KINDS)}.")
    if enable_thinking not in (None, True, False):
        raise ValueError(f"`enable_thinking` must be None, True or False, got {enable_thinking!r}.")
    spec = KINDS[kind]
    ref = parse_source(spec.hub_id if source is None else source)
    raw = _load_raw(ref, split)
    if spec.deduplicate and (contents := _single_message_contents(raw)) is not None:
        # Cheap exact pre-pass on the raw prompt text (DAPO-Math-17k repeats each problem ~100 times, always as one
        # user message), so that only distinct rows go through the Python conversion below.
        raw = raw.select(_first_rows(contents))
    metadata = [key for key in spec.metadata if key in raw.column_names]

    def convert(batch: dict[str, list]) -> dict[str, list]:
        out: dict[str, list] = {"problem": [], "solution": [], **{key: [] for key in metadata}}
        for values in zip(*batch.values()):
            row = dict(zip(batch, values))
            try:
                problem, gold = str(spec.problem(row)).strip(), spec.gold(row)
            except KeyError as error:
                raise ValueError(
                    f"Rows of the `source` for kind {kind!r} lack the column {error.args[0]!r}; got columns "
                    f"{sorted(row)}. Local files must use the dataset's own Hub schema."
                ) from None
            if problem and gold:  # rows without an extractable gold answer cannot be graded
                for key, value in zip(out, (problem, gold, *(row[key] for key in metadata))):
                    out[key].append(value)
        return out

    # In memory and uncached: the conversion is cheap (at most tens of thousands of rows) and a cache keyed on this
    # library's functions would not notice when their code changes.
    no_cache = {"keep_in_memory": True, "load_from_cache_file": False}
    dataset = raw.map(convert, batched=True, remove_columns=raw.column_names, desc=f"Extracting {kind}", **no_cache)
    if len(dataset) < len(raw):
        logger.info("Dropped %d %s rows without a problem or a gold answer.", len(raw) - len(dataset), kind)
    if spec.deduplicate:
        before = len(dataset)
        dataset = dataset.select(_first_rows(dataset.with_format("arrow")["problem"]))
        logger.info("Deduplicated %s by problem text: %d -> %d rows.", kind, before, len(dataset))

    def to_prompt(row: dict) -> dict:
        content = row["problem"] if chat_template_only else PROMPT_TEMPLATE.format(problem=row["problem"])
        messages = [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
        out: dict[str, Any] = {"prompt": messages + [{"role": "user", "content": content}]}
        if enable_thinking is not None:
            out["chat_template_kwargs"] = {"enable_thinking": enable_thinking}
        return out

    dataset = dataset.map(to_prompt, remove_columns=["problem"], desc="Building prompts", **no_cache)
    columns = ["prompt", "solution"] + [c for c in dataset.column_names if c not in ("prompt", "solution")]
    return dataset.select_columns(columns)
