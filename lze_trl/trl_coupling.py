"""Every private name of TRL's `GRPOTrainer` / `GRPOConfig` (and transformers' `Trainer` / `TrainingArguments`) that
lze-trl uses or overrides.

Private names carry no promise across releases; this list is the whole of lze-trl's exposure to them, and
`tests/test_trl_coupling.py` fails when the installed TRL lacks one of them, changes how it is called, or when the
package starts using one that is not listed here (as a method, an attribute, a class attribute or an import).
"""

PRIVATE_NAMES: dict[str, str] = {
    "_generate_and_score_completions": "overridden to run a generation batch (`generation_batch.py`); called for "
    "each generation round (stopped right after `_generate`: TRL prepares the prompts inside it, and has no separate "
    "hook for that) and once for the update rows (`docs/upstream/score-generated-rollouts.md`); timed by the demo",
    "_generate": "overridden to stop a generation round after generating, and to return rollouts generated before "
    "instead of generating them again (TRL calls it once per `_generate_and_score_completions`, with the prompts in "
    "input order: checked on every served call); its 8-part result is pinned in `rollouts.GENERATED_PARTS`; the demo "
    "counts the rollouts it really generates",
    "_calculate_rewards": "called once per generation round (each rollout rewarded once), overridden to return those "
    "rewards for served rollouts, and to keep the rewards of a batch TRL generates itself",
    "_pending_extra_logs": "what reward functions log with `log_extra` during a generation round, kept with the "
    "rows it describes and handed back, in the update rows' order, before TRL's call that logs them",
    "_get_per_token_logps_and_entropies": "TRL's forward of the policy: called (no gradient) right after a fused "
    "round that will be trained after an optimizer step, to record the log-probabilities it was sampled with where "
    "the backend returns none, and on those rows' update to get the current policy's (`off_policy.py`)",
    "_get_train_sampler": "overridden to return LZERepeatSampler",
    "_metrics": "the per-step metric lists that TRL's `log` averages: the `lze/` metrics are appended to them",
    "_step": "TRL's micro-step counter that paces generation: saved with the LZE state and restored on resume",
    "_load_rng_state": "transformers' RNG restore, redone after a resumed sampler's first draw (exact resume)",
    "_tag_names": "class attribute: the model card's tags, as TRL's trainers set them",
    "_name": "class attribute: the trainer's name on the model card, as TRL's trainers set it",
    "_paper": "class attribute: the paper cited on the model card, as TRL's trainers set it",
    "_AsyncRolloutLoop": "TRL's async rollout loop (experimental async GRPO), subclassed by LZE's worker loop "
    "(`async_worker.py`), whose own generation loop follows TRL's `_generate_loop`; what it uses of the class is "
    "pinned in `tests/test_async_lze.py`",
    "_standalone_tools": "read by LZE's async worker loop: the tools TRL's async loop gives each rollout",
}
"""Private name -> what lze-trl does with it."""
