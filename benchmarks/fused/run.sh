#!/usr/bin/env bash
# The fused-rounds benchmark (BENCHMARKS.md section 8): one (regime, seed) of GRPO and the fused probe per call, e.g.
#   bash benchmarks/fused/run.sh dead 0 OUT
# writes OUT/<regime>_s<seed>/ and gzips its demo_results.json (the committed raw result, under
# benchmarks/results/fused/runs/); report with python benchmarks/fused/report.py. The runs are those of
# benchmarks/adaptive/run.sh (240 steps, evaluation every 20, the task's warm start, the same regimes) with these
# arms. ARMS="..." runs those arms instead, e.g. the secondary serial arm:
#   ARMS="lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33,fuse_rounds=false" (committed as
#   runs/<regime>_s<seed>_serial/).
#
# Every regime and seed, two at a time (SEEDS from benchmarks/results/fused/power.md's "seeds per regime"):
#   SEEDS=19; for r in carries dead arithmetic; do for s in $(seq 0 $((SEEDS - 1))); do echo "$r $s"; done; done |
#     xargs -P 2 -L 1 bash -c 'bash benchmarks/fused/run.sh "$0" "$1" benchmarks/results/fused/runs'
# The committed runs are labelled as fused rounds were then, the default and uncorrected; since fused rounds are off
# by default and correct their stale rollouts (section 10), the same arm is spelled out here (the report reads the
# committed label: rerun at commit b3c23cc to add seeds to it).
set -euo pipefail
ARMS=${ARMS:-"grpo lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33,fuse_rounds=true,vllm_importance_sampling_correction=false"} \
  exec bash "$(dirname "$0")/../adaptive/run.sh" "$@"
