"""TRL's experimental async GRPO, as lze-trl's async modules import it: from the TRL it is built on and tested with
([`ASYNC_TRL`]: its experimental API changes between releases, and TRL 1.18 moved it out of `trl.experimental`). Any
other TRL is met with one line naming the installed version, the tested range and the fix."""

import trl

from ..common.coupling import ASYNC_PRIVATE_NAMES, ASYNC_TRL, check_trl, unsupported


try:
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer, async_grpo_trainer
    from trl.experimental.async_grpo.async_rollout_worker import (
        AsyncRolloutWorker,
        RolloutGroup,
        RolloutSample,
        _AsyncRolloutLoop,
    )
    from trl.experimental.async_grpo.packing import TREE_ATTENTION
except ImportError:  # TRL before the async trainer, or from 1.18 on (it moved): the version is the news, not the trace
    raise ImportError(
        unsupported("trl", ASYNC_TRL, trl.__version__, what="LZEAsyncGRPOTrainer")
        or f"LZEAsyncGRPOTrainer: TRL {trl.__version__} lacks trl.experimental.async_grpo"
    ) from None

check_trl(
    (AsyncGRPOTrainer, AsyncGRPOConfig, _AsyncRolloutLoop, AsyncRolloutWorker),
    [name for name in ASYNC_PRIVATE_NAMES if name != "_AsyncRolloutLoop"],  # imported above
    what="LZEAsyncGRPOTrainer",
    supported=ASYNC_TRL,
)

__all__ = [
    "TREE_ATTENTION",
    "AsyncGRPOConfig",
    "AsyncGRPOTrainer",
    "AsyncRolloutWorker",
    "RolloutGroup",
    "RolloutSample",
    "_AsyncRolloutLoop",
    "async_grpo_trainer",
]
