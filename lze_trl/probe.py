"""Probe-then-complete (`probe_generations=k`): generate `k` rollouts of every prompt, complete to `num_generations`
only the groups the selector would keep, as a [`~lze_trl.step.RolloutPlan`].

1. **Probe.** Every prompt of the generation batch gets its first `k` rollouts (one TRL generation and scoring, groups
   of `k`). Its expected energy once complete ([`~lze_trl.run.LZERun.probe`]) ranks it; the selector chooses among
   the probes with the generation batch's quota, and the choice is evened out so that every process completes the
   same number of groups (the processes must run the same collectives on the same number of rows).
2. **Completion.** The chosen prompts get their `G - k` other rollouts, in one TRL generation and scoring of whole
   groups of `G` whose first `k` rows are the probe's, served from the [`RolloutCache`] instead of generated again:
   TRL computes rewards, advantages and log-probabilities over the whole group, exactly as for a group generated at
   once (the reward functions see the probe's rollouts twice).
3. **Update.** Every prompt is recorded once: a completed group with its `G` rollouts, the others with their probe
   (which may not set a prompt's first pass rate). The selector weighs the completed groups; the others never reach
   the update.

Plain numpy/torch, no TRL import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from .batching import take_rows
from .selection import in_learning_zone
from .step import Collected, StepContext


class RolloutCache:
    """
    The channel between a rollout plan and TRL's `_generate` (the trainer's override hands every call to
    [`RolloutCache.generate`]): outside a plan's scope it generates; inside [`capture`] it keeps each row's result;
    inside [`serve`] it returns the rows it is given and generates only the others.
    """

    def __init__(self) -> None:
        self._capture: list | None = None
        self._serve: tuple[list, int] | None = None

    @contextlib.contextmanager
    def capture(self) -> Iterator[list]:
        """Keeps the per-row results of the `_generate` calls inside (yielded list, one entry per row, in order)."""
        self._capture = rows = []
        try:
            yield rows
        finally:
            self._capture = None

    @contextlib.contextmanager
    def serve(self, rows: list, group_size: int) -> Iterator[None]:
        """Inside, `_generate` returns `rows[i]` for each row `i` that has one and generates the others, in runs of
        `group_size` rows of one prompt (vLLM's server mode generates `group_size` completions per prompt)."""
        self._serve = (rows, group_size)
        try:
            yield
        finally:
            self._serve = None

    def generate(self, prompts: list, generate: Callable[[list, int | None], tuple]) -> tuple:
        """TRL's `_generate(prompts)` result, from `generate(prompts, group_size)` and what is captured or served."""
        if self._serve is None:
            result = generate(prompts, None)
            if self._capture is not None:
                self._capture.extend(split_rows(result, len(prompts)))
            return result
        served, group_size = self._serve
        missing = [i for i, row in enumerate(served) if row is None]
        rows = list(served)
        if missing:
            new = split_rows(generate([prompts[i] for i in missing], group_size), len(missing))
            for i, row in zip(missing, new):
                rows[i] = row
        return join_rows(rows)


@dataclasses.dataclass(frozen=True)
class _Whole:
    """A part of TRL's `_generate` result that is not one entry per row (`None`, no extra fields, no tool images)."""

    value: Any


def split_rows(result: tuple, n: int) -> list[tuple]:
    """TRL's `_generate` result (a tuple of per-row lists and whole parts) as one tuple per row."""
    if any(isinstance(part, dict) and part for part in result):
        raise ValueError("probe_generations cannot reuse rollouts that carry extra fields (rollout_func).")
    per_row = [isinstance(part, list) and len(part) == n and n > 0 for part in result]
    return [tuple(p[i] if each else _Whole(p) for p, each in zip(result, per_row)) for i in range(n)]


def join_rows(rows: list[tuple]) -> tuple:
    """The inverse of [`split_rows`]: rows (some served, some generated) as one `_generate` result."""
    return tuple(
        first.value if isinstance(first, _Whole) else [row[j] for row in rows] for j, first in enumerate(rows[0])
    )


def even_out(chosen: np.ndarray, energies: np.ndarray, num_processes: int) -> np.ndarray:
    """
    The choice with the same number of groups on every process (groups in order, split evenly over the processes):
    `ceil(chosen / num_processes)` each, dropping a process's lowest-energy chosen groups or adding its
    highest-energy others. Decided from gathered data: the same on every process.
    """
    per_process = chosen.reshape(num_processes, -1)
    energy = energies.reshape(num_processes, -1)
    count = math.ceil(int(chosen.sum()) / num_processes)
    out = np.zeros_like(per_process)
    for p in range(num_processes):
        order = np.lexsort((-energy[p], ~per_process[p]))  # the chosen first, each by energy
        out[p, order[:count]] = True
    return out.reshape(-1)


class ProbePlan:
    """
    Probe-then-complete (see the module docstring).

    Args:
        probe_generations (`int`):
            Rollouts of every prompt's probe (`k`).
        run ([`~lze_trl.run.LZERun`]):
            The run's LZE state (the probes' expected energies).
        cache ([`RolloutCache`]):
            The trainer's `_generate` channel.
        warn (`Callable[[str], None]`):
            How the plan says that its probes decide badly.
    """

    def __init__(self, probe_generations: int, run: Any, cache: RolloutCache, warn: Callable[[str], None]) -> None:
        self.k, self.run, self.cache, self.warn = probe_generations, run, cache, warn
        self.bad_batches = 0  # consecutive generation batches whose completed groups were mostly dead

    def collect(self, ctx: StepContext, inputs: list[dict]) -> Collected:
        G, k, accelerator = ctx.num_generations, self.k, ctx.accelerator
        processes, process = accelerator.num_processes, accelerator.process_index
        local_groups = len(inputs) // G
        with self.cache.capture() as probe_rows:
            probe = ctx.generate([inputs[g * G + j] for g in range(local_groups) for j in range(k)], k)
        ids, probe_rewards = probe.groups(k)
        candidates = self.run.probe(ids, probe_rewards[:, :, ctx.correctness_index], G - k)
        chosen = even_out(ctx.select(candidates) > 0, candidates.energies, processes)
        mine = np.flatnonzero(chosen.reshape(processes, -1)[process])
        rows = [probe_rows[g * k + j] if j < k else None for g in mine for j in range(G)]
        # Every prompt recorded once: the completed groups with their G rollouts, the others with their probe
        rewards = np.full((len(ids), G, probe_rewards.shape[-1]), np.nan)
        rewards[:, :k] = probe_rewards
        if len(mine):
            with self.cache.serve(rows, G - k):
                completed = ctx.generate([inputs[g * G + j] for g in mine for j in range(G)], G)
            rewards[chosen] = completed.groups(G)[1]
            update, generated_tokens = completed.rows, completed.rows["num_items_in_batch"].item()
        else:  # nothing worth completing: one zero-weight row keeps the micro-steps (as an all-dead GRPO batch)
            update, generated_tokens = take_rows(probe.rows, torch.arange(1)), 0.0
        groups = ctx.score(ids, rewards, 0, chosen)
        weights = ctx.select(dataclasses.replace(groups, live=groups.live & chosen))
        row_weights = np.repeat(weights.reshape(processes, -1)[process][mine], G) if len(mine) else np.zeros(1)
        max_kept = int(max((weights.reshape(processes, -1)[p] > 0).sum() for p in range(processes)) * G)
        metrics = self.metrics(candidates, groups, chosen, G)
        return Collected(update, groups, weights, row_weights, max_kept, generated_tokens, metrics)

    def metrics(self, candidates: Any, groups: Any, chosen: np.ndarray, G: int) -> dict[str, float]:
        """The probe's metrics, and its guard: a warning once when most completed groups came back dead for 3
        generation batches in a row (the probes are too noisy for the prompts)."""
        completed = int(chosen.sum())
        probe_mixed = in_learning_zone(candidates.pass_rates)
        dead = float((~groups.live[chosen]).mean()) if completed else 0.0
        self.bad_batches = self.bad_batches + 1 if completed and dead > 0.5 else 0
        if self.bad_batches == 3:
            self.warn(
                f"probe_generations={self.k}: more than half of the completed groups came back dead for 3 generation "
                f"batches in a row ({dead:.0%} in the last): the probes cannot tell which prompts are in the learning "
                "zone. Raise probe_generations or probe_prior_strength, or turn the probe off (probe_generations=0)."
            )
        return {
            "lze/fresh_rollouts": len(chosen) * self.k + completed * (G - self.k),
            "lze/probe_rollouts": len(chosen) * self.k,
            "lze/completed_groups": completed,
            "lze/completed_dead_frac": dead,
            "lze/probe_agreement": float((probe_mixed[chosen] == groups.live[chosen]).mean()) if completed else 1.0,
        }
