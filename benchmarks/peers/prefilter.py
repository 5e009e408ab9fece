"""`"prefilter"`: the paper's Pre-Filter peer, offline removal of prompts judged once with the initial policy.

The judging itself (rolling every prompt out through the trainer's generation and reward paths) lives in the trainer
layer ([`lze_trl.judge`]); this selector only decides from the judged pass rates and caches them.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from .base import GroupBatch, Selector, TrainContext, check_setting, register_selector


logger = logging.getLogger(__name__)

PREFILTER_MODES = ("remove_all_wrong", "remove_all_right", "remove_both")


@register_selector
class PrefilterSelector(Selector):
    """
    `"prefilter"`: the paper's Pre-Filter peer. Before training, every prompt is rolled out `num_generations` times
    with the initial policy (the trainer's generation settings and correctness reward) and judged once:
    `prefilter_mode="remove_all_wrong"` removes the prompts with pass rate 0, `"remove_all_right"` those with pass
    rate 1, `"remove_both"` both. Removed prompts are never rolled out; the others are trained on as in plain GRPO
    (every group kept). Unscorable prompts (NaN pass rate) are kept.

    The judged pass rates are cached in `prefilter_cache_dir` (defaults to `<output_dir>/lze_prefilter`), keyed by a
    hash of a model fingerprint (config and sampled weights), the dataset's content, `num_generations`, the seed,
    the generation settings and the correctness reward, so the three modes and repeated runs judge once. They are
    also saved in checkpoints: a resumed run does not judge again. Needs a map-style train dataset.

    Raises a `ValueError` before training when fewer prompts than a generation batch remain.

    Attributes:
        pass_rates (`np.ndarray` or `None`):
            The judged pass rate of every dataset row, `None` before judging.
    """

    name = "prefilter"
    plans_rollouts = True

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.pass_rates: np.ndarray | None = None
        self.from_cache = False

    @classmethod
    def check_args(cls, args: Any) -> None:
        check_setting(
            args.prefilter_mode in PREFILTER_MODES,
            "prefilter_mode",
            args.prefilter_mode,
            f"use one of {list(PREFILTER_MODES)}.",
        )

    def removed(self) -> np.ndarray:
        """Boolean mask of the removed dataset rows (after judging)."""
        p = self.pass_rates
        all_wrong, all_right = p <= 0.0, p >= 1.0  # False for NaN
        mode = self.args.prefilter_mode
        if mode == "remove_all_wrong":
            return all_wrong
        if mode == "remove_all_right":
            return all_right
        return all_wrong | all_right

    def cache_path(self, context: TrainContext) -> str:
        """File of the judged pass rates for this run's model, data and settings (see [`TrainContext.judge_key`])."""
        folder = self.args.prefilter_cache_dir or os.path.join(context.output_dir, "lze_prefilter")
        return os.path.join(folder, f"pass_rates-{context.judge_key()[:32]}.npz")

    def on_train_begin(self, context: TrainContext) -> None:
        if self.pass_rates is None:
            path = self.cache_path(context)
            pass_rates = None
            if os.path.isfile(path):
                with np.load(path) as data:
                    if len(data["pass_rates"]) == context.num_prompts:
                        pass_rates = data["pass_rates"].astype(np.float64)
            # Judge unless every process found the cache (a node with its own disk may not see it).
            self.from_cache = context.all_processes(pass_rates is not None)
            if not self.from_cache:
                pass_rates = context.judge_pass_rates()
                if context.is_main_process:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    tmp = f"{path}.{os.getpid()}.tmp.npz"
                    np.savez(tmp, pass_rates=pass_rates)
                    os.replace(tmp, path)
            self.pass_rates = pass_rates
        if len(self.pass_rates) != context.num_prompts:
            raise ValueError(
                f"The prefilter judged {len(self.pass_rates)} prompts but the train dataset has "
                f"{context.num_prompts}: resume with the dataset the checkpoint was trained on."
            )
        removed = self.removed()
        remaining = context.num_prompts - int(removed.sum())
        needed = self.args.generation_batch_size // self.args.num_generations
        logger.info(
            f"prefilter ({self.args.prefilter_mode}, {'cached' if self.from_cache else 'judged'}): "
            f"{int((self.pass_rates <= 0).sum())} all-wrong and {int((self.pass_rates >= 1).sum())} all-right of "
            f"{context.num_prompts} prompts; {int(removed.sum())} removed."
        )
        if remaining < needed:
            raise ValueError(
                f"prefilter_mode={self.args.prefilter_mode!r} leaves {remaining} of {context.num_prompts} prompts, "
                f"fewer than one generation batch ({needed} prompts): use a milder prefilter_mode, a larger train "
                "dataset or a smaller generation batch."
            )

    def plan_epoch(self, epoch: int, order: np.ndarray, ids: np.ndarray, state: Any) -> np.ndarray:
        return order if self.pass_rates is None else order[~self.removed()[order]]

    def select(self, batch: GroupBatch) -> np.ndarray:
        return np.ones(batch.num_groups)

    def metrics(self) -> dict[str, float]:
        return {"prefilter_removed_prompts": float(self.removed().sum()) if self.pass_rates is not None else 0.0}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {} if self.pass_rates is None else {"pass_rates": self.pass_rates.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        if "pass_rates" in state:
            self.pass_rates = np.asarray(state["pass_rates"], dtype=np.float64).copy()
