#!/bin/bash
# Historical: as run on 2026-11-24 with that session's paths and code (commit 2d04387 / c5218b2). The setting
# generation_selection was removed at 87343e0; the experimental modes are now in benchmarks/experimental.
# Regime B: arithmetic task (high dead share), 80 steps, evaluations every 10; seeds given as arguments
cd /tmp/bench_tree
for s in "$@"; do
  PYTHONPATH=/tmp/bench_tree /work/main/.venv/bin/python benchmarks/bench.py train --demo task=arithmetic --steps 80 --eval_steps 10 --seeds $s \
    --selectors grpo "grpo:per_device_train_batch_size=256" "grpo:per_device_train_batch_size=128" lze \
    "lze:fresh_fraction=0.25" "lze:fresh_fraction=0.25,generation_selection=thompson" "uniform_live:fresh_fraction=0.25" lze+rollout \
    --output_dir /tmp/rb/arith_s$s > /tmp/rb/arith_s$s.log 2>&1
done
