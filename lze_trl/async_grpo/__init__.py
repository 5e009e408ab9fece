"""On TRL's experimental async GRPO (>= 1.16): [`LZEAsyncGRPOTrainer`], its window of generation batches in flight,
the rollout worker and the CPU stand-ins."""
