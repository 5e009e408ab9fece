"""Every private name of TRL's `GRPOTrainer` / `GRPOConfig` (and transformers' `Trainer` / `TrainingArguments`) that
lze-trl uses or overrides.

Private names carry no promise across releases; this list is the whole of lze-trl's exposure to them, and
`tests/test_trl_coupling.py` fails when the installed TRL lacks one of them, changes how it is called, or when the
package starts using one that is not listed here (as a method, an attribute, a class attribute or an import).
"""

PRIVATE_NAMES: dict[str, str] = {
    "_generate_and_score_completions": "overridden to run LZE's step (which calls TRL's own for each generation); "
    "metered by the demo",
    "_calculate_rewards": "overridden to hand the gathered rewards to the step (`step.RewardTap`)",
    "_get_train_sampler": "overridden to return LZERepeatSampler",
    "_generate": "overridden to serve a probe's rollouts again in their completed group (`probe.RolloutCache`); the "
    "rollouts it really generates go through `LZEGRPOTrainer.generate_rollouts` (metered by the demo)",
    "_metrics": "the per-step metric lists that TRL's `log` averages: the `lze/` metrics are appended to them",
    "_step": "TRL's micro-step counter that paces generation: saved with the LZE state and restored on resume",
    "_load_rng_state": "transformers' RNG restore, redone after a resumed sampler's first draw (exact resume)",
    "_tag_names": "class attribute: the model card's tags, as TRL's trainers set them",
    "_name": "class attribute: the trainer's name on the model card, as TRL's trainers set it",
    "_paper": "class attribute: the paper cited on the model card, as TRL's trainers set it",
    "_VALID_DICT_FIELDS": "GRPOConfig's class attribute listing the fields parsed from a JSON string: "
    "`selector_kwargs` joins it",
}
"""Private name -> what lze-trl does with it."""
