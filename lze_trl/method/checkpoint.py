"""The LZE run state on disk: file names, atomic checkpoint files, the check of the train-dataset fingerprint.

Every file is written to a temporary file in its folder and renamed over its final name (`os.replace`, atomic), so a
process killed at any instant leaves either no file or a complete one. The arrays and the counters travel in one file
(`lze_state.npz`, the counters as JSON under `__counters__`), so they cannot be out of step.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import LZEStateError, LZEWarning


STATE_FILE = "lze_state.npz"
"""The LZE state of a checkpoint: the per-prompt arrays and the counters, in one atomically written file."""
PROMPTS_PARQUET = "lze_prompts.parquet"
"""The per-prompt table (`trainer.prompt_table()`), written with each checkpoint and at the end of training."""
SELECTION_LOG_PARQUET = "lze_selection_log.parquet"
"""The selection log (`trainer.selection_log`), written with each checkpoint and at the end of training."""
COUNTERS_KEY = "__counters__"
RESUME_MODES = ("strict", "fresh")


def atomic_write(path: str, write: Callable[[Any], None]) -> None:
    """Writes the file `path` (`write` gets a binary file object) so that it is either absent or complete, whenever the
    process dies."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
        dir_fd = os.open(folder, os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def save_state(folder: str, arrays: dict[str, np.ndarray], counters: dict[str, Any]) -> str:
    """Writes the LZE state (arrays and JSON-serialisable counters) atomically as `folder/lze_state.npz`; returns the
    path."""
    if COUNTERS_KEY in arrays:
        raise ValueError(f"{COUNTERS_KEY!r} is reserved for the counters.")
    buffer = io.BytesIO()
    blob = np.frombuffer(json.dumps(counters, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    np.savez(buffer, **arrays, **{COUNTERS_KEY: blob})
    path = os.path.join(folder, STATE_FILE)
    atomic_write(path, lambda f: f.write(buffer.getbuffer()))
    return path


def load_state(folder: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and the counters written by [`save_state`] into `folder`; an [`LZEStateError`] naming the file when
    it is missing or cannot be read."""
    path = os.path.join(folder, STATE_FILE)
    if not os.path.isfile(path):
        raise LZEStateError(f"The checkpoint {folder!r} has no LZE state file {STATE_FILE!r}.")
    try:
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as error:  # zipfile.BadZipFile, EOFError, ValueError, OSError: all mean an unreadable file
        raise LZEStateError(f"The LZE state file {path!r} is corrupt ({type(error).__name__}: {error}).") from error
    try:
        counters = json.loads(arrays.pop(COUNTERS_KEY).tobytes().decode("utf-8", errors="replace"))
    except (KeyError, json.JSONDecodeError) as error:
        raise LZEStateError(f"The LZE counters in {path!r} are missing or corrupt ({error!r}).") from error
    if not isinstance(counters, dict):
        raise LZEStateError(f"The LZE counters in {path!r} are corrupt (not a JSON object).")
    return arrays, counters


def load_selection_log(folder: str) -> Any:
    """The selection log saved in a checkpoint `folder` (a `pandas.DataFrame`); an [`LZEStateError`] naming the file
    when it is missing or cannot be read."""
    import pandas as pd

    path = os.path.join(folder, SELECTION_LOG_PARQUET)
    if not os.path.isfile(path):
        raise LZEStateError(f"The checkpoint {folder!r} has no selection log {SELECTION_LOG_PARQUET!r}.")
    try:
        return pd.read_parquet(path)
    except Exception as error:
        raise LZEStateError(f"The selection log {path!r} is corrupt ({type(error).__name__}).") from error


def save_table(frame: Any, path: str) -> None:
    """Writes a `pandas.DataFrame` atomically as parquet."""
    atomic_write(path, lambda f: frame.to_parquet(f, index=False))


def check_fingerprint(saved: dict[str, Any] | None, current: dict[str, Any] | None, checkpoint: str) -> None:
    """Raises an [`LZEStateError`] when the checkpoint's train dataset (`saved`) is not the run's (`current`)."""
    if saved is None or current is None:
        return
    if saved["size"] != current["size"]:
        raise LZEStateError(
            f"The LZE state in {checkpoint!r} was recorded on a train dataset of {saved['size']} prompts, but this "
            f"run's train dataset has {current['size']}: its per-prompt pass rates are keyed by row index and would "
            "land on other prompts."
        )
    if saved["hash"] != current["hash"]:
        raise LZEStateError(
            f"The LZE state in {checkpoint!r} was recorded on a train dataset of {saved['size']} prompts whose "
            "content differs from this run's (same size, other prompts or order): its per-prompt pass rates would "
            "land on other prompts."
        )


def load_or_start_fresh(load: Callable[[], None], decides: bool, resume_lze_state: str, stacklevel: int = 3) -> None:
    """
    Loads a resumed run's LZE state with `load`: the one resume rule of the synchronous and the async trainer. A state
    that cannot be loaded ([`LZEStateError`]) is refused when it decides what is trained (`decides`: a selector other
    than `"none"`, or epochs planned by pruning or the selector) unless `resume_lze_state="fresh"`; otherwise the run
    warns and resumes with a fresh LZE state.
    """
    try:
        load()
    except LZEStateError as error:
        if decides and resume_lze_state != "fresh":
            raise LZEStateError(
                f"{error} Resuming would silently restart LZE's per-prompt state. Resume from a complete checkpoint "
                "of this run with the same train dataset, or set resume_lze_state='fresh' to resume the model and "
                "optimizer with a fresh LZE state on purpose."
            ) from error
        warnings.warn(f"{error} The run resumes with a fresh LZE state.", LZEWarning, stacklevel=stacklevel + 1)
