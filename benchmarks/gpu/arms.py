"""The arms of the GPU timing script (`benchmarks/gpu/run.py`): each method's `LZEGRPOConfig` settings, the two
generation backends, and what each arm should make a step (generation calls, steps not counted)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.gpu.workload import Size


PROBE = {"generation_rounds": [2, 8], "round_policy": "probe", "selection_ratio": 0.33}
ADAPTIVE = {"generation_rounds": [2, 4, 8], "round_policy": "adaptive"}

ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"selector": "none"},
    "grpo_half": {"selector": "none", "num_generations": 4},  # the same prompts, half the group
    "lze": {"selector": "lze"},
    "probe_serial": {"selector": "lze", **PROBE, "fuse_rounds": False},
    "probe_fused": {"selector": "lze", **PROBE, "fuse_rounds": True},
    "adaptive_serial": {"selector": "lze", **ADAPTIVE, "fuse_rounds": False},
    "adaptive_fused": {"selector": "lze", **ADAPTIVE, "fuse_rounds": True},
}
"""Arm -> its `LZEGRPOConfig` settings (the others are the run's, `benchmarks/gpu/timing.py`)."""

ORDER = ("grpo", "probe_fused", "probe_serial", "adaptive_fused", "adaptive_serial", "grpo_half", "lze")
"""The order the arms run in (each with every backend before the next arm), most wanted first: a run cut short by its
time budget still has GRPO, the baseline of every ratio, and the serial-against-fused comparisons."""

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

    @property
    def rounds(self) -> list[int] | None:
        return ARMS[self.name].get("generation_rounds")

    @property
    def fused(self) -> bool:
        return bool(self.rounds) and bool(ARMS[self.name].get("fuse_rounds"))

    @property
    def expected_calls(self) -> int:
        """Generation calls a step makes: one per round in serial rounds, else one (GRPO, LZE, fused rounds)."""
        return len(self.rounds) if self.rounds and not self.fused else 1

    def num_generations(self, size: Size) -> int:
        return ARMS[self.name].get("num_generations", size.num_generations)

    def skipped_steps(self, size: Size) -> int:
        """The arm's first steps, not counted: `size.warmup_steps`, and at least the first of a fused arm (whose `R`
        generation calls start its batches in flight)."""
        return max(size.warmup_steps, int(self.fused))

    def steps(self, size: Size) -> int:
        """The steps the arm runs: the skipped, the timed, and for a fused arm of `R` rounds `R - 1` more, not timed
        (its last steps draw fewer batches ahead, so their generation calls are smaller than a steady step's)."""
        return self.skipped_steps(size) + size.timed_steps + (len(self.rounds) - 1 if self.fused else 0)


def plan(arms: list[str], backends: list[str]) -> list[Arm]:
    """The arms to run, in `ORDER` (arm by arm, each with every backend in the order given)."""
    unknown = [a for a in arms if a not in ARMS] + [b for b in backends if b not in BACKENDS]
    if unknown:
        raise ValueError(f"Unknown arm or backend {unknown}: arms are {list(ARMS)}, backends {list(BACKENDS)}.")
    return [Arm(name, backend) for name in ORDER if name in arms for backend in backends]
