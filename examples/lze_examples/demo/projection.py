"""A run's step time projected under vLLM, from its token counts and a per-token profile measured with vLLM.

On this project's CPU machine the demo generates with transformers, whose generation is a small share of a step; with
vLLM on GPUs it is over two thirds (SPEED, arXiv 2506.09016). `benchmarks/bench_vllm_cpu.py` measures GRPO's step under
vLLM colocate and divides each part by what it scales with: seconds per generated completion token, per rollout scored
(rewards and the trainer's log-probabilities of the rollouts), per update token (prompt + completion tokens through the
update's forward and backward), plus the weight sync. A run's projected step is

    generation_seconds_per_token * completion tokens generated
    + scoring_seconds_per_rollout * rollouts
    + update_seconds_per_token * update tokens
    + sync_seconds

per step, and the demo reports it as a ratio to the baseline's projected step. The profile is shipped as
`vllm_profile.json` with the command that measured it; BENCHMARKS.md section 2 says how far it is from a clean CPU
measurement, where generation is a quarter of the step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


PROFILE = Path(__file__).with_name("vllm_profile.json")


def load_profile(path: str | Path = PROFILE) -> dict[str, Any] | None:
    """The per-token profile, `None` when there is none."""
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else None


def projected_step_seconds(
    profile: dict[str, Any], completion_tokens: float, rollouts: float, update_tokens: float
) -> float:
    """The projected seconds of one step with these token counts per step (see the module docstring)."""
    return (
        profile["generation_seconds_per_token"] * completion_tokens
        + profile["scoring_seconds_per_rollout"] * rollouts
        + profile["update_seconds_per_token"] * update_tokens
        + profile["sync_seconds"]
    )


def projected_summary_seconds(profile: dict[str, Any], summary: dict[str, Any]) -> float:
    """
    The projected seconds of one step of a finished run, from the totals in its demo summary
    (`demo_results.json`'s `methods.<method>.summary`) per optimizer step: what the demo stored as
    `projected_vllm_step_seconds` (for one generation batch per optimizer step, TRL's default), under another
    `profile`.
    """
    steps = max(summary["optimizer_steps"], 1)
    counts = ("rollout_tokens", "rollouts", "update_processed_tokens")
    return projected_step_seconds(profile, *(summary.get(key, 0) / steps for key in counts))
