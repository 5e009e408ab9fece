#!/bin/bash
# Historical: as run on 2026-11-24 with that session's paths and code (commit 2d04387 / c5218b2). The setting
# generation_selection was removed at 87343e0; the experimental modes are now in benchmarks/experimental.
# Regime A: carries task, 120 steps, evaluations every 20; seeds given as arguments, one after another
cd /tmp/bench_tree
for s in "$@"; do
  PYTHONPATH=/tmp/bench_tree /work/main/.venv/bin/python benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds $s \
    --selectors grpo "grpo:per_device_train_batch_size=256" "grpo:per_device_train_batch_size=128" lze \
    "lze:fresh_fraction=0.25" "lze:fresh_fraction=0.25,generation_selection=thompson" "uniform_live:fresh_fraction=0.25" \
    --output_dir /tmp/rb/carries_s$s > /tmp/rb/carries_s$s.log 2>&1
done
