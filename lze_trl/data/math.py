"""Math datasets in TRL's conversational prompt-only format, ready for `GRPOTrainer` and [`~lze_trl.rewards`].

[`load_math_dataset`] reads one of the supported math datasets (from the Hugging Face Hub or from local files in the
dataset's own schema) and returns a `datasets.Dataset` with a `prompt` column (a list of chat messages), a `solution`
column (the gold final answer as a string, which [`lze_trl.rewards.math_accuracy`] grades against) and the dataset's
useful metadata columns.

One module over 400 lines on purpose: the seven kinds' schemas, the source parser they share and the loader are
read together when a kind is added.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..rewards import last_boxed


__all__ = ["PROMPT_TEMPLATE", "SourceRef", "gsm8k_gold", "load_math_dataset", "parse_source", "strip_dapo_prompt"]

logger = logging.getLogger(__name__)

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

# Hub datasets whose layout we know: repo id -> (configs loaded when no config is given, default split).
KNOWN_HUB_DATASETS: dict[str, tuple[tuple[str | None, ...], str]] = {
    "openai/gsm8k": (("main",), "train"),
    "EleutherAI/hendrycks_math": (MATH_SUBJECTS, "train"),
    "HuggingFaceH4/MATH-500": ((None,), "test"),
    "BytedTsinghua-SIA/DAPO-Math-17k": ((None,), "train"),
    "math-ai/amc23": ((None,), "test"),
    "HuggingFaceH4/aime_2024": ((None,), "train"),
    "math-ai/aime24": ((None,), "test"),
    "math-ai/aime25": ((None,), "test"),
    "opencompass/AIME2025": (("AIME2025-I", "AIME2025-II"), "test"),
}

# DAPO-Math-17k wraps every problem in an "Answer: $Answer" instruction; we replace it with our own template.
_DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
_DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'

_REPO_RE = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
_FILE_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}
# Data-file extensions we do not read; a reference ending in one is a file, not a Hub id.
_UNSUPPORTED_FORMATS = (".csv", ".tsv", ".txt", ".arrow", ".gz", ".bz2", ".xz", ".zst", ".zip", ".tar")
_QUERY_KEYS = ("config", "split", "revision")
_HUB_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")


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


# --------------------------------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class SourceRef:
    """Where to read a dataset from: a Hub repository (`repo_id`, ...) or local files (`data_files`, `file_format`)."""

    repo_id: str | None = None
    config: str | None = None
    split: str | None = None
    revision: str | None = None
    data_files: tuple[str, ...] = ()
    file_format: str | None = None

    @property
    def is_local(self) -> bool:
        return bool(self.data_files)


def _file_format(path: str) -> str | None:
    return _FILE_FORMATS.get(os.path.splitext(path)[1].lower())


def _parse_query(query: str, source: str) -> dict[str, str]:
    if not query:
        return {}
    try:
        params = parse_qs(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ValueError(f"`source` {source!r} has a malformed query string {query!r}.") from None
    unknown = sorted(set(params) - set(_QUERY_KEYS))
    if unknown:
        raise ValueError(
            f"`source` {source!r} has unknown query key(s) {unknown}; valid keys are {list(_QUERY_KEYS)}."
        )
    for key, values in params.items():
        if len(values) != 1 or not values[0]:
            raise ValueError(f"`source` {source!r} must give exactly one non-empty value for {key!r}.")
    return {key: values[0] for key, values in params.items()}


def _hub_ref(path: str, query: str, source: str, viewer: Sequence[str] = ()) -> SourceRef:
    match = _REPO_RE.match(path)
    if not match:
        raise ValueError(f"`source` {source!r} does not name a Hub dataset as 'owner/name'.")
    params = _parse_query(query, source)
    config, split = (list(viewer) + [None, None])[:2]
    for key, value in (("config", config), ("split", split), ("revision", match["revision"])):
        if value is not None and params.setdefault(key, value) != value:
            raise ValueError(f"`source` {source!r} gives two different values for {key!r}.")
    return SourceRef(repo_id=match["repo"], **params)


def parse_source(source: str | os.PathLike | Sequence[str | os.PathLike]) -> SourceRef:
    """
    Parses a dataset reference into a [`SourceRef`], without touching the network or the file system.

    Accepted forms:
        - a Hub id, `"owner/name"`, optionally `"owner/name@revision"` and/or a query `"?config=main&split=test"`;
        - `"hf://owner/name?config=..&split=..&revision=.."` (also `hf://datasets/owner/name...`);
        - `"https://huggingface.co/datasets/owner/name?config=..&split=.."`, or a Dataset Viewer URL
          `"https://huggingface.co/datasets/owner/name/viewer/<config>/<split>"`;
        - a local `.json`, `.jsonl` or `.parquet` file, a glob of them (`"data/*.jsonl"`), or a list of those (all of
          one format), holding rows in the dataset's own schema.

    Args:
        source (`str`, `os.PathLike` or `Sequence[str | os.PathLike]`):
            The dataset reference.

    Returns:
        [`SourceRef`]: The parsed reference.

    Raises:
        `ValueError`: If the reference matches none of the forms above.
    """
    if isinstance(source, (list, tuple)):
        paths = [os.fspath(p) for p in source]
        if not paths or not all(isinstance(p, str) and p.strip() for p in paths):
            raise ValueError(f"`source` list must hold at least one non-empty path, got {source!r}.")
        formats = {_file_format(p) for p in paths}
        if None in formats or len(formats) != 1:
            raise ValueError(
                f"`source` files must all be .json/.jsonl or all .parquet, got {paths!r} "
                f"(supported extensions: {sorted(_FILE_FORMATS)})."
            )
        return SourceRef(data_files=tuple(paths), file_format=formats.pop())
    if isinstance(source, os.PathLike):
        return parse_source([source])
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"`source` must be a non-empty string, path or list of paths, got {source!r}.")

    source = source.strip()
    if source.startswith("hf://"):
        path, _, query = source[len("hf://") :].partition("?")
        return _hub_ref(path.removeprefix("datasets/"), query, source)
    if "://" in source:
        url = urlsplit(source)
        segments = [s for s in url.path.split("/") if s]
        if url.scheme not in ("http", "https") or url.netloc not in _HUB_HOSTS or segments[:1] != ["datasets"]:
            raise ValueError(
                f"`source` URL {source!r} is not a Hub dataset URL; expected https://huggingface.co/datasets/owner/name."
            )
        repo, rest = segments[1:3], segments[3:]
        if rest and (rest[0] != "viewer" or not 2 <= len(rest) <= 3):
            raise ValueError(
                f"`source` URL {source!r} must point at the dataset page or at .../viewer/<config>/<split>."
            )
        return _hub_ref("/".join(repo), url.query, source, viewer=rest[1:])
    path, _, query = source.partition("?")
    if _file_format(path) is not None:
        if query:
            raise ValueError(f"`source` {source!r}: local files take no query parameters; pass `split` separately.")
        return parse_source([source])
    if path.lower().endswith(_UNSUPPORTED_FORMATS):
        raise ValueError(
            f"`source` {source!r} has an unsupported file format {os.path.splitext(path)[1]!r}; "
            f"use {sorted(_FILE_FORMATS)} files."
        )
    if _REPO_RE.match(path):
        return _hub_ref(path, query, source)
    raise ValueError(
        f"`source` {source!r} is neither a Hub dataset ('owner/name', hf://..., https://huggingface.co/datasets/...) "
        f"nor a local file with a supported extension {sorted(_FILE_FORMATS)}."
    )


def _expand_files(patterns: Sequence[str]) -> list[str]:
    files = []
    for pattern in patterns:
        pattern = os.path.expanduser(pattern)
        matches = sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]
        missing = [m for m in matches if not os.path.isfile(m)]
        if not matches or missing:
            raise FileNotFoundError(f"No data file found for `source` entry {pattern!r}.")
        files.extend(matches)
    return files


def _load_raw(ref: SourceRef, split: str | None) -> datasets.Dataset:
    if ref.is_local:
        files = _expand_files(ref.data_files)
        return datasets.load_dataset(ref.file_format, data_files=files, split="train")
    if split is not None and ref.split is not None and split != ref.split:
        raise ValueError(f"`split={split!r}` conflicts with the split {ref.split!r} given in `source`.")
    known_configs, known_split = KNOWN_HUB_DATASETS.get(ref.repo_id, ((None,), "train"))
    configs = (ref.config,) if ref.config is not None else known_configs
    split = split or ref.split or known_split
    parts = [
        datasets.load_dataset(ref.repo_id, config, split=split, revision=ref.revision)  # type: ignore[arg-type]
        for config in configs
    ]
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


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
