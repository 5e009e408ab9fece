"""The paper's peers and controls as selectors (Table 2 of the LZE paper), plus the skill card's soft variant.

- `"uniform"`: a random `selection_ratio` of the groups (the paper's uniform-40% control).
- `"uniform_live"`: LZE's quota drawn at random among the informative groups only (isolates LZE's ranking from its
  removal of dead groups).
- `"dapo"`: DAPO's dynamic filtering (drop groups whose rewards do not vary), optionally refilled with extra rollouts.
- `"reinforce_rej"`: Reinforce-Rej, online rejection of all-correct / all-wrong prompts, never rolled out again.
- `"prefilter"`: Pre-Filter, offline removal of all-wrong / all-right prompts judged once with the initial policy.
- `"softmax"`: every group weighted by `softmax(-|ema - 0.5| / tau)`, the skill card's soft allocation.

The ablations of the energy (Fig. 3a) are `selector="lze"` with `energy_terms` restricted.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import numpy as np
import torch
from transformers.utils import logging

from ..energy import PromptIndex
from ..selection import group_pass_rates, num_to_select
from .base import GroupBatch, Selector, register_selector


logger = logging.get_logger(__name__)

PREFILTER_MODES = ("remove_all_wrong", "remove_all_right", "remove_both")
PREFILTER_CACHE_VERSION = 1


@register_selector
class UniformSelector(Selector):
    """
    `"uniform"`: a uniformly random `selection_ratio` of the groups, the paper's "uniform sampling at the same 40%"
    control (the gain of LZE must come from which groups it keeps, not from how many).

    The quota is that of `"lze"` with every group counted as active, `k = max(int(n * selection_ratio),
    int(n * min_selection_ratio), 1)` of the `n` groups, drawn without replacement from all of them: dead groups
    (pass rate 0 or 1) are not excluded, as in the paper's control. The draw uses the batch's generator, so every
    process keeps the same groups.
    """

    name = "uniform"
    needs_pass_rates = False

    def select(self, batch: GroupBatch) -> np.ndarray:
        n = batch.num_groups
        k = num_to_select(n, n, self.args.selection_ratio, self.args.min_selection_ratio)
        weights = np.zeros(n)
        weights[batch.rng.choice(n, size=k, replace=False)] = 1.0
        return weights


@register_selector
class UniformLiveSelector(Selector):
    """
    `"uniform_live"`: LZE's quota drawn uniformly at random among the live groups only, the control that separates
    LZE's ranking from its removal of dead groups. A group is live when its correctness rewards vary (standard
    deviation `> dapo_std_epsilon`, DAPO's rule; for binary rewards, pass rate strictly between 0 and 1).

    It keeps exactly as many groups as `"lze"` would on the same batch, `k = min(max(int(n * selection_ratio),
    int(n * min_selection_ratio), 1), n_live)` of the `n` groups, so the two differ only in which live groups they
    keep: by energy, or at random. When fewer than `k` groups are live it keeps all of them, as LZE and DAPO do. The
    draw uses the batch's generator, so every process keeps the same groups.
    """

    name = "uniform_live"

    def select(self, batch: GroupBatch) -> np.ndarray:
        std = group_reward_std(batch.rewards)
        live = np.flatnonzero(np.nan_to_num(std, nan=0.0) > self.args.dapo_std_epsilon)
        n = batch.num_groups
        k = num_to_select(n, len(live), self.args.selection_ratio, self.args.min_selection_ratio)
        weights = np.zeros(n)
        if k:
            weights[batch.rng.choice(live, size=k, replace=False)] = 1.0
        return weights


def group_reward_std(rewards: np.ndarray) -> np.ndarray:
    """
    Population standard deviation of each group's scorable (non-NaN) rewards; NaN for a group with fewer than two.

    Args:
        rewards (`np.ndarray`):
            Rewards of shape `(num_groups, num_generations)`.

    Returns:
        `np.ndarray`: shape `(num_groups,)`.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    scorable = ~np.isnan(rewards)
    count = scorable.sum(axis=1)
    values = np.where(scorable, rewards, 0.0)
    mean = values.sum(axis=1) / np.maximum(count, 1)
    var = (np.where(scorable, values - mean[:, None], 0.0) ** 2).sum(axis=1) / np.maximum(count, 1)
    return np.where(count >= 2, np.sqrt(var), np.nan)


