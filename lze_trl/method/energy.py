"""Learning-Zone Energy of a prompt group ([`compute_energy`]). Plain vectorised numpy, no TRL import."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


ENERGY_TERMS = ("anchor", "uncertainty", "momentum")
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
    Learning-Zone Energy of prompt groups (the paper's Eq. 1-4; `docs/source/method.md`), float64:

        energy = max(1 - p0, d_init_min) * 4 p (1 - p) * (1 + momentum_weight * momentum)
        momentum = min(2 |p - ema|, 1) ("abs", the authors' release) or min(2 max(p - ema, 0), 1) ("improve")

    with `p` the group's `pass_rate` now, `p0` its prompt's first pass rate (`initial_pass_rate`) and `ema` the EMA of
    its past pass rates (`ema_pass_rate`, before it absorbs `p`); 0 for `p` in {0, 1} while the uncertainty term is on.
    The `terms` kept (ablations of the paper's Fig. 3) are among `anchor`, `uncertainty` and `momentum`; one left out
    takes its neutral value (1, or 0 for the momentum).
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
