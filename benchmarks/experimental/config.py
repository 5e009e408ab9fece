"""[`ExperimentalConfig`]: [`LZEGRPOConfig`] plus the settings of the modes that left the package (each off by
default), and their checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lze_trl.config import LZEGRPOConfig
from lze_trl.selectors.base import check_setting, is_integer_at_least, within
from lze_trl.selectors.base import is_finite_number as _finite

from .rollout_filter import ROLLOUT_FILTER_GRANULARITIES, ROLLOUT_FILTER_MODES


@dataclass
class ExperimentalConfig(LZEGRPOConfig):
    r"""
    Configuration of [`ExperimentalLZETrainer`]: [`LZEGRPOConfig`] plus the settings of the modes that lost their
    benchmarks and left the package (BENCHMARKS.md sections 2, 7 and 9); each is off by default.

    Parameters:
        > Parameters that control DAPO's refill rounds

        dapo_max_resample (`int`, *optional*, defaults to `0`):
            `selector="dapo"`: extra generation rounds (of one generation batch each, for fresh prompts of the
            epoch's pool) run to refill the batch with informative groups, as DAPO's dynamic sampling does; 0 only
            filters. >= 0. Needs a map-style train dataset.

        > Parameters that control rollout replay

        fresh_fraction (`float`, *optional*, defaults to `1.0`):
            Share of each generation batch's prompts that are generated, in (0, 1]. Below 1, each process generates
            `round(fresh_fraction * its prompts)` groups (the first of the sampler's random order) and the update
            takes its groups, by the selector, from those and from a replay buffer of recent live groups trained
            against the log-probabilities recorded when they were generated (see `benchmarks.experimental.replay`).
            Needs a map-style train dataset and whole groups on every process (`per_device_train_batch_size *
            steps_per_generation` a multiple of `num_generations`).
        replay_buffer_size (`int`, *optional*, defaults to `512`):
            Most groups the replay buffer holds, >= 1.
        replay_max_staleness (`int`, *optional*, defaults to `4`):
            Most generation batches between a group's generation and an update that replays it, >= 1.
        replay_max_uses (`int`, *optional*, defaults to `2`):
            Most updates a group takes part in, its first one included, >= 1.

        > Parameters that control rollout-side selection (before generation)

        rollout_filter (`str`, *optional*, defaults to `"none"`):
            Experimental rollout-side selection: predict before generation which prompts would come back dead (all
            rollouts correct or all wrong) and skip them, so generation is spent on the learning zone (see
            `benchmarks.experimental.rollout_filter`). `"none"`: every prompt is rolled out. `"lze"`: skip a prompt
            when its predicted dead probability exceeds `rollout_filter_threshold`. `"greso"`: the GRESO-like baseline,
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
            `benchmarks.experimental.dead_prediction`). With `rollout_filter="greso"` it changes only the logged
            prediction.
    """

    dapo_max_resample: int = field(
        default=0, metadata={"help": "selector='dapo': extra generation rounds to refill the batch (0: filter only)."}
    )
    fresh_fraction: float = field(
        default=1.0, metadata={"help": "Share of each generation batch's prompts generated (below 1: rollout replay)."}
    )
    replay_buffer_size: int = field(default=512, metadata={"help": "Most groups the replay buffer holds."})
    replay_max_staleness: int = field(
        default=4, metadata={"help": "Most generation batches between a group's generation and its replay."}
    )
    replay_max_uses: int = field(default=2, metadata={"help": "Most updates a group takes part in."})
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

    def __post_init__(self):
        super().__post_init__()
        for name, valid, fix in EXPERIMENTAL_CHECKS:
            check_setting(valid(getattr(self, name)), name, getattr(self, name), fix)


EXPERIMENTAL_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    (
        "dapo_max_resample",
        lambda v: is_integer_at_least(v, 0),
        "use an integer >= 0 (0 filters without refilling; DAPO/verl allow up to 10 extra rounds).",
    ),
    (
        "fresh_fraction",
        within(0, 1, closed_low=False),
        "use a fraction in (0, 1], e.g. 0.25 (1.0 generates every prompt, without replay).",
    ),
    ("replay_buffer_size", lambda v: is_integer_at_least(v, 1), "use an integer >= 1, e.g. 512."),
    ("replay_max_staleness", lambda v: is_integer_at_least(v, 1), "use an integer >= 1 (generation batches), e.g. 4."),
    ("replay_max_uses", lambda v: is_integer_at_least(v, 1), "use an integer >= 1, e.g. 2."),
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
        within(0, 1, False, False),
        "use a probability in (0, 1), e.g. 0.6 (higher skips fewer prompts).",
    ),
    (
        "rollout_filter_retry_epochs",
        lambda v: is_integer_at_least(v, 1),
        "use an integer >= 1, e.g. 8 (every skipped prompt is retried at least that often, in epochs).",
    ),
    (
        "rollout_filter_audit",
        within(0, 1),
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
"""(setting, whether a value is valid, the fix) of every experimental setting."""


def check_replay(args: Any, num_generations: int, rows_per_step: int) -> None:
    """
    Raises a `ValueError` naming the setting when rollout replay (`fresh_fraction < 1`) cannot run: a process's share
    of a generation batch must hold whole groups (replayed groups stay on the process that generated them), and the
    refill of DAPO's dynamic sampling would generate what replay means to save.
    """
    rows = rows_per_step * args.steps_per_generation
    if rows % num_generations:
        raise ValueError(
            f"fresh_fraction={args.fresh_fraction} needs whole prompt groups on every process, but a process's share "
            f"of a generation batch is {rows} rows (per_device_train_batch_size={rows_per_step} x "
            f"steps_per_generation={args.steps_per_generation}) for groups of num_generations={num_generations}: "
            "make it a multiple of num_generations."
        )
    if args.dapo_max_resample > 0:
        raise ValueError(
            f"fresh_fraction={args.fresh_fraction} and dapo_max_resample={args.dapo_max_resample} work against each "
            "other (replay generates less, refill more): set dapo_max_resample=0."
        )