@register_selector
class DAPOSelector(Selector):
    """
    `"dapo"`: DAPO's dynamic filtering. A group whose correctness rewards do not vary (standard deviation
    `<= dapo_std_epsilon`, which also catches float noise of non-binary rewards) carries no GRPO signal and is dropped;
    so is a group with fewer than two scorable rollouts. Every other group is kept with weight 1.

    With `dapo_max_resample > 0`, the trainer oversamples as DAPO (and verl's `max_num_gen_batches`) does: while some
    process's share of the batch is not full of kept groups, it generates another round of rollouts for fresh prompts
    (drawn from the epoch's pool, deterministically from the seed and the generation index) and adds their kept
    groups, up to `dapo_max_resample` extra rounds; past that bound it trains on what it has. A kept group is only
    added where the processes holding its rows have room left, so no process ever updates on more rows than a plain
    generation batch. Every round's groups are scored (they update the per-prompt state) and appear in the selection
    log under the generation's index; `lze/refill_rounds` logs the rounds run. Without refill
    (`dapo_max_resample=0`, the default) the update simply has fewer groups.

    Unlike verl, refill prompts are drawn at random from the epoch's pool (minus the batch's own prompts) rather than
    taken from the next batches of the dataloader, so the epoch's order and length stay those of the sampler.
    """

    name = "dapo"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.refill_rounds = int(args.dapo_max_resample)

    def select(self, batch: GroupBatch) -> np.ndarray:
        std = group_reward_std(batch.rewards)
        return (np.nan_to_num(std, nan=0.0) > self.args.dapo_std_epsilon).astype(np.float64)


@register_selector
class ReinforceRejSelector(Selector):
    """
    `"reinforce_rej"`: Reinforce-Rej's online rejection. A group whose pass rate is 0 or 1 is dropped from the update
    the first time it is detected, and its prompt is rejected for good: it is never rolled out again (from the next
    epoch on, through [`~Selector.rollout_mask`]) and, should it still reach a batch, never updated on. Groups with
    no scorable rollout are dropped from the update but not rejected.

    The rejected prompts are saved in checkpoints. When fewer prompts than a generation batch remain, an epoch has no
    batch left and the Trainer stops training (with a warning).
    """

    name = "reinforce_rej"
    masks_rollouts = True

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.rejected = np.empty(0, dtype=np.int64)  # sorted prompt ids

    def select(self, batch: GroupBatch) -> np.ndarray:
        ids = np.asarray(batch.prompt_ids, dtype=np.int64)
        p = np.asarray(batch.pass_rates, dtype=np.float64)
        extreme = (p <= 0.0) | (p >= 1.0)  # False for NaN
        already = np.isin(ids, self.rejected)
        self.rejected = np.union1d(self.rejected, ids[extreme])
        return (np.isfinite(p) & ~extreme & ~already).astype(np.float64)

    def rollout_mask(self, num_prompts: int, epoch: int) -> np.ndarray | None:
        keep = np.ones(num_prompts, dtype=bool)
        keep[self.rejected[(self.rejected >= 0) & (self.rejected < num_prompts)]] = False
        return keep

    def metrics(self) -> dict[str, float]:
        return {"rejected_prompts": float(len(self.rejected))}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"rejected": self.rejected.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.rejected = np.asarray(state.get("rejected", np.empty(0)), dtype=np.int64).copy()


