"""A bounded per-step log of selection decisions: which prompts, at what pass rate and energy, whether live, with what
weight."""

from __future__ import annotations

from collections import deque

import numpy as np


COLUMNS = {
    "step": np.int64,
    "batch": np.int64,
    "prompt_key": np.int64,
    "pass_rate": np.float32,
    "energy": np.float32,
    "weight": np.float32,
    "live": bool,
}
"""The log's columns and their types."""


class SelectionLog:
    """The selection decisions of the most recent generation batches, one row per prompt group: past `max_rows` rows
    the oldest batches are dropped, so memory stays bounded on long runs; `max_rows=0` disables the log."""

    def __init__(self, max_rows: int = 100_000) -> None:
        self.max_rows = max_rows
        self.batches: deque[dict[str, np.ndarray]] = deque()
        self.num_rows = 0

    def append(
        self,
        step: int,
        batch: int,
        prompt_keys: np.ndarray,
        pass_rates: np.ndarray,
        energies: np.ndarray,
        weights: np.ndarray,
        live: np.ndarray,
    ) -> None:
        """Records one generation batch's decisions."""
        n = len(prompt_keys)
        self._add(
            dict(zip(COLUMNS, (np.full(n, step), np.full(n, batch), prompt_keys, pass_rates, energies, weights, live)))
        )

    def _add(self, values: dict[str, np.ndarray]) -> None:
        if self.max_rows > 0:
            self.batches.append({name: np.asarray(values[name], dtype=dtype) for name, dtype in COLUMNS.items()})
            self.num_rows += len(values["step"])
        while self.num_rows > self.max_rows and len(self.batches) > 1:
            self.num_rows -= len(self.batches.popleft()["step"])

    def columns(self) -> dict[str, np.ndarray]:
        """The log as columns."""
        if not self.batches:
            return {name: np.empty(0) for name in COLUMNS}
        return {name: np.concatenate([b[name] for b in self.batches]) for name in COLUMNS}

    def to_pandas(self):
        """The log as a `pandas.DataFrame`, with a boolean `selected` column (`weight > 0`)."""
        import pandas as pd

        frame = pd.DataFrame(self.columns())
        frame["selected"] = frame["weight"] > 0
        return frame

    def load_pandas(self, frame) -> None:
        """Replaces the log by the rows of `frame` (as written by [`~SelectionLog.to_pandas`]), e.g. on resume."""
        self.batches.clear()
        self.num_rows = 0
        for _, rows in frame.groupby("batch", sort=False):
            self._add({name: rows[name].to_numpy() for name in COLUMNS})
