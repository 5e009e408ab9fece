"""Configuration of [`LZEGRPOTrainer`]: `GRPOConfig` plus the LZE settings, each checked where it is defined."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from trl import GRPOConfig

from .energy import ENERGY_TERMS, MOMENTUM_MODES
from .experimental.rollout_filter import ROLLOUT_FILTER_GRANULARITIES, ROLLOUT_FILTER_MODES
from .selectors import SELECTORS
from .selectors.base import check_setting as _check
from .selectors.base import is_finite_number as _finite
from .state import RESUME_MODES


@dataclass
class LZEGRPOConfig(GRPOConfig):
    r"""
    Configuration class for the [`LZEGRPOTrainer`].

    [`LZEGRPOConfig`] inherits every parameter of TRL's `GRPOConfig` and adds those of Learning-Zone Energy (LZE)
    selection: which prompt groups of a generation batch take part in the policy update (backward selection), and
    which prompts are still rolled out (forward pruning, off by default). Defaults are those of the authors' release.

    Parameters:
        > Parameters that control which groups take part in the update (backward selection)

        selector (`str`, *optional*, defaults to `"lze"`):
            How prompt groups are chosen for the update, by the name of a registered selector (see
            `lze_trl.selectors`): `"lze"` (top `selection_ratio` by energy; restrict `energy_terms` for the paper's
            ablations), `"none"` (every group, exactly as `GRPOTrainer`), or one of the paper's peers and controls:
            `"uniform"` (a random `selection_ratio` of the groups), `"uniform_live"` (LZE's quota drawn at random among
            the live groups), `"dapo"` (DAPO's dynamic filtering: every live group), `"reinforce_rej"` (online
            rejection of all-correct / all-wrong prompts), or a selector registered outside the package.
        selection_ratio (`float`, *optional*, defaults to `0.4`):
            Fraction of the generation batch's groups kept for the update, in (0, 1].
        min_selection_ratio (`float`, *optional*):
            Lower bound of the kept fraction, in [0, `selection_ratio`]. Defaults to `min(0.3, selection_ratio)`: the
            release's 0.3 at the default ratio, and the ratio itself below 0.3, so that `selection_ratio=0.2` alone
            keeps 20%.
        selection_noise (`float`, *optional*, defaults to `0.05`):
            Scale of the Gumbel exploration noise added to the energies, relative to their range; 0 ranks by energy.
        > Parameters that control the energy

        energy_ema_decay (`float`, *optional*, defaults to `0.9`):
            Decay of the per-prompt pass-rate EMA (`ema <- decay * ema + (1 - decay) * p`), in [0, 1): the one EMA of
            the per-prompt table, read by the energy, the selectors and the rollout filter.
        energy_momentum_weight (`float`, *optional*, defaults to `0.3`):
            Weight of the momentum term of the energy, >= 0.
        energy_momentum_mode (`str`, *optional*, defaults to `"abs"`):
            `"abs"`: momentum `min(2|p - ema|, 1)` (the release); `"improve"`: `min(2 max(p - ema, 0), 1)` (the
            paper's wording).
        energy_d_init_min (`float`, *optional*, defaults to `0.05`):
            Floor of the difficulty anchor `max(1 - p0, energy_d_init_min)`, in [0, 1].
        energy_terms (`list[str]`, *optional*, defaults to `["anchor", "uncertainty", "momentum"]`):
            Terms of the energy to use; a term left out takes its neutral value (ablations of the paper's Fig. 3).
        > Parameters that control what counts as correct

        pass_threshold (`float`, *optional*, defaults to `0.5`):
            A rollout is correct when the correctness reward is `>= pass_threshold`. A rollout whose correctness
            reward is `None` (TRL turns it into NaN) counts neither as correct nor as wrong: it is left out of its
            group's pass rate, and a group with no scorable rollout has no pass rate (energy 0, its state unchanged).
            With a non-binary correctness reward (values other than 0 and 1), a group all on one side of the threshold
            whose total rewards still differ is live: it gets a small energy below every learning-zone group (see
            `lze_trl.selection.live_groups` and `spread_energies`).
        correctness_reward (`str` or `int`, *optional*):
            Name or index of the reward function that defines correctness. Defaults to the first one.
        > Parameters that control forward pruning

        prune_solved (`bool`, *optional*, defaults to `False`):
            Stop rolling out prompts that stay fully solved (forward pruning), replaying a few each epoch. Needs a
            map-style train dataset.
        prune_solved_after (`int`, *optional*, defaults to `2`):
            Consecutive fully-solved observations of a prompt (one per epoch while it is rolled out) after which it is
            pruned, >= 1.
        prune_replay_fraction (`float`, *optional*, defaults to `0.1`):
            Fraction of the prune pool replayed at the start of each epoch (at least one prompt when > 0), in [0, 1].
        > Parameters of the peer selectors (each read and validated by its selector)

        dapo_max_resample (`int`, *optional*, defaults to `0`):
            `selector="dapo"`: extra generation rounds (of one generation batch each, for fresh prompts of the
            epoch's pool) run to refill the batch with informative groups, as DAPO's dynamic sampling does; 0 only
            filters. >= 0. Needs a map-style train dataset.
        selector_kwargs (`dict[str, Any]` or `str`, *optional*):
            Settings of a selector registered outside lze-trl (see `lze_trl.selectors.register_selector`), as a dict or
            a JSON string (the command line's `--selector_kwargs '{"k": 1}'`); the selector reads them from
            `args.selector_kwargs` and validates them in its `check_args`, so adding a selector needs no change to
            this config or the trainer. The built-in selectors have their own fields above.
        > Parameters that control rollout-side selection (before generation)

        rollout_filter (`str`, *optional*, defaults to `"none"`):
            Experimental rollout-side selection: predict before generation which prompts would come back dead (all
            rollouts correct or all wrong) and skip them, so generation is spent on the learning zone (see
            `lze_trl.experimental.rollout_filter`). `"none"`: every prompt is rolled out. `"lze"`: skip a prompt when
            its predicted dead probability exceeds `rollout_filter_threshold`. `"greso"`: the GRESO-like baseline,
            skip with probability `1 - max(0.5 ** k, 0.01)` after `k` consecutive dead observations. Needs a
            map-style train dataset. Pair it with `selection_ratio=1.0`, so that every live group it paid for
            reaches the update.
        rollout_filter_granularity (`str`, *optional*, defaults to `"batch"`):
            When the skip decision is taken. `"batch"`: each generation batch is filled, just before it is generated,
            with the next prompts of the epoch's order that the current state does not skip, so every decision uses
            the groups scored up to then (e.g. a prior column's per-bucket prior learned from the epoch's first
            observations) and every generation batch is full. `"epoch"`: the epoch's pool is decided once at its
            start (the first version: nothing is skipped in the first epoch, and state learned during an epoch acts
            only from the next).
        rollout_filter_threshold (`float`, *optional*, defaults to `0.6`):
            `rollout_filter="lze"`: predicted dead probability above which a prompt is skipped, in (0, 1).
        rollout_filter_retry_epochs (`int`, *optional*, defaults to `8`):
            Exploration floor: a skipped prompt is rolled out again after at most this many epochs without one, >= 1.
            Skipping shortens epochs, so an epoch here is a full dataset's worth of generated groups.
        rollout_filter_audit (`float`, *optional*, defaults to `0.02`):
            Share of the generated groups that are skipped prompts rolled out anyway, to count wrong skips
            (`rollout_filter/wrong_skip_rate`), in [0, 1].
        rollout_filter_prior_column (`str`, *optional*):
            Train dataset column (e.g. `"difficulty"`) whose values group prompts never rolled out for their prior:
            the share of dead first observations among prompts with the same value, which can skip them. Default:
            one group, whose prior is logged but never skips a prompt never seen.
        rollout_filter_momentum (`float`, *optional*, defaults to `1.0`):
            Weight `mu` of the trend in the predicted pass rate `q = ema + mu * (p_last - ema)` of a prompt already
            rolled out, >= 0: 1 is the last pass rate, below 1 lies between the EMA and it, above 1 extrapolates.
        rollout_filter_calibration (`bool`, *optional*, defaults to `True`):
            Recalibrate the predicted dead probability online before the threshold: a monotone map fitted to the run's
            own pairs of (prediction at planning, group came back dead), audits included (see
            `lze_trl.experimental.dead_prediction`). With `rollout_filter="greso"` it changes only the logged
            prediction.
        > Parameters that control the logs and the saved state

        selection_log_max_rows (`int`, *optional*, defaults to `100000`):
            Rows (one per prompt group and generation batch) kept in the selection log, oldest dropped first; 0
            disables it. Saved as `lze_selection_log.parquet` with each checkpoint and at the end of training, and
            restored on resume.
        resume_lze_state (`str`, *optional*, defaults to `"strict"`):
            What a resumed run does when its checkpoint has no usable LZE state: the state file `lze_state.npz` or
            the selection log is missing or corrupt, or the state was recorded on another train dataset (its size and
            a hash of its prompts are saved with the state). `"strict"` raises an error naming the file or both
            dataset sizes, so per-prompt pass rates are never lost silently nor mapped onto other prompts; `"fresh"`
            resumes the model, optimizer and schedule with a fresh LZE state, after a warning. With
            `selector="none"` and no pruning the state decides nothing, and a missing one only warns.
    """

    selector: str = field(
        default="lze",
        metadata={"help": "How prompt groups are chosen for the update (a registered selector's name)."},
    )
    selection_ratio: float = field(
        default=0.4, metadata={"help": "Fraction of the generation batch's groups kept for the update, in (0, 1]."}
    )
    min_selection_ratio: float | None = field(
        default=None,
        metadata={
            "help": "Lower bound of the kept fraction, in [0, selection_ratio]; default min(0.3, selection_ratio)."
        },
    )
    selection_noise: float = field(
        default=0.05, metadata={"help": "Scale of the Gumbel exploration noise relative to the energy range."}
    )
    energy_ema_decay: float = field(default=0.9, metadata={"help": "Decay of the pass-rate EMA, in [0, 1)."})
    energy_momentum_weight: float = field(default=0.3, metadata={"help": "Weight of the momentum term, >= 0."})
    energy_momentum_mode: str = field(
        default="abs", metadata={"help": "Momentum mode.", "choices": list(MOMENTUM_MODES)}
    )
    energy_d_init_min: float = field(default=0.05, metadata={"help": "Floor of the difficulty anchor, in [0, 1]."})
    energy_terms: list[str] = field(
        default_factory=lambda: list(ENERGY_TERMS),
        metadata={"help": "Energy terms to use, a subset of anchor, uncertainty, momentum (ablations)."},
    )
    pass_threshold: float = field(
        default=0.5, metadata={"help": "A rollout is correct when the correctness reward is >= pass_threshold."}
    )
    correctness_reward: str | None = field(
        default=None,
        metadata={"help": "Name or index of the reward function that defines correctness (default: the first)."},
    )
    prune_solved: bool = field(
        default=False, metadata={"help": "Stop rolling out prompts that stay fully solved, replaying a few."}
    )
    prune_solved_after: int = field(
        default=2, metadata={"help": "Consecutive fully-solved observations after which a prompt is pruned, >= 1."}
    )
    prune_replay_fraction: float = field(
        default=0.1, metadata={"help": "Fraction of the prune pool replayed each epoch, in [0, 1]."}
    )
    dapo_max_resample: int = field(
        default=0, metadata={"help": "selector='dapo': extra generation rounds to refill the batch (0: filter only)."}
    )
    selector_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": "Settings of a selector registered outside lze-trl, as a dict (JSON on the command line); the "
            "selector reads and validates them."
        },
    )
    rollout_filter: str = field(
        default="none",
        metadata={
            "help": "Rollout-side selection: skip prompts predicted dead before generating them.",
            "choices": list(ROLLOUT_FILTER_MODES),
        },
    )
    rollout_filter_granularity: str = field(
        default="batch",
        metadata={
            "help": "When rollout_filter decides: per generation batch, with the latest state, or once per epoch.",
            "choices": list(ROLLOUT_FILTER_GRANULARITIES),
        },
    )
    rollout_filter_threshold: float = field(
        default=0.6, metadata={"help": "rollout_filter='lze': skip when the predicted dead probability exceeds this."}
    )
    rollout_filter_retry_epochs: int = field(
        default=8, metadata={"help": "Roll every skipped prompt out again after this many epochs, >= 1."}
    )
    rollout_filter_audit: float = field(
        default=0.02, metadata={"help": "Share of skipped prompts generated anyway to count wrong skips, in [0, 1]."}
    )
    rollout_filter_prior_column: str | None = field(
        default=None, metadata={"help": "Dataset column grouping unseen prompts for their prior (e.g. difficulty)."}
    )
    rollout_filter_momentum: float = field(
        default=1.0,
        metadata={
            "help": "Weight mu of the last pass rate's trend in the predicted pass rate, >= 0 (>1 extrapolates)."
        },
    )
    rollout_filter_calibration: bool = field(
        default=True,
        metadata={"help": "Recalibrate the predicted dead probability online (isotonic map on the run's outcomes)."},
    )

    selection_log_max_rows: int = field(
        default=100_000, metadata={"help": "Rows kept in the selection log (oldest dropped first); 0 disables it."}
    )
    resume_lze_state: str = field(
        default="strict",
        metadata={
            "help": "On resume, a checkpoint without a usable LZE state (missing, corrupt, other train dataset): "
            "'strict' refuses with an error, 'fresh' resumes with a fresh LZE state.",
            "choices": list(RESUME_MODES),
        },
    )

    _VALID_DICT_FIELDS = GRPOConfig._VALID_DICT_FIELDS + ["selector_kwargs"]

    def __post_init__(self):
        super().__post_init__()  # parses the JSON string of a dict field (`selector_kwargs`), as TRL's
        validate_lze_args(self)


DEFAULT_MIN_SELECTION_RATIO = 0.3
"""The release's floor of the kept fraction (`rho_min`); `min_selection_ratio` defaults to the smaller of it and
`selection_ratio`."""

LZE_FIELDS = tuple(f.name for f in fields(LZEGRPOConfig) if f.name not in {g.name for g in fields(GRPOConfig)})


def _integer(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _within(low: float, high: float, closed_low: bool = True, closed_high: bool = True) -> Callable[[Any], bool]:
    def valid(value: Any) -> bool:
        return (
            _finite(value)
            and (low <= value if closed_low else low < value)
            and (value <= high if closed_high else value < high)
        )

    return valid


_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    # (setting, whether a value is valid, the fix), checked in this order after `selector` and `selection_ratio`
    ("selection_noise", lambda v: _finite(v) and v >= 0, "use a finite value >= 0 (0 disables exploration noise)."),
    ("energy_ema_decay", _within(0, 1, closed_high=False), "use a decay in [0, 1), e.g. 0.9."),
    ("energy_momentum_weight", lambda v: _finite(v) and v >= 0, "use a finite weight >= 0, e.g. 0.3."),
    ("energy_momentum_mode", lambda v: v in MOMENTUM_MODES, f"use one of {list(MOMENTUM_MODES)}."),
    ("energy_d_init_min", _within(0, 1), "use a value in [0, 1], e.g. 0.05."),
    ("pass_threshold", _finite, "use a finite reward threshold."),
    ("prune_solved_after", lambda v: _integer(v, 1), "use an integer >= 1, e.g. 2."),
    ("selection_log_max_rows", lambda v: _integer(v, 0), "use an integer >= 0 (0 disables the log)."),
    ("prune_replay_fraction", _within(0, 1), "use a fraction in [0, 1], e.g. 0.1."),
    (
        "resume_lze_state",
        lambda v: v in RESUME_MODES,
        f"use one of {list(RESUME_MODES)} ('fresh' resumes with a fresh LZE state on purpose).",
    ),
    (
        "selector_kwargs",
        lambda v: v is None or isinstance(v, dict),
        'use a dict (a JSON object on the command line), e.g. {"my_setting": 1}.',
    ),
    (
        "rollout_filter",
        lambda v: v in ROLLOUT_FILTER_MODES,
        f"use one of {list(ROLLOUT_FILTER_MODES)} ('none' rolls every prompt out).",
    ),
    (
        "rollout_filter_granularity",
        lambda v: v in ROLLOUT_FILTER_GRANULARITIES,
        f"use one of {list(ROLLOUT_FILTER_GRANULARITIES)} ('batch' decides each generation batch with the latest "
        "state).",
    ),
    (
        "rollout_filter_threshold",
        _within(0, 1, False, False),
        "use a probability in (0, 1), e.g. 0.6 (higher skips fewer prompts).",
    ),
    (
        "rollout_filter_retry_epochs",
        lambda v: _integer(v, 1),
        "use an integer >= 1, e.g. 8 (every skipped prompt is retried at least that often, in epochs).",
    ),
    (
        "rollout_filter_audit",
        _within(0, 1),
        "use a fraction in [0, 1], e.g. 0.02 (0 disables the audit of skipped prompts).",
    ),
    (
        "rollout_filter_momentum",
        lambda v: _finite(v) and v >= 0,
        "use a number >= 0, e.g. 0.5 (1 predicts the last pass rate, above 1 extrapolates its trend).",
    ),
    (
        "rollout_filter_calibration",
        lambda v: isinstance(v, bool),
        "use True or False (True recalibrates rollout_filter's predicted dead probability online).",
    ),
)


def validate_lze_args(args: LZEGRPOConfig) -> None:
    """Raises a `ValueError` naming the setting and the fix for any out-of-range LZE setting."""
    _check(args.selector in SELECTORS, "selector", args.selector, f"use one of {sorted(SELECTORS)}.")
    _check(
        _within(0, 1, closed_low=False)(args.selection_ratio),
        "selection_ratio",
        args.selection_ratio,
        "use a fraction in (0, 1], e.g. 0.4 (1.0 keeps every informative group).",
    )
    if args.min_selection_ratio is None:
        args.min_selection_ratio = min(DEFAULT_MIN_SELECTION_RATIO, args.selection_ratio)
    _check(
        _within(0, args.selection_ratio)(args.min_selection_ratio),
        "min_selection_ratio",
        args.min_selection_ratio,
        f"use a fraction in [0, selection_ratio={args.selection_ratio}].",
    )
    terms = args.energy_terms.split(",") if isinstance(args.energy_terms, str) else list(args.energy_terms)
    terms = [t.strip() for t in terms] if all(isinstance(t, str) for t in terms) else terms
    _check(
        len(terms) > 0 and set(terms) <= set(ENERGY_TERMS),
        "energy_terms",
        args.energy_terms,
        f"use a non-empty subset of {list(ENERGY_TERMS)}.",
    )
    args.energy_terms = terms
    for name, valid, fix in _CHECKS:
        _check(valid(getattr(args, name)), name, getattr(args, name), fix)
    for selector in SELECTORS.values():  # each selector validates its own settings
        selector.check_args(args)
