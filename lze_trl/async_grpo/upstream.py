"""TRL's experimental async GRPO, as lze-trl's async modules import it: only from a TRL at least [`MIN_TRL`], the one
they are built on and tested with (its experimental API changes between releases); an older TRL is refused with the
fix."""

import trl
from packaging.version import Version


MIN_TRL = "1.16.0"
"""The oldest TRL whose experimental `AsyncGRPOTrainer` `LZEAsyncGRPOTrainer` is built on."""

if Version(trl.__version__) < Version(MIN_TRL):
    raise ImportError(
        f"LZEAsyncGRPOTrainer needs TRL >= {MIN_TRL} (its experimental AsyncGRPOTrainer), found {trl.__version__}: "
        f"pip install 'trl>={MIN_TRL}', or use LZEGRPOTrainer."
    )

from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer, async_grpo_trainer  # noqa: E402
from trl.experimental.async_grpo.async_rollout_worker import (  # noqa: E402
    AsyncRolloutWorker,
    RolloutGroup,
    RolloutSample,
    _AsyncRolloutLoop,
)
from trl.experimental.async_grpo.packing import TREE_ATTENTION  # noqa: E402


__all__ = [
    "MIN_TRL",
    "TREE_ATTENTION",
    "AsyncGRPOConfig",
    "AsyncGRPOTrainer",
    "AsyncRolloutWorker",
    "RolloutGroup",
    "RolloutSample",
    "_AsyncRolloutLoop",
    "async_grpo_trainer",
]
