"""What a run's `trainer_state.json` says for `lze-trl advise` ([`Signals`]): its log entries (each the mean of the
`logging_steps` steps before it, counted once a step it covers), the dead share, the step's seconds, the update's
tokens and forward pruning's counts. Plain Python over the log: it imports neither torch nor TRL."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..method.pruning import SIDES
from . import UsageError


def read_history(path: str) -> list[dict]:
    """The `log_history` of a run: `path` is `trainer_state.json`, or a run's `output_dir` (its own
    `trainer_state.json`, else its last checkpoint's)."""
    candidates = [path] if path.endswith(".json") else [os.path.join(path, "trainer_state.json")]
    if not path.endswith(".json") and os.path.isdir(path):
        checkpoints = [d for d in os.listdir(path) if d.startswith("checkpoint-") and d.split("-")[-1].isdigit()]
        for name in sorted(checkpoints, key=lambda d: int(d.split("-")[-1]), reverse=True):
            candidates.append(os.path.join(path, name, "trainer_state.json"))
    for candidate in candidates:
        if os.path.isfile(candidate):
            with open(candidate) as f:
                return json.load(f)["log_history"]
    raise UsageError(
        f"lze-trl advise: no trainer_state.json in {path!r} nor in a checkpoint-* folder of it. Point it at a run's "
        "output_dir after training (save a checkpoint, or call trainer.save_state()), or at a trainer_state.json."
    )


def _spans(history: list[dict]) -> list[int]:
    """The steps each log entry covers (from the step before it, `step` of TRL's log; 1 where an entry has none)."""
    spans, before = [], 0
    for entry in history:
        step = int(entry.get("step", before + 1))
        spans.append(max(step - before, 1))
        before = step
    return spans


def _total(history: list[dict], key: str) -> float | None:
    """The sum of `key` over the logged steps, each entry (the mean of its steps) counted once a step it covers
    (`None` when no step logged it)."""
    values = [(e[key], n) for e, n in zip(history, _spans(history)) if key in e]
    return float(sum(v * n for v, n in values)) if values else None


def _mean(history: list[dict], key: str) -> float | None:
    """The mean of `key` over the logged steps (`None` when no step logged it)."""
    values = [(e[key], n) for e, n in zip(history, _spans(history)) if key in e]
    return float(sum(v * n for v, n in values) / sum(n for _, n in values)) if values else None


def _last(history: list[dict], key: str) -> float | None:
    values = [e[key] for e in history if key in e]
    return float(values[-1]) if values else None


@dataclass
class Pruned:
    """A pruning run's own counts: the rollouts its epoch plans left out and those it generated, and per pruned side
    the prompts its last epoch plan skipped and the explored pruned prompts scored and live."""

    rollouts_skipped: float
    rollouts_generated: float
    sides: dict[str, tuple[float, float, float]]  # side: (skipped in the last plan, explored scored, explored live)


@dataclass
class Signals:
    """What a run's log says: its log entries, the dead share, the step's seconds, the update's tokens, and forward
    pruning's counts (a shadow run's or a pruning run's)."""

    entries: int
    last_step: int | None
    logging_steps: int | None
    dead_share: float | None
    dead_source: str
    generation_seconds: float | None  # a logged step's mean
    update_seconds: float | None
    step_seconds: float | None
    assumed_generation_share: float | None
    grpo_tokens: float | None
    kept_tokens: float | None  # lze/update_tokens
    shadow_tokens: float | None
    selected: float | None
    prunable: dict[str, tuple[float, float]] = field(default_factory=dict)  # shadow: side: (prunable, live among them)
    prunable_share: float | None = None  # shadow: the share of the generated groups pruning would have skipped
    pruned: Pruned | None = None
    generation_source: str = "lze/generation_seconds"  # the async trainer's: lze/rollout_wait_seconds

    @classmethod
    def of(cls, history: list[dict], assumed_generation_share: float | None = None) -> Signals:
        steps = [e for e in history if "loss" in e or "lze/step_seconds" in e]
        if not steps:
            raise UsageError("lze-trl advise: the run's log has no training step: train a few steps first.")
        numbers = [int(e["step"]) for e in steps if "step" in e]
        gaps = [b - a for a, b in zip([0, *numbers], numbers)]
        every = max(set(gaps), key=gaps.count) if gaps else None
        dead, dead_source = _mean(steps, "lze/dead_frac"), "lze/dead_frac"
        if dead is None:
            dead, dead_source = _mean(steps, "frac_reward_zero_std"), "TRL's frac_reward_zero_std"
        seconds, generation = _mean(steps, "lze/step_seconds"), _mean(steps, "lze/generation_seconds")
        generation_source = "lze/generation_seconds"
        if generation is None and _mean(steps, "lze/rollout_wait_seconds") is not None:  # the async trainer's
            generation, generation_source = _mean(steps, "lze/rollout_wait_seconds"), "lze/rollout_wait_seconds"
        update = _mean(steps, "lze/update_seconds")
        if update is None and seconds is not None and generation is not None:
            update = seconds - generation
        prunable = {
            side: (_total(steps, f"lze/shadow_prunable_{side}"), _total(steps, f"lze/shadow_prunable_live_{side}"))
            for side in SIDES
            if _total(steps, f"lze/shadow_prunable_{side}") is not None
        }
        pruned = None
        pruned_sides = [side for side in SIDES if any(f"lze/skipped_prompts_{side}" in e for e in steps)]
        if pruned_sides:
            generated = _total(steps, "lze/grpo_update_rows") or 0.0
            names = ("skipped_prompts", "explored_scored", "explored_live")
            sides = {side: tuple(_last(steps, f"lze/{name}_{side}") or 0.0 for name in names) for side in pruned_sides}
            pruned = Pruned(_last(steps, "lze/rollouts_skipped") or 0.0, generated, sides)
        return cls(
            entries=len(steps),
            last_step=max(numbers) if numbers else None,
            logging_steps=every,
            dead_share=dead,
            dead_source=dead_source,
            generation_seconds=generation,
            generation_source=generation_source,
            update_seconds=update,
            step_seconds=seconds,
            assumed_generation_share=assumed_generation_share,
            grpo_tokens=_total(steps, "lze/grpo_update_tokens"),
            kept_tokens=_total(steps, "lze/update_tokens"),
            shadow_tokens=_total(steps, "lze/shadow_update_tokens"),
            selected=_mean(steps, "lze/selected_frac"),
            prunable=prunable,
            prunable_share=_mean(steps, "lze/shadow_prunable_frac"),
            pruned=pruned,
        )

    @property
    def shadow(self) -> bool:
        """Whether the run is a shadow run (it logged what LZE's update would have kept)."""
        return self.shadow_tokens is not None

    @property
    def selecting(self) -> bool:
        """Whether the run's update kept only some groups: an LZE run, not a shadow run nor a `selector="none"` one."""
        return (
            not self.shadow
            and bool(self.grpo_tokens)
            and self.kept_tokens is not None
            and self.selected is not None
            and self.selected < 1
        )
