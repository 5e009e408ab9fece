"""C-GRPO (`trl-cgrpo`, a `GRPOTrainer` subclass on the package index; TRL < 1.15) as an arm of the demo's comparison,
for BENCHMARKS.md section 12. It needs its own virtual environment (`make .venv-cgrpo`).

The arm is [`CGRPOTrainer`] under the demo's metering and evaluation ([`MeteredLZEGRPOTrainer`] with LZE switched
off, so every batch goes through C-GRPO's own generation path): each prompt is sampled along `budget_grid` (2, 4, 8)
and stops at the first budget whose split-conformal prediction set over its answers is one answer; prompts that stop
early are padded to the group with masked rows. Thresholds are calibrated before the first step and every
`recalibrate_every` (50) steps on a held-out set, 64 prompts of the task's test partition on the training levels
(another seed than the evaluated test split), each sampled 8 times. Rollouts count what C-GRPO generates, its
calibration included, not its padding rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trl_cgrpo import CGRPOConfig, CGRPOTrainer

from lze_examples.demo import DemoConfig, MeteredLZEGRPOTrainer
from lze_examples.tasks import get_task
from lze_examples.tasks.shared import parse_completion
from lze_trl import LZEGRPOConfig


CALIBRATION_PROMPTS = 64


@dataclass
class CGRPOArmConfig(LZEGRPOConfig, CGRPOConfig):
    """The demo's [`LZEGRPOConfig`] fields and C-GRPO's (`budget_grid`, `recalibrate_every`, ...)."""


def extract_answer(text: str) -> str | None:
    """C-GRPO's answer extractor: the integer the task's reward reads."""
    answer = parse_completion(text)
    return None if answer is None else str(answer)


def calibration_set(config: DemoConfig) -> Any:
    """64 prompts of the task's test partition, on the training levels, drawn with another seed than the test split."""
    levels = {"levels": config.train_levels} if config.train_levels else {}
    return get_task(config.task).make_dataset(CALIBRATION_PROMPTS, config.data_seed + 1, split="test", **levels)


def cgrpo_arm(calibration: Any) -> type:
    """The arm's trainer class, calibrating on `calibration`."""

    class CGRPOArm(MeteredLZEGRPOTrainer, CGRPOTrainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, calibration_dataset=calibration, answer_extractor=extract_answer, **kwargs)
            self.lze_enabled = False  # C-GRPO's generation path for every batch

        def _base_generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            ids, logprobs = super()._base_generate(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
            if self.model.training:  # a budget increment or a calibration: rollouts really generated
                self.meter.rollout_prompt_tokens += sum(len(p) for p in prompt_ids)
                self.meter.rollout_completion_tokens += sum(len(c) for c in ids)
                self.meter.rollouts += len(ids)
            return ids, logprobs

        def _generate(self, prompts: list):
            result = super()._generate(prompts)
            if self.model.training:  # the demo's meter counted every row of the group, padding included: undo
                self.meter.rollout_prompt_tokens -= sum(len(ids) for ids in result[0])
                self.meter.rollout_completion_tokens -= sum(len(ids) for ids in result[1])
                self.meter.rollouts -= len(result[1])
            return result

    return CGRPOArm
