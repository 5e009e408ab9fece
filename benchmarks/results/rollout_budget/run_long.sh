#!/bin/bash
# Historical: as run on 2026-11-24 with that session's paths and code (commit 2d04387 / c5218b2). The setting
# generation_selection was removed at 87343e0; the experimental modes are now in benchmarks/experimental.
# Regime A, long budget: the quarter-fresh arms (and GRPO at half batch) for 240 steps, so that they can spend up to
# half (quarter arms) or all (half batch) of GRPO's 120-step rollouts; seeds given as arguments
cd /tmp/bench_tree
for s in "$@"; do
  PYTHONPATH=/tmp/bench_tree /work/main/.venv/bin/python benchmarks/bench.py train --steps 240 --eval_steps 20 --seeds $s \
    --selectors "grpo:per_device_train_batch_size=128" "grpo:per_device_train_batch_size=256" \
    "lze:fresh_fraction=0.25" "uniform_live:fresh_fraction=0.25" \
    --output_dir /tmp/rb/long_s$s > /tmp/rb/long_s$s.log 2>&1
done
