"""Forward pruning against the dead-group filter at a larger generation batch (issue #71's dynamic-sampling control):
GRPO generating 80 prompts a step and updating on their live groups alone (about as many live groups a step as both
sides pruned at B = 64), against the smaller-batch study's pruned arm at equal generated rollouts, on the addition
pruning study's harness (`benchmarks/addition_pruning/run.py`).

    python benchmarks/dead_filter/run.py jobs [--seeds N] [--first_seed K]   # runs not yet in results: `ARM SEED`
    python benchmarks/dead_filter/run.py train ARM SEED                      # one run, its evaluations included
    python benchmarks/dead_filter/report.py                                  # report.md from the raw results

The protocol is `benchmarks/results/dead_filter/protocol.md`, committed before the runs; its settings are `ARMS`,
`SEEDS` and `FIRST_SEED` here and the addition study's `PROTOCOL` (R = 76,800 rollouts: 120 steps at 80 prompts).
The pruned arm's and the smaller batch's runs are the smaller-batch study's (`benchmarks/results/smaller_batch/`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "dead_filter"
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from benchmarks.addition_pruning import run as harness  # noqa: E402
from benchmarks.smaller_batch import run as smaller  # noqa: E402


ARMS: dict[str, dict[str, Any]] = {"grpo_filter": {"selector": "lze", "selection_ratio": 1.0, "prompts_per_step": 80}}
"""GRPO at 80 prompts a step whose update keeps every live group and no dead one (LZE's selector at a quota of 1.0:
only the eligible, live groups, all of them): dynamic sampling's update, from a fixed larger generation batch rather
than a refill to an exact count. 80 prompts reach R at an evaluation step (120) and, at GRPO's dead share of 0.406,
leave about 47.5 live groups a step, the pruned arm's 48.1."""
SEEDS, FIRST_SEED = smaller.SEEDS, smaller.FIRST_SEED
"""The smaller-batch study's seeds (24-39), paired with its runs."""


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, ARMS, RESULTS, SEEDS, __doc__.split("\n\n")[0], FIRST_SEED)


if __name__ == "__main__":
    sys.exit(main())
