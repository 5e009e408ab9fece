"""The arms of the GPU timing script (`benchmarks/gpu/run.py`): each method's `LZEGRPOConfig` settings, the two
generation backends, and the steps each arm runs (and does not count)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.gpu.workload import Size


ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "grpo_half": {"selector": "none", "num_generations": 4},  # the same prompts, half the group
    "lze": {"selector": "lze"},
}
"""Arm -> its `LZEGRPOConfig` settings (the others are the run's, `benchmarks/gpu/timing.py`). The probe and the
adaptive budget, serial and fused, were arms until they left the library (BENCHMARKS.md section 15; commit 11e6ad3)."""

ORDER = ("grpo", "grpo_half", "lze")
"""The order the arms run in (each with every backend before the next arm), GRPO first: a run cut short by its time
budget still has the baseline of every ratio."""

BACKENDS: dict[str, dict[str, Any]] = {
    "transformers": {},
    # TRL 1.16's name; `use_transformers_paged` is its deprecated alias
    "continuous_batching": {"use_transformers_continuous_batching": True},
}
"""Generation backend -> its `GRPOConfig` settings."""


@dataclass(frozen=True)
class Arm:
    """One arm with one backend: `settings` are its method's and backend's `LZEGRPOConfig` settings."""

    name: str
    backend: str

    @property
    def settings(self) -> dict[str, Any]:
        return {**ARMS[self.name], **BACKENDS[self.backend]}

    def num_generations(self, size: Size) -> int:
        return ARMS[self.name].get("num_generations", size.num_generations)

    def skipped_steps(self, size: Size) -> int:
        """The arm's first steps, not counted: `size.warmup_steps`."""
        return size.warmup_steps

    def steps(self, size: Size) -> int:
        """The steps the arm runs: the skipped and the timed."""
        return self.skipped_steps(size) + size.timed_steps


def plan(arms: list[str], backends: list[str]) -> list[Arm]:
    """The arms to run, in `ORDER` (arm by arm, each with every backend in the order given)."""
    unknown = [a for a in arms if a not in ARMS] + [b for b in backends if b not in BACKENDS]
    if unknown:
        raise ValueError(f"Unknown arm or backend {unknown}: arms are {list(ARMS)}, backends {list(BACKENDS)}.")
    return [Arm(name, backend) for name in ORDER if name in arms for backend in backends]
