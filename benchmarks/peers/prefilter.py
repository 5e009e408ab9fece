"""`"prefilter"`: the paper's Pre-Filter peer, offline removal of prompts judged once with the initial policy.

The judging itself (rolling every prompt out through the trainer's generation and reward paths) is the trainer side,
[`~benchmarks.peers.judge.prepare`], called before `trainer.train()`; this selector only decides from the judged pass
rates.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from lze_trl.method.checks import check_setting
from lze_trl.method.selectors import GroupBatch, register_selector

from .base import PeerSelector


logger = logging.getLogger(__name__)

PREFILTER_MODES = ("remove_all_wrong", "remove_all_right", "remove_both")


@register_selector
class PrefilterSelector(PeerSelector):
    """
    `"prefilter"`: the paper's Pre-Filter peer. Before training, every prompt is rolled out `num_generations` times
    with the initial policy (the trainer's generation settings and correctness reward) and judged once:
    `mode="remove_all_wrong"` removes the prompts with pass rate 0, `"remove_all_right"` those with pass rate 1,
    `"remove_both"` both. Removed prompts are never rolled out; the others are trained on as in plain GRPO (every
    group kept). Unscorable prompts (NaN pass rate) are kept.

    The judging is done by [`~benchmarks.peers.judge.prepare`]`(trainer)` before `trainer.train()` (the benchmark
    harness's trainer calls it); training without it raises. The judged pass rates are cached in `cache_dir`
    (defaults to `<output_dir>/lze_prefilter`), keyed by a hash of a model fingerprint (config and sampled weights),
    the dataset's content, `num_generations`, the seed, the generation settings and the correctness reward, so the
    three modes and repeated runs judge once. They are also saved in checkpoints. Needs a map-style train dataset.

    Settings (`selector_kwargs`):
        mode (`str`, defaults to `"remove_both"`):
            Which judged prompts are removed: `"remove_all_wrong"`, `"remove_all_right"` or `"remove_both"`.
        cache_dir (`str`, *optional*):
            Folder caching the judged pass rates; share one folder across runs to judge once.

    Attributes:
        pass_rates (`np.ndarray` or `None`):
            The judged pass rate of every dataset row, `None` before judging.
    """

    name = "prefilter"
    plans_rollouts = True
    defaults = {"mode": "remove_both", "cache_dir": None}

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.mode = self.settings["mode"]
        self.pass_rates: np.ndarray | None = None
        self.from_cache = False

    @classmethod
    def check_settings(cls, settings: dict[str, Any]) -> None:
        mode = settings["mode"]
        check_setting(mode in PREFILTER_MODES, "selector_kwargs['mode']", mode, f"use one of {list(PREFILTER_MODES)}.")
        folder = settings["cache_dir"]
        check_setting(
            folder is None or isinstance(folder, str), "selector_kwargs['cache_dir']", folder, "use a folder path."
        )

    def removed(self) -> np.ndarray:
        """Boolean mask of the removed dataset rows (after judging)."""
        p = self.pass_rates
        all_wrong, all_right = p <= 0.0, p >= 1.0  # False for NaN
        if self.mode == "remove_all_wrong":
            return all_wrong
        if self.mode == "remove_all_right":
            return all_right
        return all_wrong | all_right

    def cache_path(self, key: str, output_dir: str) -> str:
        """File of the judged pass rates of the judgement keyed `key` (see [`~benchmarks.peers.judge.judge_key`])."""
        folder = self.settings["cache_dir"] or os.path.join(output_dir, "lze_prefilter")
        return os.path.join(folder, f"pass_rates-{key[:32]}.npz")

    def judged(self, pass_rates: np.ndarray, from_cache: bool = False) -> None:
        """
        Takes the judged pass rate of every dataset row. Raises a `ValueError` when fewer prompts than one generation
        batch remain.

        Args:
            pass_rates (`np.ndarray`):
                One pass rate per dataset row (NaN: unscorable).
            from_cache (`bool`, *optional*, defaults to `False`):
                Whether they were read from the cache (logged).
        """
        self.pass_rates = np.asarray(pass_rates, dtype=np.float64).copy()
        self.from_cache = from_cache
        removed = self.removed()
        num_prompts = len(self.pass_rates)
        remaining = num_prompts - int(removed.sum())
        needed = self.args.generation_batch_size // self.args.num_generations
        logger.info(
            f"prefilter ({self.mode}, {'cached' if from_cache else 'judged'}): "
            f"{int((self.pass_rates <= 0).sum())} all-wrong and {int((self.pass_rates >= 1).sum())} all-right of "
            f"{num_prompts} prompts; {int(removed.sum())} removed."
        )
        if remaining < needed:
            raise ValueError(
                f"selector_kwargs['mode']={self.mode!r} leaves {remaining} of {num_prompts} prompts, fewer than one "
                f"generation batch ({needed} prompts): use a milder mode, a larger train dataset or a smaller "
                "generation batch."
            )

    def plan_epoch(self, epoch: int, order: np.ndarray, ids: np.ndarray, state: Any) -> np.ndarray:
        if self.pass_rates is None:
            raise RuntimeError(
                "selector='prefilter' trains on the prompts judged before training, and none were: call "
                "`benchmarks.peers.prepare(trainer)` before `trainer.train()`."
            )
        return order[~self.removed()[order]]

    def select(self, batch: GroupBatch) -> np.ndarray:
        return np.ones(batch.num_groups)

    def metrics(self) -> dict[str, float]:
        return {"prefilter_removed_prompts": float(self.removed().sum()) if self.pass_rates is not None else 0.0}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {} if self.pass_rates is None else {"pass_rates": self.pass_rates.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        if "pass_rates" in state:
            self.pass_rates = np.asarray(state["pass_rates"], dtype=np.float64).copy()
