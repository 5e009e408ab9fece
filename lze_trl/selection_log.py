"""A bounded per-step log of selection decisions: which prompts, at what pass rate and energy, whether live, with what
weight."""

from __future__ import annotations

from collections import deque

import numpy as np


COLUMNS = ("step", "batch", "prompt_id", "pass_rate", "energy", "weight", "live")


class SelectionLog:
    """
    The selection decisions of the most recent generation batches, one row per prompt group.

    When the log holds more than `max_rows` rows, the oldest generation batches are dropped, so memory stays bounded
    on long runs.

    Args:
        max_rows (`int`, *optional*, defaults to `100_000`):
            Most rows kept; 0 disables the log.
    """

    def __init__(self, max_rows: int = 100_000) -> None:
        self.max_rows = max_rows
        self.batches: deque[dict[str, np.ndarray]] = deque()
        self.num_rows = 0

    def append(
        self,
        step: int,
        batch: int,
        prompt_ids: np.ndarray,
        pass_rates: np.ndarray,
        energies: np.ndarray,
        weights: np.ndarray,
        live: np.ndarray,
    ) -> None:
        """Records one generation batch's decisions."""
        if self.max_rows <= 0:
            return
        n = len(prompt_ids)
        batch = {
            "step": np.full(n, step, dtype=np.int64),
            "batch": np.full(n, batch, dtype=np.int64),
            "prompt_id": np.asarray(prompt_ids, dtype=np.int64),
            "pass_rate": np.asarray(pass_rates, dtype=np.float32),
            "energy": np.asarray(energies, dtype=np.float32),
            "weight": np.asarray(weights, dtype=np.float32),
            "live": np.asarray(live, dtype=bool),
        }
        self.batches.append(batch)
        self.num_rows += n
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
        if self.max_rows <= 0 or len(frame) == 0:
            return
        batches = frame["batch"].to_numpy()
        starts = np.flatnonzero(np.r_[True, batches[1:] != batches[:-1]])
        for start, stop in zip(starts, [*starts[1:], len(batches)]):
            rows = frame.iloc[start:stop]
            self.append(
                int(rows["step"].iloc[0]),
                int(rows["batch"].iloc[0]),
                rows["prompt_id"].to_numpy(),
                rows["pass_rate"].to_numpy(),
                rows["energy"].to_numpy(),
                rows["weight"].to_numpy(),
                rows["live"].to_numpy(),
            )
