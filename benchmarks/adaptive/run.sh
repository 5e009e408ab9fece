#!/usr/bin/env bash
# The runs of BENCHMARKS.md sections 1-3: one (regime, seed) per call, e.g.
#   bash benchmarks/adaptive/run.sh dead 0 OUT
# writes OUT/<regime>_s<seed>/ (python benchmarks/bench.py train) and gzips its demo_results.json (the committed raw
# result); report with python benchmarks/adaptive/report.py. Every arm: 240 steps, evaluation every 20, the task's warm start.
# The committed runs also hold the probe (`lze:probe_generations=2,selection_ratio=0.33`) and the adaptive budget
# (`lze:rollout_rounds=2+4+8`): they left the library with BENCHMARKS.md section 15's verdict, and ran with this
# script at commit 11e6ad3. GRPO's frontier and LZE run here as they did then.
set -euo pipefail
regime=$1 seed=$2 out=$3
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
BENCH=${BENCH:-benchmarks/bench.py}
arms=(grpo "grpo:per_device_train_batch_size=256" "grpo:per_device_train_batch_size=128"
  "grpo:num_generations=4,per_device_train_batch_size=256" "grpo:num_generations=2,per_device_train_batch_size=128"
  lze)
if [[ -n ${ARMS:-} ]]; then read -ra arms <<<"$ARMS"; fi  # e.g. ARMS="lze": those arms only
case $regime in
  dead) task=(--demo train_levels=0,0,1,2,6,6 --demo test_levels=1,2) ;;  # the dead-mass regime
  carries) task=() ;;
  arithmetic) task=(--demo task=arithmetic) ;;
  solved) task=(--demo train_levels=0,0,3,3,1,2 --demo test_levels=1,2) ;;  # most prompts soon solved (section 10)
  *) echo "regime: dead, carries, arithmetic or solved" >&2; exit 2 ;;
esac
$PY "$BENCH" train --steps 240 --eval_steps 20 --seeds "$seed" "${task[@]}" --selectors "${arms[@]}" \
  --output_dir "$out/${regime}_s$seed"
gzip -f "$out/${regime}_s$seed/seed_$seed/demo_results.json"
rm -rf "$out/${regime}_s$seed/seed_$seed/runs"
