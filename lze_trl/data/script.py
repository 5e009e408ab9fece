"""Which dataset a training script's arguments name, and loading it: the dataset side of `lze-trl grpo`.

`dataset_name` may be a math kind, a kind's canonical Hub id or mirror, or (with `dataset_kind`) any source
[`~lze_trl.data.load_math_dataset`] reads; anything else is loaded as `trl grpo` loads it (`datasets.load_dataset`
or the `datasets:` mixture), and a local `.json`/`.jsonl`/`.parquet` file in TRL's prompt format with the matching
builder.
"""

from __future__ import annotations

import logging
import os
from typing import Any
from urllib.parse import urlencode

from .math import KINDS, load_math_dataset, parse_source


logger = logging.getLogger(__name__)

# Mirrors of the benchmark kinds whose schema the loader knows (the canonical ids come from `lze_trl.data.KINDS`).
_MIRRORS = {
    "math-ai/aime24": "aime24",
    "opencompass/AIME2025": "aime25",
}
_LOCAL_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def resolve_math_kind(dataset_name: str | None, dataset_kind: str | None = None) -> tuple[str, str | None] | None:
    """
    Whether a run's dataset is read by [`~lze_trl.data.load_math_dataset`], and how.

    Args:
        dataset_name (`str`, *optional*):
            The `dataset_name` script argument.
        dataset_kind (`str`, *optional*):
            The `dataset_kind` script argument.

    Returns:
        `tuple[str, str | None]` or `None`: `(kind, source)` (`source=None`: the kind's canonical dataset), or `None`
        when the dataset is to be loaded as TRL does.
    """
    if dataset_kind is not None:
        return dataset_kind, None if dataset_name in (None, dataset_kind) else dataset_name
    if dataset_name is None:
        return None
    if dataset_name in KINDS:
        return dataset_name, None
    hub_kinds = {spec.hub_id: kind for kind, spec in KINDS.items()} | _MIRRORS
    try:
        ref = parse_source(dataset_name)
    except ValueError:
        return None  # a directory, a dataset script, ...: TRL's loader
    if ref.repo_id in hub_kinds:
        return hub_kinds[ref.repo_id], dataset_name
    if not ref.is_local and "://" in dataset_name:
        raise ValueError(
            f"dataset_name={dataset_name!r} is a Hub URL of a dataset whose schema is unknown: set dataset_kind to "
            f"one of {sorted(KINDS)} if it is in one of those schemas, or give it as 'owner/name' (with "
            "dataset_config) to load it as TRL does."
        )
    return None


def _with_config(source: str | None, kind: str, config: str | None) -> str | None:
    """Adds `dataset_config` to a Hub source of a math kind."""
    if config is None:
        return source
    ref = parse_source(KINDS[kind].hub_id if source is None else source)
    if ref.is_local:
        raise ValueError(f"dataset_config={config!r} does not apply to local files ({source!r}).")
    if ref.config is not None and ref.config != config:
        raise ValueError(f"dataset_config={config!r} conflicts with the config {ref.config!r} of {source!r}.")
    query = {"config": config, "split": ref.split, "revision": ref.revision}
    return f"hf://{ref.repo_id}?" + urlencode({k: v for k, v in query.items() if v is not None})


def load_datasets(script_args: Any, training_args: Any, dataset_args: Any = None):
    """
    The train and (when `eval_strategy != "no"`) eval datasets of a run.

    Math kinds (see [`resolve_math_kind`]) are read with [`~lze_trl.data.load_math_dataset`]: splits
    `dataset_train_split` / `dataset_test_split` of a Hub source (a source that names its split, or a local file, is
    the train set as a whole and has no test split). Otherwise: the `datasets:` mixture (`DatasetMixtureConfig`) or
    `datasets.load_dataset(dataset_name, name=dataset_config)`, exactly as `trl grpo`; a local `.json`/`.jsonl`/
    `.parquet` file is read with the matching builder.

    Returns:
        `tuple[Dataset, Dataset | None]`: `(train_dataset, eval_dataset)`.
    """
    from datasets import load_dataset
    from trl import get_dataset

    wants_eval = getattr(training_args, "eval_strategy", "no") != "no"
    if dataset_args is not None and dataset_args.datasets:
        if script_args.dataset_name:
            logger.warning(
                "Both `datasets` and `dataset_name` are provided. The `datasets` argument will be used to load the "
                "dataset and `dataset_name` will be ignored."
            )
        dataset = get_dataset(dataset_args)
        return _splits(dataset, script_args, wants_eval)
    if not script_args.dataset_name and script_args.dataset_kind is None:
        raise ValueError("Either `datasets` or `dataset_name` (or `dataset_kind`) must be provided.")

    math = resolve_math_kind(script_args.dataset_name, script_args.dataset_kind)
    if math is not None:
        if script_args.dataset_streaming:
            raise ValueError("dataset_streaming is not supported for the math kinds; unset it.")
        kind, source = math
        source = _with_config(source, kind, script_args.dataset_config)
        options = dict(
            system_prompt=script_args.dataset_system_prompt,
            chat_template_only=script_args.dataset_chat_template_only,
        )
        ref = None if source is None else parse_source(source)
        fixed_split = ref is not None and (ref.is_local or ref.split is not None)
        train_split = None if fixed_split else script_args.dataset_train_split
        train = load_math_dataset(kind, source, split=train_split, **options)
        eval_dataset = None
        if wants_eval:
            if fixed_split:
                raise ValueError(
                    f"eval_strategy={training_args.eval_strategy!r} needs a test split, but {source!r} is a single "
                    "split (a local file, or a source that names its split). Set eval_strategy='no' and evaluate with "
                    "`lze-trl eval`, or use a Hub source with dataset_test_split."
                )
            eval_dataset = load_math_dataset(kind, source, split=script_args.dataset_test_split, **options)
        return train, eval_dataset

    name = script_args.dataset_name
    builder = _LOCAL_BUILDERS.get(os.path.splitext(name)[1].lower())
    if builder is not None and os.path.isfile(name):
        dataset = load_dataset(
            builder, data_files={script_args.dataset_train_split: name}, streaming=script_args.dataset_streaming
        )
    else:
        dataset = load_dataset(name, name=script_args.dataset_config, streaming=script_args.dataset_streaming)
    return _splits(dataset, script_args, wants_eval)


def _splits(dataset, script_args: Any, wants_eval: bool):
    if script_args.dataset_train_split not in dataset:
        raise ValueError(
            f"dataset_train_split={script_args.dataset_train_split!r} is not a split of the dataset "
            f"(splits: {list(dataset)})."
        )
    eval_dataset = None
    if wants_eval:
        if script_args.dataset_test_split not in dataset:
            raise ValueError(
                f"dataset_test_split={script_args.dataset_test_split!r} is not a split of the dataset "
                f"(splits: {list(dataset)}); set eval_strategy='no' or name an existing split."
            )
        eval_dataset = dataset[script_args.dataset_test_split]
    return dataset[script_args.dataset_train_split], eval_dataset
