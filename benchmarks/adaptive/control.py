"""The control of the adaptive budget (BENCHMARKS.md section 12): after each round, as many groups go on as the
budget's rule would continue, chosen uniformly at random among those still going on. Only the choice differs from
`lze:rollout_rounds=2+4+8` (same rounds, same number of completed groups per round, same selector), so the difference
between the two is what the live probability's choice is worth. One regime and seed per call, section 12's setting:

    python benchmarks/adaptive/control.py dead 0 benchmarks/results/adaptive/control_runs

writes `OUT/<regime>_s<seed>/seed_<seed>/demo_results.json.gz`, the layout `benchmarks/adaptive/report.py` reads.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.regimes import run_one_arm  # noqa: E402
from lze_trl.demo import MeteredLZEGRPOTrainer, MethodSpec  # noqa: E402


ARM = "uniform_rounds"
SETTING = {"selector": "lze", "rollout_rounds": [2, 4, 8]}


class UniformRoundsTrainer(MeteredLZEGRPOTrainer):
    """The adaptive budget with its choice replaced by a uniform one among the groups going on (one process)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rule, threshold = self.lze.live_probability, self.args.rollout_live_threshold
        rng = np.random.default_rng(self.args.seed)

        def uniform(prompt_ids: np.ndarray, correctness: np.ndarray, remaining: int) -> np.ndarray:
            going = ~np.isnan(np.asarray(correctness, dtype=np.float64)[:, -1])  # the groups of the last round
            count = int(((rule(prompt_ids, correctness, remaining) >= threshold) & going).sum())
            chosen = np.zeros(len(going))
            chosen[rng.choice(np.flatnonzero(going), size=count, replace=False)] = 1.0
            return chosen

        self.lze.live_probability = uniform


def main() -> None:
    run_one_arm(__doc__.split("\n\n")[0], MethodSpec(ARM, dict(SETTING), trainer_cls=UniformRoundsTrainer))


if __name__ == "__main__":
    main()
