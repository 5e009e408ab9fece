"""[`StepClock`]: each optimizer step's seconds and the part of them spent getting rollouts, logged into the trainer's
`lze/` metrics whatever `report_to` is (they reach `log_history` and `trainer_state.json` as TRL's own do)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback


class StepClock(TrainerCallback):
    """
    Times each optimizer step: `lze/step_seconds`, the change of the trainer's `waited()` counter over the step under
    the name `name`, and `lze/update_seconds` (the rest of the step: rewards, scoring, the forward and backward passes,
    the optimizer). Two names for two meanings: the synchronous trainer's `lze/generation_seconds`, its time in TRL's
    generation calls, and the async trainer's `lze/rollout_wait_seconds`, its time waiting for the worker's rollouts
    (the generation the update did not overlap). Each process times its own steps; the main process's are logged.

    Args:
        trainer: The trainer, whose `log_lze` takes the metrics.
        waited (`Callable[[], float]`): The trainer's counter of seconds spent getting rollouts, over the run.
        name (`str`): The metric it is logged as.
    """

    def __init__(self, trainer: Any, waited: Callable[[], float], name: str) -> None:
        self.trainer, self.waited, self.name = trainer, waited, name
        self.started: tuple[float, float] | None = None

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = (time.perf_counter(), self.waited())
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.started is not None:
            start, before = self.started
            seconds = time.perf_counter() - start
            waited = self.waited() - before
            self.trainer.log_lze(
                {"lze/step_seconds": seconds, self.name: waited, "lze/update_seconds": seconds - waited}
            )
            self.started = None
        return control


__all__ = ["StepClock"]
