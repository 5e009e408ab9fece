"""One life of a generation batch, for both trainers: [`BatchInFlight`], from its first round to its close.

A batch is drawn and its groups get the schedule's first round ([`BatchInFlight.start`]: every group going on, no
reward yet); each round's rewards are written into it as they arrive ([`BatchInFlight.record`]); once a round has
arrived whole, [`round_done`] moves it on (the run's round policy chooses the groups that go on, evened out over the
processes by [`even_out`], and the next round begins) until the schedule's last round completes it; then it is
scored into the per-prompt state, in policy-version order, and decided ([`BatchInFlight.decide`]: the selector's
weight of each group), its rows cut to the selection, and closed ([`BatchInFlight.close`]: the update's metrics, the
empty-update guard, the log). The synchronous trainer's serial and fused rounds
([`~lze_trl.rounds.serial.SyncBatchInFlight`]) and the async trainer's window
([`~lze_trl.async_grpo.window.AsyncBatchInFlight`]) keep their batches as subclasses of [`BatchInFlight`] and go
through these functions; what each adds is how the rollouts travel (TRL's rows on each process, or the worker's
tagged rows) and how the kept rows reach the update. Their checkpoint file is one too
([`~lze_trl.common.in_flight_files.save_in_flight`]). Plain numpy, no TRL.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..method.round_policies import RoundsState
from ..method.selectors import GroupBatch
from ..method.shadow import Decision


if TYPE_CHECKING:
    from ..method.run import LZERun


@dataclass
class BatchInFlight:
    """
    A generation batch in flight.

    Attributes:
        round_last (`int`):
            The last rollout (exclusive) of the round in flight: each group going on has its rollouts
            `state.rollouts_so_far` to `round_last` generated in it.
        state ([`~lze_trl.method.round_policies.RoundsState`] or `None`):
            What is known of the batch, every process's groups in order (`None` before the synchronous trainer's first
            round, whose rollouts bring the groups' prompt keys).
        skipped (`int`):
            Groups of the batch's prompts that skip mode (`prune_refill=False`) did not generate: predicted dead, they
            count in the selector's quota as dead groups do ([`~lze_trl.method.run.LZERun.select`]).
    """

    round_last: int
    state: RoundsState | None = None
    skipped: int = 0

    @property
    def complete(self) -> bool:
        """Whether the groups going on have every rollout (the schedule's last round has arrived)."""
        return self.state is not None and self.state.remaining == 0

    def start(self, prompt_keys: np.ndarray, num_generations: int, reward_count: int, correctness_index: int) -> None:
        """Gives the batch its [`RoundsState`], unless it has one: the groups of `prompt_keys` (every process's, in
        order), every one going on, no reward yet."""
        if self.state is None:
            rewards = np.full((len(prompt_keys), num_generations, reward_count), np.nan)
            keys = np.asarray(prompt_keys, dtype=np.int64)
            self.state = RoundsState(keys, rewards, correctness_index, np.ones(len(keys), dtype=bool))

    def record(self, groups: np.ndarray, first: int, last: int, rewards: np.ndarray) -> None:
        """Writes the `rewards` (`(groups, last - first, reward functions)`) of rollouts `first` to `last` of `groups`
        (indices among every process's groups) of the round in flight."""
        self.state.rewards[groups, first:last] = rewards

    def decide(
        self,
        run: LZERun,
        totals: np.ndarray,
        global_step: int,
        metrics: dict[str, float],
        versions: np.ndarray | None = None,
    ) -> Decision:
        """
        The complete batch scored into the per-prompt state, oldest policy `versions` first (draw order within a
        version; one version by default), and decided by `run` ([`~lze_trl.method.run.LZERun.decide`]: the selector
        weighs the complete groups, the batch is recorded).

        Returns:
            [`~lze_trl.method.shadow.Decision`]: each group's weight, the batch's `lze/` metrics (the given `metrics`
            among them) and in shadow mode the groups the selector would have kept, in draw order.
        """
        state = self.state
        keys, complete, rewards = state.prompt_keys, state.going_on, state.rewards
        versions = np.zeros(len(keys), dtype=np.int64) if versions is None else versions
        order = np.argsort(versions, kind="stable")
        parts = []
        for _, members in itertools.groupby(order, key=lambda i: versions[i]):
            m = np.fromiter(members, dtype=np.int64)
            parts.append(run.score(keys[m], rewards[m, :, state.correctness_index], totals[m], complete[m]))
        in_order = None
        if len(run.round_policy.schedule) > 1:  # the round policy observes the batch, in the order it was scored
            in_order = RoundsState(keys[order], rewards[order], state.correctness_index, complete[order],
                                   state.rollouts_so_far, list(state.fresh))  # fmt: skip
        decision = run.decide(GroupBatch.concatenate(parts), complete[order], in_order, global_step, metrics,
                              self.skipped)  # fmt: skip
        weights = np.empty(len(keys))
        weights[order] = decision.weights
        shadow_kept = None
        if decision.shadow_kept is not None:  # what the selector would have kept, in draw order too
            shadow_kept = np.empty(len(keys), dtype=bool)
            shadow_kept[order] = decision.shadow_kept
        return Decision(weights, decision.metrics, shadow_kept)

    def state_dict(self, prefix: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """What either trainer saves of the batch ([`~lze_trl.common.in_flight_files.save_in_flight`]): its prompt
        keys and rewards as arrays (named `prefix` + the field), the rest as JSON values."""
        saved: dict[str, Any] = {"round_last": self.round_last, "skipped": self.skipped}
        if self.state is None:  # before the synchronous trainer's first round
            return {}, saved
        state = self.state
        saved.update(correctness_index=state.correctness_index, going_on=state.going_on.tolist(),
                     rollouts_so_far=state.rollouts_so_far, fresh=list(state.fresh))  # fmt: skip
        return {f"{prefix}prompt_keys": state.prompt_keys, f"{prefix}rewards": state.rewards}, saved

    def load_state_dict(self, arrays: dict[str, np.ndarray], saved: dict[str, Any], prefix: str) -> None:
        """Takes back what [`~BatchInFlight.state_dict`] saved."""
        self.round_last, self.state, self.skipped = int(saved["round_last"]), None, int(saved["skipped"])
        if "going_on" in saved:
            self.state = RoundsState(
                np.asarray(arrays[f"{prefix}prompt_keys"], dtype=np.int64),
                np.asarray(arrays[f"{prefix}rewards"], dtype=np.float64),
                int(saved["correctness_index"]),
                np.array(saved["going_on"], dtype=bool),
                int(saved["rollouts_so_far"]),
                [int(n) for n in saved["fresh"]],
            )

    def close(
        self,
        run: LZERun,
        metrics: dict[str, float],
        update: tuple[int, int],
        grpo_update: tuple[int, int],
        log: Callable[[dict], None],
    ) -> None:
        """Closes the decided batch: its update's rows (the kept groups' rollouts, every process's) and tokens
        (`update`), and those GRPO's update would have taken (`grpo_update`: every complete group's) into `metrics`,
        the empty-update guard ([`~lze_trl.method.guards.EmptyUpdateGuard`]) on the tokens, and `log`."""
        metrics["lze/update_rows"], metrics["lze/update_tokens"] = (float(v) for v in update)
        metrics["lze/grpo_update_rows"], metrics["lze/grpo_update_tokens"] = (float(v) for v in grpo_update)
        run.empty_update_guard.check(update[1], "no complete group was selected")
        log(metrics)


def round_done(batch: BatchInFlight, run: LZERun, processes: int) -> bool:
    """Moves `batch` past its round in flight, which has arrived whole (its rewards are in `batch.state`, its rollouts
    counted in `state.fresh`): unless that
    completes the batch, the round policy of `run` ([`~lze_trl.method.run.LZERun`]) chooses the groups that go on,
    evened out over `processes`, and the next round of the policy's schedule begins. Returns whether the batch is
    complete."""
    state, schedule = batch.state, run.round_policy.schedule
    state.fresh.append(int(state.going_on.sum()) * (batch.round_last - state.rollouts_so_far))
    state.rollouts_so_far = batch.round_last
    if batch.complete:
        return True
    chosen, priority = run.round_policy.choose(run, state)
    state.going_on = even_out(chosen, priority, processes, state.going_on)
    batch.round_last = schedule[schedule.index(state.rollouts_so_far) + 1]
    return False


def even_out(
    chosen: np.ndarray, priority: np.ndarray, num_processes: int, going_on: np.ndarray | None = None
) -> np.ndarray:
    """The choice with `max(ceil(chosen / num_processes), 1)` groups on every process (groups split evenly over the
    processes, in order), dropping a process's lowest-priority chosen groups or adding its highest-priority others
    among those `going_on` (all by default; every process holds as many of them as the count needs, since the previous
    round was evened out alike)."""
    going_on = np.ones(len(chosen), dtype=bool) if going_on is None else going_on
    per_process, eligible = (chosen & going_on).reshape(num_processes, -1), going_on.reshape(num_processes, -1)
    priority = priority.reshape(num_processes, -1)
    count = max(math.ceil(int(per_process.sum()) / num_processes), 1)
    out = np.zeros_like(per_process)
    for p in range(num_processes):
        order = np.lexsort((-priority[p], ~eligible[p], ~per_process[p]))  # the chosen, then the others going on
        out[p, order[:count]] = True
    return out.reshape(-1)
