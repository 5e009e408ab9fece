"""An experimental rule for the adaptive budget (BENCHMARKS.md section 12): a group goes on while it may still reach
the update, not only while it may still be live.

The adaptive budget (`rollout_rounds`) continues a group while it may be live once complete, whether or not LZE's
selector would keep it: where most groups may be live (`carries`) it completes most of them, and the update uses
fewer than half. Here, after each round, each group's completed pass rate is drawn `DRAWS` times from the budget's
own Beta posterior (the prompt's EMA weighed `probe_prior_strength` rollouts, or the prior fitted to the batch for a
new prompt, then its rollouts so far); for each draw the completed batch's energies are computed as LZE computes
them, and a group goes on when in at least `rollout_live_threshold` of the draws it is live and among the top
`int(selection_ratio x groups)` by energy, the selector's quota. Same rounds, same selector, same settings as
`lze:rollout_rounds=2+4+8`; only the rule differs. One regime and seed per call, section 12's setting:

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
from lze_trl.demo import MeteredLZEGRPOTrainer, MethodSpec  # noqa: E402
from lze_trl.energy import compute_energy  # noqa: E402
from lze_trl.run import LZERun  # noqa: E402
from lze_trl.selection import pass_counts  # noqa: E402


ARM = "worth_rounds"
SETTING = {"selector": "lze", "rollout_rounds": [2, 4, 8]}
DRAWS = 256
STREAM = 0x3027  # seeds the draws apart from the selection's noise


def reach_probability(run: LZERun, prompt_ids: np.ndarray, correctness: np.ndarray, remaining: int) -> np.ndarray:
    """The probability that each group, completed with `remaining` more rollouts, is live and among the selector's
    quota of the batch's groups by energy (groups that stopped before stay as they are: all alike, never kept)."""
    args = run.args
    c = np.asarray(correctness, dtype=np.float64)
    going = ~np.isnan(c[:, -1])  # the groups of the last round
    successes, trials = pass_counts(c, run.args.pass_threshold)
    known = run.prompts.get(np.asarray(prompt_ids, dtype=np.int64))
    ema, initial = known["ema_pass_rate"], known["initial_pass_rate"]
    prior_a, prior_b = run.prior(prompt_ids, c)
    a, b = prior_a + successes, prior_b + trials - successes
    rng = np.random.default_rng([args.seed, run.batches_recorded, remaining, STREAM])
    drawn = rng.binomial(remaining, rng.beta(a, b, size=(DRAWS, len(c))))
    final = np.where(going, (successes + drawn) / (trials + remaining), successes / np.maximum(trials, 1))
    energy = compute_energy(
        final,
        np.where(np.isnan(initial), final, initial),
        np.where(np.isnan(ema), final, ema),
        d_init_min=args.energy_d_init_min,
        momentum_weight=args.energy_momentum_weight,
        momentum_mode=args.energy_momentum_mode,
        terms=args.energy_terms,
    )
    live = (final > 0) & (final < 1)
    energy = np.where(live, energy, -np.inf)
    quota = max(int(len(c) * args.selection_ratio), 1)
    kth = -np.sort(-energy, axis=1)[:, quota - 1 : quota]  # each draw's quota-th highest energy
    return (live & (energy >= kth)).mean(axis=0)


class WorthRoundsTrainer(MeteredLZEGRPOTrainer):
    """The adaptive budget whose groups go on while they may still reach the update (one process)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        run = self.lze
        run.live_probability = lambda ids, correctness, remaining: reach_probability(run, ids, correctness, remaining)


def main() -> None:
    run_one_arm(__doc__.split("\n\n")[0], MethodSpec(ARM, dict(SETTING), trainer_cls=WorthRoundsTrainer))


if __name__ == "__main__":
    main()