@register_selector
class SoftmaxSelector(Selector):
    """
    `"softmax"`: the skill card's soft variant. Each prompt's pass rate is tracked by the selector's own EMA (the
    card's update: the first observation sets it, then `ema <- (1 - a) * ema + a * p` with `a = softmax_ema_alpha`,
    0.1 by default), updated with the group's pass rate before scoring. The score `-|ema - 0.5|` peaks at 50%
    accuracy; each group's weight is `softmax(score / softmax_temperature)` over the batch, times the number of
    groups, so weights average 1 over the batch and the loss keeps its scale. Every group takes part in the update
    (only its advantages are scaled), except groups with no scorable rollout (weight 0).

    The card also allocates rollouts per prompt in proportion to these weights. TRL's GRPO generates a fixed
    `num_generations` rollouts per group, so with `softmax_allocate_rollouts=True` the budget is shared out in whole
    groups instead (see [`~SoftmaxSelector.rollout_counts`]): at each epoch's start a prompt gets as many groups as
    its weight earns, 0 skipping it for the epoch and 2 or more rolling it out that many times.
    """

    name = "softmax"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.index = PromptIndex()
        self.ema = np.empty(0, dtype=np.float64)
        self._last_weight_max = 0.0
        self._last_count_max = 0
        # Allocating rollouts changes which prompts an epoch rolls out: a map-style dataset is then required.
        self.masks_rollouts = bool(getattr(args, "softmax_allocate_rollouts", False))

    def _observe(self, ids: np.ndarray, p: np.ndarray) -> None:
        valid = np.isfinite(p)
        if not valid.any():
            return
        slots = self.index.add(ids[valid])
        if len(self.index) > len(self.ema):
            self.ema = np.concatenate([self.ema, np.full(len(self.index) - len(self.ema), np.nan)])
        uniq, inverse = np.unique(slots, return_inverse=True)
        mean_p = np.bincount(inverse, weights=p[valid]) / np.bincount(inverse)
        alpha = self.args.softmax_ema_alpha
        old = self.ema[uniq]
        self.ema[uniq] = np.where(np.isnan(old), mean_p, (1.0 - alpha) * old + alpha * mean_p)

    def select(self, batch: GroupBatch) -> np.ndarray:
        ids = np.asarray(batch.prompt_ids, dtype=np.int64)
        p = np.asarray(batch.pass_rates, dtype=np.float64)
        self._observe(ids, p)
        weights = np.zeros(batch.num_groups)
        valid = np.isfinite(p)
        if valid.any():
            score = -np.abs(self.ema[self.index.lookup(ids[valid])] - 0.5)
            z = score / self.args.softmax_temperature
            e = np.exp(z - z.max())
            weights[valid] = valid.sum() * e / e.sum()
        self._last_weight_max = float(weights.max()) if len(weights) else 0.0
        return weights

    def rollout_counts(self, num_prompts: int, epoch: int) -> np.ndarray | None:
        """
        Groups per prompt for the epoch when `softmax_allocate_rollouts` is set, else `None`.

        The `n` prompts seen so far share `n` groups: prompt `i` earns `n * w_i` with `w = softmax(-|ema - 0.5| /
        tau)` over them, rounded down, and the groups left go to the largest remainders (ties to the lower index).
        Prompts never seen get one group each, so the epoch keeps its length.
        """
        if not self.masks_rollouts:
            return None
        counts = np.ones(num_prompts, dtype=np.int64)
        slots = self.index.lookup(np.arange(num_prompts))
        seen = np.flatnonzero(slots >= 0)
        if len(seen) == 0:
            self._last_count_max = 1
            return counts
        z = -np.abs(self.ema[slots[seen]] - 0.5) / self.args.softmax_temperature
        share = len(seen) * np.exp(z - z.max())
        share *= len(seen) / share.sum()
        whole = np.floor(share).astype(np.int64)
        left = len(seen) - int(whole.sum())
        whole[np.argsort(-(share - whole), kind="stable")[:left]] += 1
        counts[seen] = whole
        self._last_count_max = int(counts.max())
        return counts

    def metrics(self) -> dict[str, float]:
        values = {"softmax_weight_max": self._last_weight_max}
        if self.masks_rollouts:
            values["softmax_groups_max"] = float(self._last_count_max)
        return values

    def state_dict(self) -> dict[str, np.ndarray]:
        return {**{f"index.{k}": v for k, v in self.index.state_dict().items()}, "ema": self.ema.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        if "ema" not in state:
            return
        self.index.load_state_dict({k[len("index.") :]: v for k, v in state.items() if k.startswith("index.")})
        self.ema = np.asarray(state["ema"], dtype=np.float64).copy()


# ------------------------------------------------------------------------------------------------------ prefilter
def model_fingerprint(model: torch.nn.Module) -> str:
    """
    A cheap fingerprint of a model: its config and, for every tensor of its state dict, name, shape, dtype and a
    strided sample of up to 4096 values (exact bytes, no reduction, so every process and device agrees).
    """
    h = hashlib.sha256()
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "to_json_string"):
        h.update(config.to_json_string().encode())
    for name, tensor in sorted(model.state_dict().items()):
        h.update(f"{name}|{tuple(tensor.shape)}|{tensor.dtype}".encode())
        if tensor.is_meta or tensor.numel() == 0:
            continue
        flat = tensor.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // 4096)][:4096]
        h.update(sample.to(device="cpu", dtype=torch.float32).numpy().tobytes())
    return h.hexdigest()


