"""The places where [`LZEGRPOTrainer`] must mirror what TRL's `GRPOTrainer` does inside a method it cannot call.

A skipped micro-step runs no loss, so whatever `GRPOTrainer.training_step` and `_compute_loss` do besides the loss
(advance the micro-step counter, log `step_time` and metrics, advance the adaptive entropy controller once per
optimizer step) must be done here instead; and the trainer must know, before calling `GRPOTrainer._prepare_inputs`,
whether that call will generate. Each helper names the TRL code it mirrors; `tests/test_trl_coupling.py` fails when
the installed TRL changes it.
"""

from __future__ import annotations

import math
from typing import Any


def update_metric_keys(trainer: Any) -> list[str]:
    """
    The metric keys `GRPOTrainer._compute_loss` appends for one training micro-step, given the trainer's settings.

    Mirrors `trl.GRPOTrainer._compute_loss` (trl 1.16): `policy_loss` and `entropy_coef` with the entropy bonus,
    `aux_loss` with a router auxiliary loss, `kl` when `beta != 0`, `entropy` always, then the clip ratios of the loss
    type.
    """
    keys = []
    if getattr(trainer, "_entropy_bonus_enabled", False):
        keys += ["policy_loss", "entropy_coef"]
    if getattr(trainer, "aux_loss_enabled", False):
        keys.append("aux_loss")
    if trainer.beta != 0.0:
        keys.append("kl")
    keys.append("entropy")
    if trainer.loss_type in ("grpo", "bnpo", "dr_grpo", "dapo", "luspo"):
        keys += [
            "clip_ratio/low_mean",
            "clip_ratio/high_mean",
            "clip_ratio/region_mean",
            "clip_ratio/low_min",
            "clip_ratio/high_max",
        ]
    elif trainer.loss_type == "cispo":
        keys.append("cispo_clip_ratio")
    elif trainer.loss_type == "vespo":
        keys.append("vespo/phi_seq_mean")
    return keys


def update_metric_fill_values(trainer: Any) -> dict[str, float]:
    """
    What a zero update logs under each key of [`update_metric_keys`]: no loss (`0.0` for the losses), nothing
    clipped (`0.0` for the clip ratios), no token measured (`NaN` for `entropy`, `kl` and `vespo/phi_seq_mean`, which
    TRL's `log` writes as `None`), and the entropy coefficient in force.
    """
    values = {}
    for key in update_metric_keys(trainer):
        if key == "entropy_coef":
            values[key] = float(trainer.entropy_coef)
        elif key in ("entropy", "kl", "vespo/phi_seq_mean"):
            values[key] = math.nan
        else:
            values[key] = 0.0
    return values


def advance_entropy_controller(trainer: Any) -> None:
    """
    One optimizer step of TRL's adaptive entropy controller for a window that ran no loss.

    Mirrors the end-of-window branch of `trl.GRPOTrainer._compute_loss` (trl 1.16): the coefficient moves by
    `entropy_coef_delta` towards raising entropy when the window's entropy is at or below `entropy_target` and
    towards lowering the bonus otherwise, within `[entropy_coef_min, entropy_coef_max]`. A window that ran no loss
    measured no entropy, so the last measured one (`_last_world_entropy`) stands in for it. `entropy_coef` is logged
    at the window's end as TRL does whenever the entropy bonus is on.
    """
    if not getattr(trainer, "_entropy_bonus_enabled", False):
        return
    if trainer.use_adaptive_entropy:
        args = trainer.args
        if trainer._last_world_entropy <= args.entropy_target:
            trainer.entropy_coef = min(trainer.entropy_coef + args.entropy_coef_delta, args.entropy_coef_max)
        else:
            trainer.entropy_coef = max(trainer.entropy_coef - args.entropy_coef_delta, args.entropy_coef_min)
        trainer._entropy_window_stats = None
    trainer._metrics["train"]["entropy_coef"].append(trainer.entropy_coef)


def is_generation_step(trainer: Any) -> bool:
    """
    Whether the next `GRPOTrainer._prepare_inputs` call generates a new generation batch (training mode only).

    Mirrors the condition of `trl.GRPOTrainer._prepare_inputs` (trl 1.16): generation every
    `steps_per_generation * num_iterations` micro-steps, or when nothing is buffered (after a resume).
    """
    generate_every = trainer.args.steps_per_generation * trainer.num_iterations
    return trainer.model.training and (trainer._step % generate_every == 0 or trainer._buffered_inputs is None)


def skip_micro_step(trainer: Any) -> bool:
    """
    What `GRPOTrainer.training_step` does besides the forward/backward, for a micro-step that runs none: advance the
    micro-step counter `_step` that paces generation and, at the end of an optimizer window, log the window's
    `step_time` and reset it. Returns whether a window ended here (the caller then advances what TRL advances once
    per optimizer step, see [`advance_entropy_controller`]).

    Mirrors `trl.GRPOTrainer.training_step` (trl 1.16).
    """
    trainer._step += 1
    if trainer._step % trainer.current_gradient_accumulation_steps != 0:
        return False
    trainer._metrics["train"]["step_time"].append(trainer._current_train_step_time)
    trainer._current_train_step_time = 0.0
    return True
