"""[`LZESettings`]: the settings the method reads, as typed attributes of the trainer's config.

[`~lze_trl.LZEGRPOConfig`] defines each setting once (its default, its check, its `--help`), and
[`~lze_trl.async_grpo.trainer.LZEAsyncGRPOConfig`] takes the same fields; this protocol names what the method layer
reads of either, with its type, so that a reader (or a type checker) can follow a setting such as `selection_ratio`
from the config to the code that acts on it: [`~lze_trl.method.run.LZERun`], the selectors and the round policies
take an `LZESettings`. `tests/test_config.py` checks that both configs provide every attribute with this type.
"""

from __future__ import annotations

from typing import Protocol


class LZESettings(Protocol):
    """
    The LZE settings of a run, as the method reads them (each documented in [`~lze_trl.LZEGRPOConfig`]).

    Attributes:
        selector (`str`): Which registered selector weighs the complete groups.
        selection_ratio (`float`): The share of the groups the selector keeps.
        selection_noise (`float`): Exploration noise on the energies before the top-k.
        energy_ema_decay (`float`): Decay of each prompt's pass-rate moving average.
        energy_momentum_weight (`float`), energy_momentum_mode (`str`): The momentum term's weight and form.
        energy_d_init_min (`float`): Floor of the difficulty anchor.
        energy_terms (`list[str]`): The energy's factors.
        pass_threshold (`float`): The correctness reward at or above which a rollout passes.
        learning_zone_threshold (`float`): The adaptive budget's probability of a group being in the learning zone.
        history_prior_strength (`float`): Weight of a prompt's history in the round policies' priors.
        max_unscorable_batches (`int`): Batches in a row with nothing scored before the run stops.
        prune_solved (`bool`), prune_solved_after (`int`), prune_revisit_fraction (`float`): Forward pruning.
        generation_rounds (`list[int]` or `None`), round_policy (`str`), fuse_rounds (`bool`): Generating in rounds.
        selection_log_max_rows (`int`): Rows the selection log keeps.
        seed (`int`): The run's seed (the selectors', round policies' and pruning's random streams).
    """

    selector: str
    selection_ratio: float
    selection_noise: float
    energy_ema_decay: float
    energy_momentum_weight: float
    energy_momentum_mode: str
    energy_d_init_min: float
    energy_terms: list[str]
    pass_threshold: float
    learning_zone_threshold: float
    history_prior_strength: float
    max_unscorable_batches: int
    prune_solved: bool
    prune_solved_after: int
    prune_revisit_fraction: float
    generation_rounds: list[int] | None
    round_policy: str
    fuse_rounds: bool
    selection_log_max_rows: int
    seed: int
