#!/bin/bash
# Historical: as run on 2026-11-24 with that session's paths and code (commit 2d04387 / c5218b2). The setting
# generation_selection was removed at 87343e0; the experimental modes are now in benchmarks/experimental.
# Learning-rate check of the batch-size controls (carries, 120 steps): GRPO at half and a quarter of the batch with
# 2x and 4x the learning rate (the default is 1e-4); seeds given as arguments
cd /tmp/bench_tree
for s in "$@"; do
  PYTHONPATH=/tmp/bench_tree /work/main/.venv/bin/python benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds $s \
    --selectors "grpo:per_device_train_batch_size=128,learning_rate=2e-4" "grpo:per_device_train_batch_size=128,learning_rate=4e-4" \
    "grpo:per_device_train_batch_size=256,learning_rate=2e-4" \
    --output_dir /tmp/rb/lr_s$s > /tmp/rb/lr_s$s.log 2>&1
done
