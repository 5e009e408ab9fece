"""The modes that lost their benchmarks and left the package (BENCHMARKS.md sections 2, 7 and 9), kept runnable as
plugins of the core's step and planning: rollout replay, the rollout filter (rollout-side selection before
generation) and DAPO's refill rounds. Train them with [`ExperimentalLZETrainer`] and an [`ExperimentalConfig`]; the
benchmark harness does when a run spec sets one of their settings (`"lze:fresh_fraction=0.25"`, `lze+rollout`,
`"dapo:dapo_max_resample=2"`).

- `config`: [`ExperimentalConfig`], the settings and their checks.
- `trainer`: [`ExperimentalLZETrainer`], which plugs the modes into [`~lze_trl.LZEGRPOTrainer`].
- `refill`, `replay`, `replay_plan`: DAPO's refill rounds and rollout replay, as rollout plans.
- `rollout_filter`, `dead_prediction`, `sampler`, `plotting`: the rollout filter, its predictor and calibration, its
  per-batch sampler and its figure.
"""

from .. import peers  # noqa: F401  (registers "dapo", whose refill rounds are here, and the other peers)
from .config import ExperimentalConfig
from .trainer import ExperimentalLZETrainer


__all__ = ["ExperimentalConfig", "ExperimentalLZETrainer"]
