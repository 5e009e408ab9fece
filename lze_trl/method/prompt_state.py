"""The per-prompt state: one table of statistics, updated once per scored group, read by every part of LZE."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd


COLUMNS = {
    "initial_pass_rate": np.float32,  # the first scored group's pass rate, never updated after
    "ema_pass_rate": np.float32,  # EMA of the pass rates: ema <- decay * ema + (1 - decay) * p (p at the first)
    "last_pass_rate": np.float32,
    "last_energy": np.float32,
    "num_observations": np.int32,  # groups scored
    "num_selected": np.int32,  # generation batches in which its group took part in the update
    # consecutive saturated observations (every rollout right, or every one wrong): +k solved k times, -k unsolved
    "saturated_streak": np.int32,
    "last_batch": np.int64,  # index of the generation batch of the last observation
}
"""The table's columns and their types."""


class PromptState:
    """
    Every per-prompt statistic of a run ([`COLUMNS`]), one row per prompt observed. Rows live in flat arrays indexed
    by a dense slot per prompt (`index`, a `pandas.Index` of the non-negative int64 prompt keys in order of first
    observation): about 50 bytes per prompt (up to twice that, as arrays double).

    Args:
        ema_decay (`float`, *optional*, defaults to `0.9`):
            Decay of the pass-rate EMA (the config's `energy_ema_decay`).

    Example:
    ```python
    >>> state = PromptState()
    >>> state.record_pass_rates([7, 8], [0.5, 1.0], batch_index=0)
    >>> state.get([7, 8, 9])["saturated_streak"]
    array([0, 1, 0])
    ```
    """

    def __init__(self, ema_decay: float = 0.9) -> None:
        self.ema_decay = ema_decay
        self.index = pd.Index(np.empty(0, dtype=np.int64))
        for name, dtype in COLUMNS.items():
            setattr(self, name, np.zeros(0, dtype=dtype))

    def __len__(self) -> int:
        return len(self.index)

    def _lookup(self, keys: Sequence[int] | np.ndarray) -> np.ndarray:
        """Slots of `keys`, -1 where a key was never observed."""
        return self.index.get_indexer(np.asarray(keys, dtype=np.int64).reshape(-1)).astype(np.int64)

    def _slots(self, keys: Sequence[int] | np.ndarray) -> np.ndarray:
        """Slots of `keys`, giving the next free slots (and room in the arrays) to keys never seen."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        new = pd.unique(keys[self._lookup(keys) < 0])
        if len(new):
            self.index = self.index.append(pd.Index(new, dtype=np.int64))
        capacity = len(self.num_observations)
        if len(self.index) > capacity:
            size = max(len(self.index), 2 * capacity, 1024)
            for name in COLUMNS:
                old = getattr(self, name)
                setattr(self, name, np.concatenate([old, np.zeros(size - capacity, dtype=old.dtype)]))
        return self._lookup(keys)

    def get(self, keys: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """The columns for `keys` (float columns NaN and counts 0 for prompts never observed)."""
        slots = self._lookup(keys)
        seen = slots >= 0
        out = {}
        for name, dtype in COLUMNS.items():
            floating = np.issubdtype(dtype, np.floating)
            values = np.full(len(slots), np.nan if floating else 0, dtype=np.float64 if floating else np.int64)
            values[seen] = getattr(self, name)[slots[seen]]
            out[name] = values
        return out

    def record_pass_rates(
        self,
        keys: Sequence[int] | np.ndarray,
        pass_rates: Sequence[float] | np.ndarray,
        batch_index: int,
    ) -> None:
        """
        Updates the table with one scored group per entry (a NaN pass rate leaves its prompt untouched).

        A new prompt's EMA and `initial_pass_rate` start at its (first) pass rate. A prompt that appears several times
        in one call is updated once, with the mean of its pass rates (its saturated streak grows only if all were
        saturated on the same side).
        """
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        p = np.asarray(pass_rates, dtype=np.float64).reshape(-1)
        if keys.shape != p.shape:
            raise ValueError(f"keys and pass_rates differ in length: {keys.shape[0]} vs {p.shape[0]}.")
        if (keys < 0).any():
            raise ValueError("prompt keys must be non-negative int64 values.")
        valid = ~np.isnan(p)
        if not valid.any():
            return
        slots = self._slots(keys[valid])
        p = p[valid]
        uniq, first, inverse = np.unique(slots, return_index=True, return_inverse=True)
        count = np.bincount(inverse)
        mean_p = np.bincount(inverse, weights=p) / count
        new = self.num_observations[uniq] == 0
        self.initial_pass_rate[uniq[new]] = p[first[new]]
        self.ema_pass_rate[uniq[new]] = p[first[new]]
        self.ema_pass_rate[uniq] = self.ema_decay * self.ema_pass_rate[uniq] + (1.0 - self.ema_decay) * mean_p
        self.last_pass_rate[uniq] = mean_p
        side = np.where(mean_p >= 1, 1, np.where(mean_p <= 0, -1, 0))
        streak = self.saturated_streak[uniq].astype(np.int64)
        self.saturated_streak[uniq] = np.where(np.sign(streak) == side, streak + side, side)
        self.num_observations[uniq] += count.astype(np.int32)
        self.last_batch[uniq] = batch_index

    def record(
        self, keys: Sequence[int] | np.ndarray, energies: np.ndarray, selected: Sequence[bool] | np.ndarray
    ) -> None:
        """Records each group's energy and counts the prompts whose group took part in the update."""
        slots = self._lookup(keys)
        seen = slots >= 0
        self.last_energy[slots[seen]] = np.asarray(energies, dtype=np.float64)[seen]
        np.add.at(self.num_selected, slots[seen & np.asarray(selected, dtype=bool)], 1)

    def table(self) -> dict[str, np.ndarray]:
        """Every observed prompt's row as columns (`prompt_key` first), in order of first observation: the state saved
        in checkpoints (`state_dict`)."""
        n = len(self.index)
        return {"prompt_key": self.index.to_numpy(dtype=np.int64), **{k: getattr(self, k)[:n].copy() for k in COLUMNS}}

    state_dict = table

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restores a table produced by [`~PromptState.state_dict`]."""
        missing = [name for name in ("prompt_key", *COLUMNS) if name not in state]
        if missing:
            raise ValueError(f"The saved prompt state lacks the columns {missing}.")
        self.__init__(self.ema_decay)
        n = len(self._slots(state["prompt_key"]))
        for name, dtype in COLUMNS.items():
            getattr(self, name)[:n] = np.asarray(state[name], dtype=dtype)


def prompt_table(state: PromptState, pruned: Any = None, dataset: Any = None) -> pd.DataFrame:
    """
    The per-prompt table as a `pandas.DataFrame`, one row per prompt observed so far.

    Args:
        state ([`~lze_trl.method.prompt_state.PromptState`]):
            The per-prompt table: `prompt_key` and its columns ([`~lze_trl.method.prompt_state.COLUMNS`]).
        pruned (`Callable`, *optional*):
            With forward pruning, the pruner's `pruned(ids, state)`: adds a `pruned` column.
        dataset (`datasets.Dataset`, *optional*):
            A map-style train dataset: adds its scalar columns (`prompt` text, `difficulty`, ...) of each prompt's row
            (`prompt_key` is the row index).
    """
    table = pd.DataFrame(state.table())
    ids = table["prompt_key"].to_numpy()
    if pruned is not None:
        table["pruned"] = pruned(ids, state)
    if dataset is not None:
        rows = dataset.select(ids.tolist())
        for name in rows.column_names:
            values = rows[name]
            if name == "prompt" and values and not isinstance(values[0], str):
                values = [m[-1]["content"] if m else "" for m in values]  # last message of a conversation
            if not values or isinstance(values[0], (str, int, float, bool)):
                table[name] = values
    return table
