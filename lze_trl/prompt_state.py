"""The per-prompt state: one table of statistics, updated once per scored group, read by every part of LZE.

The energy, the selectors, forward pruning and rollout-side planning all read this table; none keeps a copy of a
pass-rate statistic of its own. Plain vectorised numpy, no torch or TRL import.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


COLUMNS = {
    "initial_pass_rate": np.float32,  # pass rate at the first observation, never updated afterwards
    "ema_pass_rate": np.float32,  # EMA of the pass rates: ema <- decay * ema + (1 - decay) * p (p at the first)
    "last_pass_rate": np.float32,
    "last_energy": np.float32,
    "num_observations": np.int32,
    "num_selected": np.int32,  # generation batches in which its group took part in the update
    # consecutive saturated observations (every rollout right, or every one wrong): +k solved k times, -k unsolved
    "saturated_streak": np.int32,
    "last_generation": np.int64,  # generation batch of the last observation
}
"""The table's columns and their types."""


class PromptIndex:
    """
    Maps arbitrary non-negative int64 prompt ids to dense slots `0..n-1`, vectorised.

    Ids are kept in a sorted array next to their slots, so a lookup is one `np.searchsorted` and new ids are merged
    in one `np.insert`. This costs 16 bytes per prompt and works for row indices and 63-bit content hashes alike.
    """

    def __init__(self) -> None:
        self.sorted_ids = np.empty(0, dtype=np.int64)
        self.sorted_slots = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.sorted_ids)

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Slots of `ids`, -1 where an id is unknown."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(self) == 0:
            return np.full(ids.shape, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.sorted_ids, ids), len(self) - 1)
        return np.where(self.sorted_ids[pos] == ids, self.sorted_slots[pos], -1)

    def add(self, ids: np.ndarray) -> np.ndarray:
        """Slots of `ids`, giving the next free slots to ids never seen (in order of first appearance)."""
        slots = self.lookup(ids)
        missing = slots < 0
        if missing.any():
            new_ids, first = np.unique(np.asarray(ids, dtype=np.int64)[missing], return_index=True)
            new_ids = new_ids[np.argsort(first)]  # order of first appearance, so slots are deterministic
            new_slots = np.arange(len(self), len(self) + len(new_ids), dtype=np.int64)
            by_id = np.argsort(new_ids)
            pos = np.searchsorted(self.sorted_ids, new_ids[by_id])
            self.sorted_ids = np.insert(self.sorted_ids, pos, new_ids[by_id])
            self.sorted_slots = np.insert(self.sorted_slots, pos, new_slots[by_id])
            slots = self.lookup(ids)
        return slots

    def ids(self) -> np.ndarray:
        """The ids in slot order."""
        out = np.empty(len(self), dtype=np.int64)
        out[self.sorted_slots] = self.sorted_ids
        return out


class PromptState:
    """
    Every per-prompt statistic of a run, one row per prompt observed (columns: [`COLUMNS`]).

    Rows live in flat arrays indexed by a dense slot per prompt id ([`PromptIndex`]): about 50 bytes per prompt, so a
    pool of one million prompts costs about 50 MB (arrays grow by doubling, so up to twice that).

    Args:
        ema_decay (`float`, *optional*, defaults to `0.9`):
            Decay of the pass-rate EMA (the config's `energy_ema_decay`).

    Example:
    ```python
    >>> state = PromptState()
    >>> state.observe([7, 8], [0.5, 1.0], generation=0)
    >>> state.get([7, 8, 9])["saturated_streak"]
    array([0, 1, 0])
    ```
    """

    def __init__(self, ema_decay: float = 0.9) -> None:
        self.ema_decay = ema_decay
        self.index = PromptIndex()
        for name, dtype in COLUMNS.items():
            setattr(self, name, np.zeros(0, dtype=dtype))

    def __len__(self) -> int:
        return len(self.index)

    def _slots(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        slots = self.index.add(np.asarray(ids, dtype=np.int64).reshape(-1))
        capacity = len(self.num_observations)
        if len(self.index) > capacity:
            size = max(len(self.index), 2 * capacity, 1024)
            for name in COLUMNS:
                old = getattr(self, name)
                setattr(self, name, np.concatenate([old, np.zeros(size - capacity, dtype=old.dtype)]))
        return slots

    def get(self, ids: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """The columns for `ids` (float columns NaN and counts 0 for prompts never observed)."""
        slots = self.index.lookup(np.asarray(ids, dtype=np.int64).reshape(-1))
        seen = slots >= 0
        out = {}
        for name, dtype in COLUMNS.items():
            floating = np.issubdtype(dtype, np.floating)
            values = np.full(len(slots), np.nan if floating else 0, dtype=np.float64 if floating else np.int64)
            values[seen] = getattr(self, name)[slots[seen]]
            out[name] = values
        return out

    def observe(
        self, ids: Sequence[int] | np.ndarray, pass_rates: Sequence[float] | np.ndarray, generation: int
    ) -> None:
        """
        Updates the table with one scored group per entry.

        A NaN pass rate (no scorable rollout) leaves its prompt untouched. A prompt seen for the first time starts
        with `initial_pass_rate = ema_pass_rate` = its pass rate (the first occurrence's, if it repeats in the call).
        A prompt that appears several times in one call is updated once, with the mean of its pass rates (its
        saturated streak grows only if every one of its groups was saturated on the same side).
        """
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        p = np.asarray(pass_rates, dtype=np.float64).reshape(-1)
        if ids.shape != p.shape:
            raise ValueError(f"ids and pass_rates differ in length: {ids.shape[0]} vs {p.shape[0]}.")
        if (ids < 0).any():
            raise ValueError("prompt ids must be non-negative int64 values.")
        valid = ~np.isnan(p)
        if not valid.any():
            return
        slots = self._slots(ids[valid])
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
        self.last_generation[uniq] = generation

    def record(
        self, ids: Sequence[int] | np.ndarray, energies: np.ndarray, selected: Sequence[bool] | np.ndarray
    ) -> None:
        """Records each group's energy and counts the prompts whose group took part in the update."""
        slots = self.index.lookup(np.asarray(ids, dtype=np.int64).reshape(-1))
        seen = slots >= 0
        self.last_energy[slots[seen]] = np.asarray(energies, dtype=np.float64)[seen]
        np.add.at(self.num_selected, slots[seen & np.asarray(selected, dtype=bool)], 1)

    def table(self) -> dict[str, np.ndarray]:
        """Every observed prompt's row as columns (`prompt_id` first), in order of first observation."""
        n = len(self.index)
        return {"prompt_id": self.index.ids(), **{name: getattr(self, name)[:n].copy() for name in COLUMNS}}

    def nbytes(self) -> int:
        """Bytes held by the table (index included)."""
        return sum(getattr(self, name).nbytes for name in COLUMNS) + 2 * self.index.sorted_ids.nbytes

    def state_dict(self) -> dict[str, np.ndarray]:
        """The table as plain arrays (trimmed to the prompts seen), for checkpoints."""
        return self.table()

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restores a table produced by [`~PromptState.state_dict`]."""
        missing = [name for name in ("prompt_id", *COLUMNS) if name not in state]
        if missing:
            raise ValueError(f"The saved prompt state lacks the columns {missing}.")
        self.index = PromptIndex()
        for name, dtype in COLUMNS.items():
            setattr(self, name, np.zeros(0, dtype=dtype))
        self._slots(np.asarray(state["prompt_id"], dtype=np.int64))
        n = len(self.index)
        for name, dtype in COLUMNS.items():
            getattr(self, name)[:n] = np.asarray(state[name], dtype=dtype)
