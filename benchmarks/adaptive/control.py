"""The control of the adaptive budget (BENCHMARKS.md section 12): after each round, as many groups go on as the
budget's rule would continue, chosen uniformly at random among those still going on. Only the choice differs from
`lze:rollout_rounds=2+4+8` (`generation_rounds=[2, 4, 8]`; same rounds, same number of completed groups per round,
same selector), so the difference between the two is what the learning-zone probability's choice is worth. One
regime and seed per call, section 12's setting:

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
from lze_examples.demo import MethodSpec  # noqa: E402
from lze_trl.method.round_policies import AdaptiveRounds, RoundsState, register_round_policy  # noqa: E402


ARM = "uniform_rounds"
SETTING = {"selector": "lze", "generation_rounds": [2, 4, 8], "round_policy": "uniform_adaptive"}


@register_round_policy
class UniformAdaptiveRounds(AdaptiveRounds):
    """The adaptive budget with its choice replaced by a uniform one among the groups going on: as many as the budget's
    rule would continue (one process; one stream of draws from the run's seed, as the committed runs drew them)."""

    name = "uniform_adaptive"

    def __init__(self, args: Any, *more: Any) -> None:
        super().__init__(args, *more)
        self.rng = np.random.default_rng(args.seed)

    def choose(self, run: Any, state: RoundsState) -> tuple[np.ndarray, np.ndarray]:
        rule, _ = super().choose(run, state)
        going = np.flatnonzero(state.going_on)
        chosen = np.zeros(len(state.going_on), dtype=bool)
        chosen[self.rng.choice(going, size=int((rule & state.going_on).sum()), replace=False)] = True
        return chosen, chosen.astype(np.float64)


def main() -> None:
    run_one_arm(__doc__.split("\n\n")[0], MethodSpec(ARM, dict(SETTING)))


if __name__ == "__main__":
    main()
