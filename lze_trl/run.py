"""[`LZERun`]: the LZE state of one training run, and the decisions taken from it.

One object holds everything LZE keeps across steps: the per-prompt table ([`PromptState`]), the selector, the prune
pool, the rollout-side planner, the selection log and the counters. The trainer hands it the scored rollouts of each
generation batch and gets back the weight of every group; the train sampler asks it for each epoch's prompts. It is
saved and restored as one `state_dict`. Plain numpy, no torch or TRL import.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .energy import compute_energy
from .guards import DeadRunDetector, LZEWarning
from .prompt_state import PromptState
from .pruning import PromptPruner
from .selection import group_pass_rates, live_groups, spread_energies
from .selection_log import SelectionLog
from .selectors import GroupBatch, get_selector


class LZERun:
    """
    The LZE state of a run: per-prompt table, selector, prune pool, rollout-side planner, selection log, counters.

    Every method is a deterministic function of the state and of what it is given, so every process, holding the
    same state and the same gathered rewards, takes the same decisions.

    Args:
        args ([`LZEGRPOConfig`]):
            The run's configuration.
        num_generations (`int`):
            Rollouts per prompt group.
        row_ids (`np.ndarray` or `None`):
            The prompt id of every row of a map-style train dataset ([`~lze_trl.prompt_ids.PromptIds.row_ids`]);
            `None` for an iterable one (nothing is planned per epoch then).
        dataset (`datasets.Dataset`, *optional*):
            The map-style train dataset (read for `rollout_filter_prior_column`).
        correctness_name (`str`, *optional*, defaults to `"correctness"`):
            Name of the correctness reward function, for the warning of a run that cannot learn.
        warn (`Callable[[str], None]`, *optional*):
            How a warning is given (the trainer warns on the main process only). Defaults to `warnings.warn`.
    """

    def __init__(
        self,
        args: Any,
        num_generations: int,
        row_ids: np.ndarray | None,
        dataset: Any = None,
        correctness_name: str = "correctness",
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.args = args
        self.num_generations = num_generations
        self.row_ids = row_ids
        self.state = PromptState(args.energy_ema_decay)
        self.selector = get_selector(args.selector)(args)
        self.pruner = None
        if args.prune_solved and row_ids is not None:
            self.pruner = PromptPruner(args.prune_solved_after, args.prune_replay_fraction, args.seed)
        self.rollout_filter = None
        self.plan_batch = None  # the sampler's per-batch planning, when the rollout filter decides per batch
        if args.rollout_filter != "none" and row_ids is not None:
            from .experimental.rollout_filter import build_rollout_filter

            self.rollout_filter = build_rollout_filter(args, dataset, row_ids, num_generations, self.state)
            if args.rollout_filter_granularity == "batch":
                self.plan_batch = self._plan_batch
        self.replay = None
        if args.fresh_fraction < 1:
            from .experimental.replay import ReplayBuffer, ReplayGuard

            self.replay = ReplayBuffer(args.replay_buffer_size, args.replay_max_staleness, args.replay_max_uses)
            self.replay_guard = ReplayGuard(args.replay_max_staleness)
        self.selection_log = SelectionLog(args.selection_log_max_rows)
        self.dead_run = DeadRunDetector(args.pass_threshold, correctness_name)
        self.warn = warn or (lambda message: warnings.warn(message, LZEWarning, stacklevel=3))
        self.generation = 0  # generation batches recorded so far: seeds each selection's noise
        self.epoch: int | None = None  # the sampler epoch of the Trainer's micro-steps counted below
        self.batches_in_epoch = 0  # Trainer micro-steps taken in that epoch (what a resumed sampler skips)
        self.pending_rewards: Any = None  # gathered rewards of the generation in progress (TRL's reward hook sets it)
        self.resume: dict[str, Any] | None = None  # a checkpoint being resumed, until its first training step

    @property
    def plans_rollouts(self) -> bool:
        """Whether an epoch may roll out fewer (or other) prompts than the dataset holds."""
        return self.pruner is not None or self.selector.plans_rollouts or self.rollout_filter is not None

    # ----------------------------------------------------------------------------------------------- scoring
    def score(
        self, prompt_ids: np.ndarray, correctness: np.ndarray, totals: np.ndarray, refill_round: int = 0
    ) -> GroupBatch:
        """
        Scores one round of groups and updates the per-prompt table with it (once per group).

        Args:
            prompt_ids (`np.ndarray`):
                Id of each group's prompt, all processes' groups in order.
            correctness (`np.ndarray`):
                Correctness reward of each rollout, shape `(num_groups, num_generations)`, NaN where unscorable.
            totals (`np.ndarray`):
                Total (weighted) reward of each rollout, same shape: what GRPO's advantages see.
            refill_round (`int`, *optional*, defaults to `0`):
                0 for the generation batch itself, `r` for its `r`-th refill round (seeds the selection apart).

        Returns:
            [`GroupBatch`]: the groups with their pass rates, liveness and energies (scored before the table
            absorbs this observation), and the EMA after it.
        """
        args = self.args
        ids = np.asarray(prompt_ids, dtype=np.int64)
        pass_rates = group_pass_rates(correctness, self.num_generations, args.pass_threshold)
        live = live_groups(pass_rates, correctness, totals)
        before = self.state.get(ids)
        # A prompt seen for the first time starts at its pass rate (its first scorable group's, if it repeats)
        valid = np.isfinite(pass_rates)
        first = np.full(len(ids), np.nan)
        _, where_first, inverse = np.unique(ids[valid], return_index=True, return_inverse=True)
        first[valid] = pass_rates[valid][where_first][inverse]
        initial = np.where(np.isnan(before["initial_pass_rate"]), first, before["initial_pass_rate"])
        ema = np.where(np.isnan(before["ema_pass_rate"]), first, before["ema_pass_rate"])
        energies = compute_energy(
            np.nan_to_num(pass_rates),
            np.nan_to_num(initial),
            np.nan_to_num(ema),
            d_init_min=args.energy_d_init_min,
            momentum_weight=args.energy_momentum_weight,
            momentum_mode=args.energy_momentum_mode,
            terms=args.energy_terms,
        )
        energies = np.where(valid, energies, 0.0)
        energies = spread_energies(energies, pass_rates, live, totals)
        if self.rollout_filter is not None:
            self.rollout_filter.observe(ids, pass_rates, live)
        self.state.observe(ids, pass_rates, self.generation)
        message = self.dead_run.observe(pass_rates, correctness)
        if message is not None:
            self.warn(message)
        seed = [args.seed, self.generation] + ([refill_round] if refill_round > 0 else [])
        return GroupBatch(
            prompt_ids=ids,
            pass_rates=pass_rates,
            rewards=np.asarray(correctness, dtype=np.float64).reshape(len(ids), -1),
            energies=energies,
            live=live,
            ema_pass_rates=self.state.get(ids)["ema_pass_rate"],
            rng=np.random.default_rng(seed),
        )

    def select(self, batch: GroupBatch) -> np.ndarray:
        """The selector's weight of each group of `batch` (0 removes the group from the update)."""
        return np.asarray(self.selector.select(batch), dtype=np.float64)

    def record(self, batch: GroupBatch, weights: np.ndarray, step: int) -> dict[str, float]:
        """
        Closes a generation batch (all its rounds in `batch`): counts the selections, appends to the selection log,
        advances the generation counter, and returns the batch's metrics (`lze/...` keys).
        """
        selected = weights > 0
        self.state.record(batch.prompt_ids, batch.energies, selected)
        self.selection_log.append(
            step, self.generation, batch.prompt_ids, batch.pass_rates, batch.energies, weights, batch.live
        )
        self.generation += 1
        scorable = np.isfinite(batch.pass_rates)
        metrics = {
            "lze/pass_rate_mean": float(np.nanmean(batch.pass_rates)) if scorable.any() else 0.0,
            "lze/energy_mean": float(batch.energies.mean()),
            "lze/dead_frac": float((scorable & ~batch.live).mean()),
            "lze/selected_frac": float(selected.mean()),
            "lze/update_rows": int(selected.sum()) * self.num_generations,
        }
        metrics.update({f"lze/{k}": v for k, v in self.selector.metrics().items()})
        if self.pruner is not None:
            metrics["lze/pruned_prompts"] = self.pruner.num_pruned(self.state)
            metrics["lze/replayed_prompts"] = self.pruner.num_replayed
        if self.rollout_filter is not None:
            metrics.update({f"lze/{k}": v for k, v in self.rollout_filter.metrics().items()})
        return metrics

    # ----------------------------------------------------------------------------------------------- planning
    def plan_epoch(self, epoch: int, order: np.ndarray) -> np.ndarray:
        """
        The rows an epoch rolls out, in order (one entry per group), from the epoch's permutation `order`: forward
        pruning, then the selector's plan, then the rollout-side planner, each over what the previous one left.
        """
        order = np.asarray(order, dtype=np.int64)
        if self.pruner is not None:
            order = self.pruner.plan_epoch(epoch, order, self.row_ids[order], self.state)
        if self.selector.plans_rollouts:
            order = self.selector.plan_epoch(epoch, order, self.row_ids[order], self.state)
        if self.rollout_filter is not None and self.plan_batch is None:
            order = self.rollout_filter.plan_epoch(epoch, order, self.exempt())
        return order

    def _plan_batch(self, epoch: int, batch: int, order: list[int], cursor: int, size: int):
        """The next generation batch, decided by the rollout filter when the data loader asks for it."""
        return self.rollout_filter.plan_batch(epoch, batch, order, cursor, size, exempt=self.exempt())

    def exempt(self) -> np.ndarray | None:
        """Prompt ids the rollout-side planner must not skip: the epoch's pruning replays."""
        return self.pruner.replayed_ids if self.pruner is not None else None

    def prompt_table(self, dataset: Any = None) -> Any:
        """
        The per-prompt table as a `pandas.DataFrame`, one row per prompt observed so far.

        Columns: `prompt_id` and the table's columns ([`~lze_trl.prompt_state.COLUMNS`]); with pruning, `pruned`; with
        a map-style `dataset`, its scalar columns (`prompt` text, `difficulty`, ...) of each prompt's row (`prompt_id`
        is the row index).
        """
        import pandas as pd

        table = pd.DataFrame(self.state.table())
        ids = table["prompt_id"].to_numpy()
        if self.pruner is not None:
            table["pruned"] = self.pruner.pruned(ids, self.state)
        if dataset is not None:
            rows = dataset.select(ids.tolist())
            for name in rows.column_names:
                values = rows[name]
                if name == "prompt" and values and not isinstance(values[0], str):
                    values = [m[-1]["content"] if m else "" for m in values]  # last message of a conversation
                if not values or isinstance(values[0], (str, int, float, bool)):
                    table[name] = values
        return table

    # ----------------------------------------------------------------------------------------------- state
    def count_micro_step(self, epoch: int | None) -> None:
        """Counts one Trainer micro-step of the sampler's `epoch` (the position a resumed run restarts from)."""
        if epoch != self.epoch:
            self.epoch, self.batches_in_epoch = epoch, 0
        self.batches_in_epoch += 1

    def position(self) -> dict[str, int]:
        """The sampler epoch and the micro-steps taken in it."""
        return {"epoch": self.epoch if self.epoch is not None else 0, "batches_in_epoch": self.batches_in_epoch}

    def set_position(self, epoch: int, batches_in_epoch: int) -> None:
        self.epoch, self.batches_in_epoch = epoch, batches_in_epoch

    def state_dict(self) -> dict[str, np.ndarray]:
        """Every array of the run's LZE state (the selection log is saved beside it, as a table)."""
        arrays = {
            f"{name}.{key}": value for name, part in self._parts().items() for key, value in part.state_dict().items()
        }
        arrays["run.generation"] = np.asarray(self.generation)
        return arrays

    def load_state_dict(self, arrays: dict[str, np.ndarray]) -> None:
        """Restores a state written by [`~LZERun.state_dict`]."""
        for name, part in self._parts().items():
            part.load_state_dict({k[len(name) + 1 :]: v for k, v in arrays.items() if k.startswith(f"{name}.")})
        self.generation = int(arrays["run.generation"])

    def _parts(self) -> dict[str, Any]:
        parts = {
            "prompts": self.state,
            "selector": self.selector,
            "pruner": self.pruner,
            "planner": self.rollout_filter,
            "replay": self.replay,
        }
        return {name: part for name, part in parts.items() if part is not None}

    # ----------------------------------------------------------------------------------------------- replay
    def fresh_per_process(self, candidates: int) -> int:
        """Groups a process generates of its `candidates` (`fresh_fraction` of them, at least one)."""
        return max(1, round(self.args.fresh_fraction * candidates))
