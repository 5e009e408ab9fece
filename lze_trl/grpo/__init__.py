"""The doors to TRL's `GRPOTrainer`: [`LZEGRPOTrainer`], its config, sampler and checkpoint state, and the one module
that reaches into TRL's `_generate_and_score_completions`."""
