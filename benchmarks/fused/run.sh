#!/usr/bin/env bash
# The fused-rounds benchmark (BENCHMARKS.md section 8): one (regime, seed) of GRPO and the fused probe per call, e.g.
#   bash benchmarks/fused/run.sh dead 0 OUT
# writes OUT/<regime>_s<seed>/ (python benchmarks/bench.py train) and gzips its demo_results.json (the committed raw
# result, under benchmarks/results/fused/runs/); report with python benchmarks/fused/report.py. Every arm: 240 steps,
# evaluation every 20, the task's warm start, as benchmarks/adaptive/run.sh. ARMS="..." runs those arms only, e.g. the
# secondary serial arm: ARMS="lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33,fuse_rounds=false".
#
# Every regime and seed, two at a time (SEEDS from benchmarks/results/fused/power.md's "seeds per regime"):
#   SEEDS=19; for r in carries dead arithmetic; do for s in $(seq 0 $((SEEDS - 1))); do echo "$r $s"; done; done |
#     xargs -P 2 -L 1 bash -c 'bash benchmarks/fused/run.sh "$0" "$1" benchmarks/results/fused/runs'
set -euo pipefail
regime=$1 seed=$2 out=$3
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
arms=(grpo "lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33")  # fuse_rounds defaults to True
if [[ -n ${ARMS:-} ]]; then read -ra arms <<<"$ARMS"; fi
case $regime in
  dead) task=(--demo train_levels=0,0,1,2,6,6 --demo test_levels=1,2) ;;  # the dead-mass regime
  carries) task=() ;;
  arithmetic) task=(--demo task=arithmetic) ;;
  *) echo "regime: dead, carries or arithmetic" >&2; exit 2 ;;
esac
$PY benchmarks/bench.py train --steps 240 --eval_steps 20 --seeds "$seed" "${task[@]}" --selectors "${arms[@]}" \
  --output_dir "$out/${regime}_s$seed"
gzip -f "$out/${regime}_s$seed/seed_$seed/demo_results.json"
rm -rf "$out/${regime}_s$seed/seed_$seed/runs"
