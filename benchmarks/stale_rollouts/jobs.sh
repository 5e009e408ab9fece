#!/usr/bin/env bash
# The runs of BENCHMARKS.md section 10's test, one line per (regime, seed): "regime seed arm [arm ...]" (the seed
# counts of benchmarks/results/stale_rollouts/power.md; protocol.md beside it has the command that runs them).
P="lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33"
A="lze:generation_rounds=2+4+8,round_policy=adaptive"
FUSED="fuse_rounds=true,vllm_importance_sampling_correction=true"
for s in $(seq 0 12); do echo "carries $s $P,$FUSED"; done
for s in $(seq 0 8); do echo "dead $s $P,$FUSED"; done
for s in $(seq 0 7); do echo "arithmetic $s $P,$FUSED"; done
for s in $(seq 0 4); do echo "solved $s $P,$FUSED $A,$FUSED"; done
for s in $(seq 5 22); do echo "solved $s $P,fuse_rounds=false $P,$FUSED"; done
