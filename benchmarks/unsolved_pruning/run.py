"""Forward pruning on the unsolved side alone, at the user's batch (issue #71): the addition pruning study's harness
(`benchmarks/addition_pruning/run.py`) with two arms at B = 64 prompts a step, GRPO and GRPO with the pruning of the
prompts whose last group was all wrong, the step refilled from the epoch.

    python benchmarks/unsolved_pruning/run.py jobs [--seeds N]   # runs not yet in results: `ARM SEED`
    python benchmarks/unsolved_pruning/run.py train ARM SEED     # one run, its evaluations included
    python benchmarks/unsolved_pruning/report.py                 # report.md from the raw results

The protocol is `benchmarks/results/unsolved_pruning/protocol.md`, committed before the runs; its settings are
`ARMS` and `SEEDS` here and the addition study's `PROTOCOL` (the dead-mass regime, R = 76,800 rollouts = 150 steps
at B, so every arm's evaluation at R is the one after step 150).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "unsolved_pruning"
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from benchmarks.addition_pruning import run as harness  # noqa: E402
from benchmarks.smollm2_pruning.run import PRUNING  # noqa: E402


ARMS: dict[str, dict[str, Any]] = {
    "grpo": harness.ARMS["grpo"],
    "grpo_prune_unsolved": {"selector": "none", **PRUNING, "prune_solved": False},
}
"""GRPO at B (the control: as many prompts a step, chosen at random by the epoch order) and GRPO with the pruning of
the unsolved side alone at B, refilled: the same rollouts a step, the prompts history predicts all wrong left out."""
SEEDS = 24
"""Seeds 0-23 of each arm, sized by the protocol from the addition study's pooled error."""


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, ARMS, RESULTS, SEEDS, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
