"""Learning-Zone Energy: per-prompt pass-rate state and the energy score.

The energy of a prompt group at step t (see `LZE_SPEC.md`) is

    energy = difficulty_anchor * uncertainty * (1 + momentum_weight * momentum)
    difficulty_anchor = max(1 - p0, d_init_min)
    uncertainty       = 4 * p * (1 - p)
    momentum          = min(2 * |p - ema|, 1)             ("abs")
                      = min(2 * max(p - ema, 0), 1)        ("improve")

where `p` is the group's pass rate now, `p0` the pass rate the first time the prompt was observed and `ema` the
exponential moving average of its past pass rates. The energy is computed with the EMA *before* it absorbs `p`.

This module has no TRL import: it is plain vectorised numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


ENERGY_TERMS = ("anchor", "uncertainty", "momentum")
STATE_ARRAYS = (
    "initial_pass_rate",
    "ema_pass_rate",
    "last_pass_rate",
    "last_energy",
    "num_observations",
    "num_selected",
)
MOMENTUM_MODES = ("abs", "improve")


def compute_energy(
    pass_rate: np.ndarray,
    initial_pass_rate: np.ndarray,
    ema_pass_rate: np.ndarray,
    *,
    d_init_min: float = 0.05,
    momentum_weight: float = 0.3,
    momentum_mode: str = "abs",
    terms: Sequence[str] = ENERGY_TERMS,
) -> np.ndarray:
    """
    Learning-Zone Energy of prompt groups, vectorised.

    Args:
        pass_rate (`np.ndarray`):
            Pass rate `p` of each group at this observation, in [0, 1].
        initial_pass_rate (`np.ndarray`):
            Pass rate `p0` of each prompt at its first observation.
        ema_pass_rate (`np.ndarray`):
            EMA of each prompt's pass rate before this observation.
        d_init_min (`float`, *optional*, defaults to `0.05`):
            Floor of the difficulty anchor `max(1 - p0, d_init_min)`.
        momentum_weight (`float`, *optional*, defaults to `0.3`):
            Weight `alpha` of the momentum term.
        momentum_mode (`str`, *optional*, defaults to `"abs"`):
            `"abs"` (the authors' release) or `"improve"` (the paper's wording: only improvement counts).
        terms (`Sequence[str]`, *optional*, defaults to all three):
            Subset of `("anchor", "uncertainty", "momentum")` to keep; a term left out is replaced by its neutral
            value (1 for the anchor and the uncertainty, 0 for the momentum). Used for ablations.

    Returns:
        `np.ndarray`: the energies, float64, same shape as `pass_rate`. Zero for `p` in {0, 1} whenever the
        uncertainty term is on.
    """
    if momentum_mode not in MOMENTUM_MODES:
        raise ValueError(f"Unknown momentum mode {momentum_mode!r}; expected one of {MOMENTUM_MODES}.")
    p = np.asarray(pass_rate, dtype=np.float64)
    energy = np.ones_like(p)
    if "anchor" in terms:
        energy *= np.maximum(1.0 - np.asarray(initial_pass_rate, dtype=np.float64), d_init_min)
    if "uncertainty" in terms:
        energy *= 4.0 * p * (1.0 - p)
    if "momentum" in terms:
        delta = p - np.asarray(ema_pass_rate, dtype=np.float64)
        if momentum_mode == "improve":
            delta = np.maximum(delta, 0.0)
        energy *= 1.0 + momentum_weight * np.minimum(2.0 * np.abs(delta), 1.0)
    return energy


class PromptIndex:
    """
    Maps arbitrary non-negative int64 prompt ids to dense slots `0..n-1`, vectorised.

    Ids are kept in a sorted array next to their slots, so a lookup is one `np.searchsorted` and new ids are merged
    in one `np.insert`. This costs 16 bytes per prompt and works for dataset indices and 63-bit content hashes alike.
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

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"sorted_ids": self.sorted_ids.copy(), "sorted_slots": self.sorted_slots.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.sorted_ids = np.asarray(state["sorted_ids"], dtype=np.int64).copy()
        self.sorted_slots = np.asarray(state["sorted_slots"], dtype=np.int64).copy()


