"""Where a math dataset is read from: a Hub reference or local files ([`parse_source`] -> [`SourceRef`]), and the raw
rows loaded from it (several configs of a known Hub dataset concatenated)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import datasets

from .kinds import MATH_SUBJECTS


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

_REPO_RE = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
_FILE_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}
# Data-file extensions we do not read; a reference ending in one is a file, not a Hub id.
_UNSUPPORTED_FORMATS = (".csv", ".tsv", ".txt", ".arrow", ".gz", ".bz2", ".xz", ".zst", ".zip", ".tar")
FILE_EXTENSIONS = (*_FILE_FORMATS, *_UNSUPPORTED_FORMATS)
"""Extensions of data files, read or not: a reference ending in one names a local file, not a Hub id."""
_QUERY_KEYS = ("config", "split", "revision")
_HUB_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")


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
