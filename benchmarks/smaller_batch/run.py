"""Forward pruning against the smaller batch (issue #71's bar): GRPO at B' = 40 prompts a step, chosen at random by
the epoch order, against both sides pruned at B = 64 (refilled) and at B', all at equal generated rollouts, on the
addition pruning study's harness (`benchmarks/addition_pruning/run.py`).

    python benchmarks/smaller_batch/run.py jobs [--seeds N] [--first_seed K]   # runs not yet in results: `ARM SEED`
    python benchmarks/smaller_batch/run.py train ARM SEED                      # one run, its evaluations included
    python benchmarks/smaller_batch/report.py                                  # report.md from the raw results

The protocol is `benchmarks/results/smaller_batch/protocol.md`, committed before the runs; its settings are `ARMS`,
`SEEDS` and `FIRST_SEED` here and the addition study's `PROTOCOL` (the dead-mass regime, R = 76,800 rollouts: 150
steps at B, 240 at B'). Every arm runs fresh seeds, none of which an earlier study ran.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "smaller_batch"
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from benchmarks.addition_pruning import run as harness  # noqa: E402


ARMS: dict[str, dict[str, Any]] = {
    name: harness.ARMS[name] for name in ("grpo_small", "grpo_prune", "grpo_prune_small")
}
"""GRPO at B' (the bar: a smaller batch alone, as many rollouts), both sides pruned at B (refilled) and at B', the
exploration probability adapted once an epoch."""
SEEDS, FIRST_SEED = 16, 24
"""Seeds 24-39 of every arm: past the 0-23 the earlier studies ran, so no outcome of these runs was read before."""


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, ARMS, RESULTS, SEEDS, __doc__.split("\n\n")[0], FIRST_SEED)


if __name__ == "__main__":
    sys.exit(main())
