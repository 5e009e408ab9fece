#!/usr/bin/env bash
# The stale-rollouts benchmark (BENCHMARKS.md section 10): one (regime, seed) of its arms per call, e.g.
#   bash benchmarks/stale_rollouts/run.sh solved 0 OUT
# writes OUT/<regime>_s<seed>/ and gzips its demo_results.json; the runs are those of benchmarks/adaptive/run.sh
# (240 steps, evaluation every 20, the task's warm start; regimes carries, dead, arithmetic, solved) with the arms
# below (ARMS="..." for others). fuse_rounds and the correction are spelled out in every label, so a label means the
# same whatever the defaults: vllm_importance_sampling_correction=false is the uncorrected fused mode.
#
# Every regime and seed, two at a time:
#   for r in carries dead arithmetic solved; do for s in $(seq 0 13); do echo "$r $s"; done; done |
#     xargs -P 2 -L 1 bash -c 'bash benchmarks/stale_rollouts/run.sh "$0" "$1" benchmarks/results/stale_rollouts/runs'
set -euo pipefail
PROBE="lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33"
ADAPTIVE="lze:generation_rounds=2+4+8,round_policy=adaptive"
ARMS=${ARMS:-"$PROBE,fuse_rounds=false $PROBE,fuse_rounds=true,vllm_importance_sampling_correction=true"} \
  exec bash "$(dirname "$0")/../adaptive/run.sh" "$@"
