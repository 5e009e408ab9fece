"""[`LZERun`]: the LZE state of one training run, and the decisions taken from it. Plain numpy, no TRL import."""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .energy import compute_energy
from .errors import LZEWarning
from .guards import EmptyUpdateGuard, LearningZoneGuard, UnscorableGuard
from .prompt_state import PromptState
from .pruning import SIDES, PromptPruner, dead_shares
from .selection import group_pass_rates, live_groups, spread_energies
from .selection_log import SelectionLog
from .selectors import GroupBatch, get_selector
from .settings import prunes
from .shadow import Decision, Shadow


if TYPE_CHECKING:
    from .settings import LZESettings


@dataclass
class DataPosition:
    """
    Where training stands in the data, saved with the LZE state: the sampler `epoch`, its dataloader batches trained
    so far (`batches_in_epoch`, what a resumed sampler skips), TRL's micro-step counter (`micro_steps`, which paces
    generation), the epoch's `plan` (the dataset indices it rolls out, once planned; not re-derivable: the planner's
    state moves on), the groups not rolled out so far (`skipped_groups`: those earlier epochs' plans left out, and in
    skip mode those the steps skipped), and in skip mode (`prune_refill=False`) the prompt keys the epoch skips
    (`skipping`, sorted: its plan holds every prompt).
    """

    epoch: int = 0
    batches_in_epoch: int = 0
    micro_steps: int = 0
    plan: np.ndarray | None = None
    skipped_groups: int = 0
    skipping: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def groups_skipped(self, num_samples: int) -> int:
        """Groups not rolled out so far: the dataset indices earlier epochs and the current one's plan left out."""
        return self.skipped_groups + (num_samples - len(self.plan) if self.plan is not None else 0)

    def state_dict(self) -> dict[str, np.ndarray]:
        plan = np.empty(0, dtype=np.int64) if self.plan is None else self.plan
        counters = [self.epoch, self.batches_in_epoch, self.micro_steps, self.skipped_groups, self.plan is not None]
        return {
            "plan": np.asarray(plan, dtype=np.int64),
            "counters": np.asarray(counters, dtype=np.int64),
            "skipping": np.asarray(self.skipping, dtype=np.int64),
        }

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        epoch, batches, micro_steps, skipped, has_plan = (int(v) for v in state["counters"])
        self.epoch, self.batches_in_epoch, self.micro_steps, self.skipped_groups = epoch, batches, micro_steps, skipped
        self.plan = np.asarray(state["plan"], dtype=np.int64) if has_plan else None
        self.skipping = np.asarray(state["skipping"], dtype=np.int64)


def make_pruner(args: LZESettings) -> PromptPruner:
    """The run's [`~lze_trl.method.pruning.PromptPruner`], from its `prune_*` settings."""
    return PromptPruner(
        args.prune_solved_after if args.prune_solved else None,
        args.prune_explore_fraction,
        args.seed,
        unsolved_after=args.prune_unsolved_after if args.prune_unsolved else None,
        exploration=args.prune_exploration,
        target_dead_frac=args.prune_target_dead_frac,
    )


