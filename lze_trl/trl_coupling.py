"""Every private name of TRL's `GRPOTrainer` (and transformers' `Trainer`) that lze-trl uses or overrides.

Private names carry no promise across releases; this list is the whole of lze-trl's exposure to them, and
`tests/test_trl_coupling.py` fails when the installed TRL lacks one of them, changes how it is called, or when the
package starts using one that is not listed here.
"""

PRIVATE_NAMES: dict[str, str] = {
    "_generate_and_score_completions": "overridden by the trainer (scoring and selection after GRPO's own) and the "
    "demo's meter; called for refill rounds",
    "_calculate_rewards": "overridden to hand the gathered rewards to the LZE state",
    "_get_train_sampler": "overridden to return LZERepeatSampler",
    "_generate": "metered by the demo (rollout tokens and time)",
    "_metrics": "the per-step metric lists that TRL's `log` averages: the `lze/` metrics are appended to them",
    "_step": "TRL's micro-step counter that paces generation: restored on resume",
    "_load_rng_state": "transformers' RNG restore, redone after the resumed sampler's first draw (exact resume)",
    "_get_per_token_logps_and_entropies": "rollout replay (experimental): the log-probabilities of the policy that "
    "generated a group, recorded for its replay, and the importance ratios of the replayed tokens",
}
"""Private name -> what lze-trl does with it."""
