"""Forward pruning with the exploration adapted once an epoch (issue #71): the addition pruning study's harness
(`benchmarks/addition_pruning/run.py`) at B = 64 prompts a step, the step refilled from the epoch, the unsolved side
pruned alone and both sides pruned, each against GRPO at equal generated rollouts.

    python benchmarks/epoch_exploration/run.py jobs [--seeds N] [--arms A,B]   # runs not yet in results: `ARM SEED`
    python benchmarks/epoch_exploration/run.py train ARM SEED                  # one run, its evaluations included
    python benchmarks/epoch_exploration/report.py                              # report.md from the raw results

The protocol is `benchmarks/results/epoch_exploration/protocol.md`, committed before the runs; its settings are `ARMS`
and `SEEDS` here and the addition study's `PROTOCOL` (the dead-mass regime, R = 76,800 rollouts = 150 steps at B).
GRPO's runs are the unsolved-side study's (`benchmarks/results/unsolved_pruning/runs/grpo/`); this study reruns its
first `REPRODUCED` seeds to check that they are unchanged.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "epoch_exploration"
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from benchmarks.addition_pruning import run as harness  # noqa: E402
from benchmarks.unsolved_pruning import run as unsolved  # noqa: E402


ARMS: dict[str, dict[str, Any]] = {
    "grpo": harness.ARMS["grpo"],
    "grpo_prune_unsolved": unsolved.ARMS["grpo_prune_unsolved"],
    "grpo_prune": harness.ARMS["grpo_prune"],
}
"""GRPO at B (the control: as many prompts a step, chosen at random by the epoch order), and at B, refilled, GRPO with
the pruning of the unsolved side alone and of both sides, the exploration probability adapted once an epoch."""
SEEDS = 24
"""Seeds 0-23 of each pruned arm, paired with the unsolved-side study's GRPO seeds 0-23."""
REPRODUCED = 2
"""GRPO's seeds this study reruns (0-1), to check that the unsolved-side study's GRPO runs still stand for GRPO."""


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, ARMS, RESULTS, SEEDS, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