class LZERun:
    """
    The LZE state of a run (per-prompt table, selector, prune pool, selection log, position in the data, guards and
    counters, saved as one `state_dict`) and the decisions taken from it. Every method is a deterministic function of
    the state and of what it is given, so every process, given the same gathered rewards, decides the same.

    Args:
        args ([`LZEGRPOConfig`]), num_generations (`int`):
            The run's configuration, and its rollouts per prompt group.
        dataset_keys (`np.ndarray` or `None`):
            The prompt key of every row of a map-style train dataset; `None` for an iterable one (no epoch planning).
        reward_names (`list[str]`, *optional*), correctness_index (`int`, *optional*, defaults to `0`):
            The reward functions' names, and the index of the correctness one (for the guards' warnings).
        warn (`Callable[[str], None]`, *optional*):
            How a warning is given (the trainer warns on the main process only); `warnings.warn` by default.
    """

    def __init__(
        self,
        args: LZESettings,
        num_generations: int,
        dataset_keys: np.ndarray | None,
        reward_names: list[str] | None = None,
        correctness_index: int = 0,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.args = args
        self.num_generations = num_generations
        self.dataset_keys = dataset_keys
        self.correctness_index = correctness_index
        self.prompts = PromptState(args.energy_ema_decay)
        self.selector = get_selector(args.selector)(args)
        self.pruner = make_pruner(args) if prunes(args) and dataset_keys is not None else None
        # shadow mode: the selector and both sides' pruning rule decide only the `lze/shadow_*` metrics
        self.shadow = Shadow(args, num_generations) if getattr(args, "shadow", False) else None
        self.selection_log = SelectionLog(args.selection_log_max_rows)
        reward_names = reward_names or ["correctness"]
        self.reward_names = reward_names
        self.learning_zone_guard = LearningZoneGuard(args.pass_threshold, reward_names[correctness_index])
        self.warn = warn or (lambda message: warnings.warn(message, LZEWarning, stacklevel=3))
        # A run whose rewards score nothing warns and trains on, as GRPOTrainer does; one that asked to stop
        # (max_unscorable_batches) stops where LZE would select on nothing, never with selector="none".
        limit = args.max_unscorable_batches if args.selector != "none" else 0
        self.unscorable_guard = UnscorableGuard(reward_names, limit, self.warn)
        self.position = DataPosition()
        self.empty_update_guard = EmptyUpdateGuard(self.warn)
        self.batches_recorded = 0
        self.energy_kwargs = {  # the energy's settings, as [`~lze_trl.method.energy.compute_energy`] takes them
            "d_init_min": args.energy_d_init_min,
            "momentum_weight": args.energy_momentum_weight,
            "momentum_mode": args.energy_momentum_mode,
            "terms": args.energy_terms,
        }

    @property
    def plans_rollouts(self) -> bool:
        """Whether an epoch may roll out fewer (or other) prompts than the dataset holds."""
        return self.pruner is not None or self.selector.plans_rollouts

    @property
    def decides_training(self) -> bool:
        """Whether the state decides what is trained (a selector other than `"none"`, or planned epochs): a resume
        that cannot restore it is refused ([`~lze_trl.method.checkpoint.load_or_start_fresh`])."""
        return (self.args.selector != "none" and self.shadow is None) or self.plans_rollouts

    # ----------------------------------------------------------------------------------------------- scoring
    def score(self, prompt_keys: np.ndarray, correctness: np.ndarray, totals: np.ndarray) -> GroupBatch:
        """
        Scores the groups of a generation batch (all processes', in order: each one's prompt key, the correctness and
        total reward of each of its rollouts, NaN where unscorable) into a [`GroupBatch`] (energies before the
        per-prompt table absorbs them, EMA after) and updates the table, once per group.
        """
        args = self.args
        keys = np.asarray(prompt_keys, dtype=np.int64)
        correctness = np.asarray(correctness, dtype=np.float64).reshape(len(keys), -1)
        pass_rates = group_pass_rates(correctness, correctness.shape[1], args.pass_threshold)
        live = live_groups(pass_rates, correctness, totals)
        before = self.prompts.get(keys)
        if self.shadow is not None:  # what forward pruning would have predicted of these groups before generation
            self.shadow.predict(keys, self.prompts)
        # A prompt seen for the first time starts at its pass rate (its first scorable group's, if it repeats)
        valid = np.isfinite(pass_rates)
        first = np.full(len(keys), np.nan)
        _, where_first, inverse = np.unique(keys[valid], return_index=True, return_inverse=True)
        first[valid] = pass_rates[valid][where_first][inverse]
        initial = np.where(np.isnan(before["initial_pass_rate"]), first, before["initial_pass_rate"])
        ema = np.where(np.isnan(before["ema_pass_rate"]), first, before["ema_pass_rate"])
        energies = compute_energy(
            np.nan_to_num(pass_rates), np.nan_to_num(initial), np.nan_to_num(ema), **self.energy_kwargs
        )
        energies = np.where(valid, energies, 0.0)
        batch = GroupBatch(
            prompt_keys=keys,
            pass_rates=pass_rates,
            rewards=correctness,
            energies=spread_energies(energies, pass_rates, live, totals),
            live=live,
            ema_pass_rates=ema,
            rng=np.random.default_rng([args.seed, self.batches_recorded]),
        )
        self.prompts.record_pass_rates(keys, pass_rates, self.batches_recorded)
        batch.ema_pass_rates = self.prompts.get(keys)["ema_pass_rate"]
        message = self.learning_zone_guard.check(pass_rates, correctness)
        if message is not None:
            self.warn(message)
        return batch

    def select(self, batch: GroupBatch, skipped: int = 0) -> np.ndarray:
        """The selector's weight of each group of `batch` (0 removes the group from the update); `skipped` groups of
        its prompts not generated (skip mode) take part as dead groups, so that a quota stays a share of the
        prompts ([`~lze_trl.method.selectors.base.GroupBatch.with_dead`])."""
        weights = self.selector.select(batch.with_dead(skipped))
        return np.asarray(weights, dtype=np.float64)[: len(batch.prompt_keys)]

    def decide(
        self,
        batch: GroupBatch,
        global_step: int,
        metrics: dict[str, float] | None = None,
        skipped: int = 0,
    ) -> Decision:
        """
        The decision on a scored generation `batch`: the selector's weight of each group (its `skipped` groups, not
        generated, counted as dead: [`~LZERun.select`]); in shadow mode every group's weight 1 and what the selector
        would have kept ([`~lze_trl.method.shadow.Shadow`]); then the batch recorded ([`~LZERun.record`]).

        Returns:
            [`~lze_trl.method.shadow.Decision`]: the weights, the batch's `lze/` metrics (the given `metrics`, then
            the shadow's, then the record's) and, in shadow mode, the groups the selector would have kept.
        """
        weights = self.select(batch, skipped)
        out = dict(metrics or {})
        shadow_kept = None
        if self.shadow is not None:  # the update takes every group, as GRPOTrainer's
            weights, shadow_metrics, shadow_kept = self.shadow.decide(batch, weights)
            out.update(shadow_metrics)
        out.update(self.record(batch, weights, global_step, skipped))
        return Decision(weights, out, shadow_kept)

    def decide_batch(
        self,
        prompt_keys: np.ndarray,
        rewards: np.ndarray,
        totals: np.ndarray,
        global_step: int,
        metrics: dict[str, float] | None = None,
        skipped: int = 0,
        versions: np.ndarray | None = None,
    ) -> Decision:
        """
        A generation batch from its rollouts to its decision, one path for both trainers: its groups (every
        process's, in draw order: `prompt_keys`, each rollout's `rewards` shaped `(groups, num_generations, reward
        functions)` and `totals` shaped `(groups, num_generations)`, NaN where unscored) scored into the per-prompt
        state oldest policy `versions` first (draw order within a version; one version by default: the synchronous
        trainer's), then decided ([`~LZERun.decide`]).

        Returns:
            [`~lze_trl.method.shadow.Decision`], in draw order.
        """
        keys = np.asarray(prompt_keys, dtype=np.int64)
        versions = np.zeros(len(keys), dtype=np.int64) if versions is None else np.asarray(versions)
        order = np.argsort(versions, kind="stable")
        parts = []
        for _, members in itertools.groupby(order, key=lambda i: versions[i]):
            m = np.fromiter(members, dtype=np.int64)
            parts.append(self.score(keys[m], rewards[m, :, self.correctness_index], totals[m]))
        decision = self.decide(GroupBatch.concatenate(parts), global_step, metrics, skipped)
        weights = np.empty(len(keys))
        weights[order] = decision.weights
        shadow_kept = None
        if decision.shadow_kept is not None:  # what the selector would have kept, in draw order too
            shadow_kept = np.empty(len(keys), dtype=bool)
            shadow_kept[order] = decision.shadow_kept
        return Decision(weights, decision.metrics, shadow_kept)

    def close(self, metrics: dict[str, float], update: tuple[int, int], grpo_update: tuple[int, int]) -> None:
        """Closes a decided batch: its update's rows (the kept groups' rollouts, every process's) and loss tokens
        (`update`), and those GRPO's update would have taken (`grpo_update`: every generated group's) into `metrics`,
        and the empty-update guard ([`~lze_trl.method.guards.EmptyUpdateGuard`]) on the tokens."""
        metrics["lze/update_rows"], metrics["lze/update_tokens"] = (float(v) for v in update)
        metrics["lze/grpo_update_rows"], metrics["lze/grpo_update_tokens"] = (float(v) for v in grpo_update)
        self.empty_update_guard.check(update[1], "no group was selected")

    def record(self, batch: GroupBatch, weights: np.ndarray, global_step: int, skipped: int = 0) -> dict[str, float]:
        """Closes a generation batch (all its generated groups in `batch`, and `skipped` more that skip mode did not
        generate): records the selections and the log, advances `batches_recorded`, and returns the batch's `lze/`
        metrics (`lze/selected_frac` over the batch's groups, the skipped ones included, as its quota counts them)."""
        selected = weights > 0
        self.prompts.record(batch.prompt_keys, batch.energies, selected)
        live = batch.live  # a scored batch: its live groups
        self.selection_log.append(
            global_step, self.batches_recorded, batch.prompt_keys, batch.pass_rates, batch.energies, weights, live
        )
        self.batches_recorded += 1
        explored = None
        if self.pruner is not None:
            before = self.pruner.explored_scored.sum(), self.pruner.explored_live.sum()
            self.pruner.observe(batch.prompt_keys, batch.pass_rates)
            explored = self.pruner.explored_scored.sum() - before[0], self.pruner.explored_live.sum() - before[1]
        scorable = np.isfinite(batch.pass_rates)
        self.empty_update_guard.observe(bool(scorable.any()), int(batch.live.sum()))
        metrics = {
            "lze/pass_rate_mean": float(np.nanmean(batch.pass_rates)) if scorable.any() else 0.0,
            "lze/energy_mean": float(batch.energies.mean()),
            "lze/dead_frac": float((~batch.live[scorable]).mean()) if scorable.any() else 0.0,
            **dead_shares(batch.pass_rates),
            "lze/unscorable_frac": float((~scorable).mean()),
            "lze/selected_frac": float(selected.sum() / (len(selected) + skipped)),
        }
        metrics.update({f"lze/{k}": v for k, v in self.selector.metrics().items()})
        if self.dataset_keys is not None:
            planned = self.position.groups_skipped(len(self.dataset_keys)) * self.num_generations
            metrics["lze/rollouts_skipped"] = planned
        if explored is not None:
            metrics.update({f"lze/{k}": v for k, v in self.pruner.metrics(self.prompts).items()})
            metrics["lze/groups_explored"] = float(explored[0])
            metrics["lze/groups_explored_live"] = float(explored[1])
        return metrics

    def untrained(self) -> str | None:
        """Why the run trained no token, naming the cause and the fix; `None` when it trained
        ([`~lze_trl.method.guards.EmptyUpdateGuard.untrained`])."""
        correctness = self.reward_names[self.correctness_index]
        return self.empty_update_guard.untrained(self.reward_names, correctness, self.args.pass_threshold)

    def end_of_run(self) -> None:
        """Says, at the end of training, when no update of the run trained a token, and why."""
        message = self.untrained()
        if message is not None:
            self.warn(message)

    # ----------------------------------------------------------------------------------------------- planning
    @property
    def skips(self) -> bool:
        """Whether forward pruning skips prompts at each step without refilling it (`prune_refill=False`)."""
        return self.pruner is not None and not self.args.prune_refill

    def plan_epoch(self, epoch: int, order: np.ndarray) -> np.ndarray:
        """The dataset indices an epoch rolls out, one per group, from its permutation `order`: forward pruning, then
        the selector's plan. In skip mode the plan keeps every prompt, and the keys pruning leaves out are the
        epoch's `position.skipping` ([`~LZERun.skip_groups`])."""
        order = np.asarray(order, dtype=np.int64)
        if self.pruner is not None:
            kept = self.pruner.plan_epoch(epoch, order, self.dataset_keys[order], self.prompts)
            if self.skips:
                self.position.skipping = np.unique(self.dataset_keys[np.setdiff1d(order, kept)])
            else:
                order = kept
        if self.selector.plans_rollouts:
            order = self.selector.plan_epoch(epoch, order, self.dataset_keys[order], self.prompts)
        return order

    def skip_groups(
        self, prompt_keys: np.ndarray, processes: int, skipping: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict[str, float]]:
        """
        Skip mode's decision on a step's groups before generation (every process's, in order: `prompt_keys`, one per
        group, the processes' equal slices one after another): the groups of the epoch's skipped prompts are not
        generated, as many on every process (the fewest any process would skip, the first ones in order; TRL gathers
        equal rows from each), keeping at least one group a process. A prompt of the pool that is generated all the
        same is explored: its group counts with the pruner's explored groups. `skipping` says which groups their epoch
        skips where they were drawn from more than one epoch's plan (the async window); by default the current
        epoch's `position.skipping`.

        Returns:
            `tuple[np.ndarray, dict[str, float]]`: whether each group is skipped, and the step's `lze/` counts:
            groups generated and skipped per side, and the generated rollouts over the step's prompts x
            `num_generations` (`lze/generated_share`).
        """
        keys = np.asarray(prompt_keys, dtype=np.int64).reshape(processes, -1)
        wanted = np.isin(keys, self.position.skipping) if skipping is None else np.reshape(skipping, keys.shape)
        num = min(int(wanted.sum(axis=1).min()), keys.shape[1] - 1)
        skip = wanted & (np.cumsum(wanted, axis=1) <= num)
        side = self.pruner.side_of(keys.ravel(), self.prompts)[0].reshape(keys.shape)
        explored = ~skip & (side >= 0) & ~np.isin(keys, self.pruner.pending_keys)
        self.pruner.explore(keys[explored], side[explored])
        self.position.skipped_groups += int(skip.sum())
        metrics = {"lze/groups_generated": float((~skip).sum())}
        for s, name in enumerate(SIDES):
            if self.pruner.after[s] is not None:
                metrics[f"lze/groups_skipped_{name}"] = float((skip & (side == s)).sum())
        metrics["lze/generated_share"] = float((~skip).mean())
        return skip.ravel(), metrics

    # ----------------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, np.ndarray]:
        """Every array of the run's LZE state (the selection log is saved beside it, as a table)."""
        arrays = {
            f"{name}.{key}": value for name, part in self._parts().items() for key, value in part.state_dict().items()
        }
        arrays["run.batches_recorded"] = np.asarray(self.batches_recorded)
        return arrays

    def load_state_dict(self, arrays: dict[str, np.ndarray]) -> None:
        """Restores a state written by [`~LZERun.state_dict`]."""
        for name, part in self._parts().items():
            part.load_state_dict({k[len(name) + 1 :]: v for k, v in arrays.items() if k.startswith(f"{name}.")})
        self.batches_recorded = int(arrays["run.batches_recorded"])

    def _parts(self) -> dict[str, Any]:
        parts = {"prompts": self.prompts, "selector": self.selector, "pruner": self.pruner, "position": self.position}
        parts.update(unscorable_guard=self.unscorable_guard)
        parts.update(empty_update_guard=self.empty_update_guard)
        return {name: part for name, part in parts.items() if part is not None}