class EnergyScorer:
    """
    Per-prompt pass-rate state (initial pass rate, EMA, observation count) and the Learning-Zone Energy.

    State lives in flat arrays indexed by a dense slot per prompt id ([`PromptIndex`]): about 40 bytes per prompt,
    so a pool of one million prompts costs about 40 MB (arrays grow by doubling, so up to twice that).
    [`~EnergyScorer.score`] is vectorised and costs O(batch) numpy work plus one sorted merge when new prompts
    arrive.

    Args:
        ema_decay (`float`, *optional*, defaults to `0.9`):
            Decay `beta` of the pass-rate EMA: `ema <- beta * ema + (1 - beta) * p`.
        momentum_weight (`float`, *optional*, defaults to `0.3`):
            Weight `alpha` of the momentum term.
        momentum_mode (`str`, *optional*, defaults to `"abs"`):
            `"abs"` or `"improve"`, see [`compute_energy`].
        d_init_min (`float`, *optional*, defaults to `0.05`):
            Floor of the difficulty anchor.
        terms (`Sequence[str]`, *optional*, defaults to all three):
            Energy terms to use, see [`compute_energy`].

    Example:
    ```python
    >>> scorer = EnergyScorer()
    >>> scorer.score([7, 8], [0.5, 1.0])  # first observation: p0 = ema = p, so no momentum
    array([0.5, 0. ])
    ```
    """

    def __init__(
        self,
        ema_decay: float = 0.9,
        momentum_weight: float = 0.3,
        momentum_mode: str = "abs",
        d_init_min: float = 0.05,
        terms: Sequence[str] = ENERGY_TERMS,
    ) -> None:
        if momentum_mode not in MOMENTUM_MODES:
            raise ValueError(f"Unknown momentum mode {momentum_mode!r}; expected one of {MOMENTUM_MODES}.")
        unknown = set(terms) - set(ENERGY_TERMS)
        if unknown:
            raise ValueError(f"Unknown energy terms {sorted(unknown)}; expected a subset of {ENERGY_TERMS}.")
        self.ema_decay = ema_decay
        self.momentum_weight = momentum_weight
        self.momentum_mode = momentum_mode
        self.d_init_min = d_init_min
        self.terms = tuple(terms)
        self.index = PromptIndex()
        self.initial_pass_rate = np.zeros(0, dtype=np.float32)
        self.ema_pass_rate = np.zeros(0, dtype=np.float32)
        self.last_pass_rate = np.zeros(0, dtype=np.float32)
        self.last_energy = np.zeros(0, dtype=np.float32)
        self.num_observations = np.zeros(0, dtype=np.int32)
        self.num_selected = np.zeros(0, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.index)

    def _grow(self, size: int) -> None:
        capacity = len(self.num_observations)
        if size <= capacity:
            return
        new_capacity = max(size, 2 * capacity, 1024)
        for name in STATE_ARRAYS:
            old = getattr(self, name)
            new = np.zeros(new_capacity, dtype=old.dtype)
            new[:capacity] = old
            setattr(self, name, new)

    def score(self, prompt_ids: Sequence[int] | np.ndarray, pass_rates: Sequence[float] | np.ndarray) -> np.ndarray:
        """
        Energies of one observation of each prompt, then the state update.

        A prompt seen for the first time gets `p0 = ema = p` before scoring. A NaN pass rate (no scorable rollout)
        scores 0 and leaves that prompt's state untouched. A prompt id that appears several times in one call is
        scored against the same prior state each time and updated with the mean of its pass rates.

        Args:
            prompt_ids (`Sequence[int]` or `np.ndarray`):
                Non-negative int64 id of each group's prompt.
            pass_rates (`Sequence[float]` or `np.ndarray`):
                Pass rate of each group, in [0, 1] or NaN.

        Returns:
            `np.ndarray`: energy of each group (float64).
        """
        ids = np.asarray(prompt_ids, dtype=np.int64).reshape(-1)
        p = np.asarray(pass_rates, dtype=np.float64).reshape(-1)
        if ids.shape != p.shape:
            raise ValueError(f"prompt_ids and pass_rates differ in length: {ids.shape[0]} vs {p.shape[0]}.")
        if (ids < 0).any():
            raise ValueError("prompt_ids must be non-negative int64 values.")
        valid = ~np.isnan(p)
        energies = np.zeros(len(ids), dtype=np.float64)
        if not valid.any():
            return energies
        ids, pv = ids[valid], p[valid]
        slots = self.index.add(ids)
        self._grow(len(self.index))

        first = self.num_observations[slots] == 0
        # First observation: p0 and the EMA start at the observed pass rate (first occurrence wins in the batch).
        first_slots, first_pos = np.unique(slots[first], return_index=True)
        self.initial_pass_rate[first_slots] = pv[first][first_pos]
        self.ema_pass_rate[first_slots] = pv[first][first_pos]

        energies[valid] = compute_energy(
            pv,
            self.initial_pass_rate[slots],
            self.ema_pass_rate[slots],
            d_init_min=self.d_init_min,
            momentum_weight=self.momentum_weight,
            momentum_mode=self.momentum_mode,
            terms=self.terms,
        )

        self.last_energy[slots] = energies[valid]
        uniq, inverse = np.unique(slots, return_inverse=True)
        mean_p = np.bincount(inverse, weights=pv) / np.bincount(inverse)
        self.ema_pass_rate[uniq] = self.ema_decay * self.ema_pass_rate[uniq] + (1.0 - self.ema_decay) * mean_p
        self.last_pass_rate[uniq] = mean_p
        self.num_observations[uniq] += np.bincount(inverse).astype(np.int32)
        return energies

    def record_selection(self, prompt_ids: Sequence[int] | np.ndarray, selected: Sequence[bool] | np.ndarray) -> None:
        """Counts, per prompt, the generation batches in which its group took part in the update."""
        ids = np.asarray(prompt_ids, dtype=np.int64).reshape(-1)[np.asarray(selected, dtype=bool).reshape(-1)]
        slots = self.index.lookup(ids)
        np.add.at(self.num_selected, slots[slots >= 0], 1)

    def get(self, prompt_ids: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """State of the given prompts (NaN / 0 for prompts never observed)."""
        slots = self.index.lookup(np.asarray(prompt_ids, dtype=np.int64).reshape(-1))
        seen = slots >= 0
        out = {}
        for name in ("initial_pass_rate", "ema_pass_rate", "last_pass_rate", "last_energy"):
            values = np.full(len(slots), np.nan, dtype=np.float64)
            values[seen] = getattr(self, name)[slots[seen]]
            out[name] = values
        for name in ("num_observations", "num_selected"):
            counts = np.zeros(len(slots), dtype=np.int64)
            counts[seen] = getattr(self, name)[slots[seen]]
            out[name] = counts
        return out

    def table(self) -> dict[str, np.ndarray]:
        """Every observed prompt's state as columns (`prompt_id` first), in order of first observation."""
        n = len(self.index)
        prompt_id = np.empty(n, dtype=np.int64)
        prompt_id[self.index.sorted_slots] = self.index.sorted_ids
        return {"prompt_id": prompt_id, **{name: getattr(self, name)[:n].copy() for name in STATE_ARRAYS}}

    def nbytes(self) -> int:
        """Bytes held by the state arrays (index included)."""
        return (
            sum(getattr(self, name).nbytes for name in STATE_ARRAYS)
            + self.index.sorted_ids.nbytes
            + self.index.sorted_slots.nbytes
        )

    def state_dict(self) -> dict[str, np.ndarray]:
        """The state as plain arrays (trimmed to the prompts seen), for checkpoints."""
        n = len(self.index)
        return {
            **{f"index.{k}": v for k, v in self.index.state_dict().items()},
            **{name: getattr(self, name)[:n].copy() for name in STATE_ARRAYS},
        }

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restores a state produced by [`~EnergyScorer.state_dict`]."""
        self.index.load_state_dict({k[len("index.") :]: v for k, v in state.items() if k.startswith("index.")})
        for name in STATE_ARRAYS:
            setattr(self, name, np.asarray(state[name], dtype=getattr(self, name).dtype).copy())