def dataset_fingerprint(dataset: Any) -> str:
    """A content hash of every row and column of a map-style dataset, in order."""
    h = hashlib.sha256(str(len(dataset)).encode())
    for batch in dataset.with_format(None).iter(batch_size=4096):
        h.update(json.dumps(batch, sort_keys=True, default=str).encode())
    return h.hexdigest()


def prefilter_cache_key(trainer: Any) -> str:
    """Key of the judged pass rates: model, dataset, group size, seed and everything else they depend on."""
    args = trainer.args
    tokenizer = getattr(trainer, "processing_class", None)
    parts = {
        "version": PREFILTER_CACHE_VERSION,
        "model": model_fingerprint(trainer.accelerator.unwrap_model(trainer.model)),
        "dataset": dataset_fingerprint(trainer.train_dataset),
        "num_generations": trainer.num_generations,
        "seed": args.seed,
        "generation": [
            args.temperature,
            args.top_p,
            args.top_k,
            args.min_p,
            args.repetition_penalty,
            args.max_completion_length,
            args.generation_kwargs,
            args.chat_template_kwargs,
        ],
        "tokenizer": [
            type(tokenizer).__name__,
            getattr(tokenizer, "chat_template", None),
            len(tokenizer) if hasattr(tokenizer, "__len__") else None,
        ],
        "pass_threshold": args.pass_threshold,
        "correctness_reward": list(trainer.reward_func_names)[trainer._correctness_index],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def judge_pass_rates(trainer: Any) -> np.ndarray:
    """
    Rolls out every prompt of the train dataset `num_generations` times with the trainer's current policy and
    generation settings, and returns each prompt's pass rate under the correctness reward (NaN if unscorable).

    Prompts are dealt to the processes in equal chunks (the last one padded) through the trainer's own generation
    and reward paths (`_generate`, `_calculate_rewards`), whose gather returns every process's rewards: all processes
    end with the same array. Sampling runs under a forked torch RNG seeded with `args.seed`, and the metrics TRL
    records while generating are left out of the training logs.
    """
    args, dataset, accelerator = trainer.args, trainer.train_dataset, trainer.accelerator
    G, P, rank = trainer.num_generations, accelerator.num_processes, accelerator.process_index
    per_process = max(1, (args.per_device_train_batch_size * args.steps_per_generation) // G)
    num_prompts = len(dataset)
    pass_rates = np.full(num_prompts, np.nan)

    model = trainer.model
    was_training = model.training
    saved_metrics = {k: list(v) for k, v in trainer._metrics["train"].items()}
    devices = [accelerator.device] if accelerator.device.type == "cuda" else []
    model.train()  # TRL's generation reads train/eval mode (and the group size) from the model
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(args.seed)
            for start in range(0, num_prompts, P * per_process):
                chunk = np.arange(start, start + P * per_process) % num_prompts
                local = chunk[rank * per_process : (rank + 1) * per_process].tolist()
                columns = dataset[local]
                rows = [{k: v[i] for k, v in columns.items()} for i in range(len(local))]
                inputs = [dict(row) for row in rows for _ in range(G)]
                prompts = [x["prompt"] for x in inputs]
                generated = trainer._generate(prompts)
                completion_ids, completions = generated[1], generated[3]
                rewards = trainer._calculate_rewards(inputs, prompts, completions, completion_ids)
                rates = group_pass_rates(rewards[:, trainer._correctness_index], G, args.pass_threshold)
                real = min(num_prompts - start, P * per_process)
                pass_rates[start : start + real] = rates[:real]
    finally:
        model.train(was_training)
        trainer._metrics["train"].clear()
        trainer._metrics["train"].update(saved_metrics)
        for pending in ("_pending_extra_logs", "_pending_metrics"):
            if hasattr(trainer, pending):
                getattr(trainer, pending).clear()
    return pass_rates


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
    masks_rollouts = True

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.pass_rates: np.ndarray | None = None
        self.from_cache = False

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

    def cache_path(self, trainer: Any) -> str:
        folder = self.args.prefilter_cache_dir or os.path.join(self.args.output_dir, "lze_prefilter")
        return os.path.join(folder, f"pass_rates-{prefilter_cache_key(trainer)[:32]}.npz")

    def on_train_begin(self, trainer: Any) -> None:
        dataset = trainer.train_dataset
        if self.pass_rates is None:
            path = self.cache_path(trainer)
            pass_rates = None
            if os.path.isfile(path):
                with np.load(path) as data:
                    if len(data["pass_rates"]) == len(dataset):
                        pass_rates = data["pass_rates"].astype(np.float64)
            # Judge unless every process found the cache (a node with its own disk may not see it).
            found = torch.tensor([float(pass_rates is not None)], device=trainer.accelerator.device)
            self.from_cache = bool(trainer.accelerator.gather(found).min().item() > 0)
            if not self.from_cache:
                pass_rates = judge_pass_rates(trainer)
                if trainer.accelerator.is_main_process:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    tmp = f"{path}.{os.getpid()}.tmp.npz"
                    np.savez(tmp, pass_rates=pass_rates)
                    os.replace(tmp, path)
            self.pass_rates = pass_rates
        if len(self.pass_rates) != len(dataset):
            raise ValueError(
                f"The prefilter judged {len(self.pass_rates)} prompts but the train dataset has {len(dataset)}: "
                "resume with the dataset the checkpoint was trained on."
            )
        removed = self.removed()
        remaining = len(dataset) - int(removed.sum())
        needed = self.args.generation_batch_size // self.args.num_generations
        logger.info(
            f"prefilter ({self.args.prefilter_mode}, {'cached' if self.from_cache else 'judged'}): "
            f"{int((self.pass_rates <= 0).sum())} all-wrong and {int((self.pass_rates >= 1).sum())} all-right of "
            f"{len(dataset)} prompts; {int(removed.sum())} removed."
        )
        if remaining < needed:
            raise ValueError(
                f"prefilter_mode={self.args.prefilter_mode!r} leaves {remaining} of {len(dataset)} prompts, fewer "
                f"than one generation batch ({needed} prompts): use a milder prefilter_mode, a larger train dataset "
                "or a smaller generation batch."
            )

    def rollout_mask(self, num_prompts: int, epoch: int) -> np.ndarray | None:
        if self.pass_rates is None:
            return None
        return ~self.removed()

    def select(self, batch: GroupBatch) -> np.ndarray:
        return np.ones(batch.num_groups)

    def metrics(self) -> dict[str, float]:
        return {"prefilter_removed_prompts": float(self.removed().sum()) if self.pass_rates is not None else 0.0}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {} if self.pass_rates is None else {"pass_rates": self.pass_rates.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        if "pass_rates" in state:
            self.pass_rates = np.asarray(state["pass_rates"], dtype=np.float64).copy()
