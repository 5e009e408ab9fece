#!/bin/bash
# Historical: as run on 2026-11-24 with that session's paths and code (commit 2d04387 / c5218b2). The setting
# generation_selection was removed at 87343e0; the experimental modes are now in benchmarks/experimental.
# Replay settings beyond the first benchmark's one: fresh_fraction 0.5, and 0.25 with more reuse and staleness.
# carries task, 120 steps, evaluations every 20; seeds given as arguments, one after another
cd /tmp/bench_tree
for s in "$@"; do
  PYTHONPATH=/tmp/bench_tree nice -n 10 /work/main/.venv/bin/python benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds $s \
    --selectors "lze:fresh_fraction=0.5" "lze:fresh_fraction=0.25,replay_max_uses=4,replay_max_staleness=8" \
    --output_dir /tmp/rb/sweep_s$s > /tmp/rb/sweep_s$s.log 2>&1
done
