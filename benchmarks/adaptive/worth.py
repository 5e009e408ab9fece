"""An experimental rule for the adaptive budget (BENCHMARKS.md section 12): a group goes on while it may still reach
the update, not only while it may still be live.

The adaptive budget (`generation_rounds`) continues a group while it may be live once complete, whether or not LZE's
selector would keep it: where most groups may be live (`carries`) it completes most of them, and the update uses
fewer than half. Here, after each round, each group's completed pass rate is drawn `DRAWS` times from the budget's
own Beta posterior (the prompt's EMA weighed `history_prior_strength` rollouts, or the prior fitted to the batch for a
new prompt, then its rollouts so far); for each draw the completed batch's energies are computed as LZE computes
them, and a group goes on when in at least `learning_zone_threshold` of the draws it is live and among the top
`int(selection_ratio x groups)` by energy, the selector's quota. Same rounds, same selector, same settings as
`lze:generation_rounds=2+4+8`; only the rule differs. One regime and seed per call, section 12's setting:

    python benchmarks/adaptive/worth.py dead 0 benchmarks/results/adaptive/worth_runs

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
from lze_trl.method.energy import compute_energy  # noqa: E402
from lze_trl.method.round_policies import AdaptiveRounds, RoundsState, register_round_policy  # noqa: E402
from lze_trl.method.selection import pass_counts  # noqa: E402


ARM = "worth_rounds"
SETTING = {"selector": "lze", "generation_rounds": [2, 4, 8], "round_policy": "worth"}
DRAWS = 256
STREAM = 0x3027  # seeds the draws apart from the selection's noise


@register_round_policy
class WorthRounds(AdaptiveRounds):
    """The adaptive budget whose groups go on while they may still reach the update."""

    name = "worth"

    def learning_zone_probability(self, run: Any, state: RoundsState) -> np.ndarray:
        return reach_probability(self, run, state)


def reach_probability(policy: AdaptiveRounds, run: Any, state: RoundsState) -> np.ndarray:
    """The probability that each group, completed with the remaining rollouts, is live and among the selector's
    quota of the batch's groups by energy (groups that stopped before stay as they are: all alike, never kept)."""
    args, remaining = run.args, state.remaining
    c = np.asarray(state.correctness, dtype=np.float64)
    going = state.going_on
    successes, trials = pass_counts(c, args.pass_threshold)
    known = run.prompts.get(np.asarray(state.prompt_keys, dtype=np.int64))
    ema, initial = known["ema_pass_rate"], known["initial_pass_rate"]
    prior_a, prior_b = policy.prior(run, state)
    a, b = prior_a + successes, prior_b + trials - successes
    rng = np.random.default_rng([args.seed, run.batches_recorded, remaining, STREAM])
    drawn = rng.binomial(remaining, rng.beta(a, b, size=(DRAWS, len(c))))
    final = np.where(going, (successes + drawn) / (trials + remaining), successes / np.maximum(trials, 1))
    energy = compute_energy(
        final, np.where(np.isnan(initial), final, initial), np.where(np.isnan(ema), final, ema), **run.energy_kwargs
    )
    live = (final > 0) & (final < 1)
    energy = np.where(live, energy, -np.inf)
    quota = max(int(len(c) * args.selection_ratio), 1)
    kth = -np.sort(-energy, axis=1)[:, quota - 1 : quota]  # each draw's quota-th highest energy
    return (live & (energy >= kth)).mean(axis=0)


def main() -> None:
    run_one_arm(__doc__.split("\n\n")[0], MethodSpec(ARM, dict(SETTING)))


if __name__ == "__main__":
    main()
