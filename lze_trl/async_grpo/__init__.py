"""On TRL's experimental async GRPO (the TRL of `common.coupling.ASYNC_TRL`): [`LZEAsyncGRPOTrainer`], its window of
generation batches in flight, the rollout worker and the CPU stand-ins."""
