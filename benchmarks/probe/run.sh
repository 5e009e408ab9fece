#!/usr/bin/env bash
# The probe-then-complete benchmark (BENCHMARKS.md section 10): one (regime, seed) per call, e.g.
#   bash benchmarks/probe/run.sh dead 0 OUT
# writes OUT/<regime>_s<seed>/ (python benchmarks/bench.py train); report with benchmarks/frontier/report.py.
# Section 10's rollout-filter and DAPO-refill arms (`lze+rollout`, `dapo:dapo_max_resample=2`, the `filter` regime)
# ran with the plugins at commit 77000d9; they left the repository with issue #33.
set -euo pipefail
regime=$1 seed=$2 out=$3
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
frontier=(grpo "grpo:per_device_train_batch_size=256" "grpo:per_device_train_batch_size=128"
  "grpo:num_generations=4,per_device_train_batch_size=256" "grpo:num_generations=2,per_device_train_batch_size=128")
probe="lze:probe_generations=2,selection_ratio=0.33"  # 8 prompts' probes + 21 completed groups: 0.496x the rollouts
case $regime in
  dead)  # carries' dead-mass regime: a third of the prompts soon always solved, a third never, test on the learnable
    $PY benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds "$seed" \
      --demo train_levels=0,0,1,2,6,6 --demo test_levels=1,2 \
      --selectors "${frontier[@]}" "grpo:per_device_train_batch_size=256,learning_rate=2e-4" \
      "grpo:num_generations=4,per_device_train_batch_size=256,learning_rate=2e-4" lze "$probe" \
      "lze:probe_generations=2,selection_ratio=0.33,probe_prior_strength=0" \
      "uniform_live:probe_generations=2,selection_ratio=0.33" \
      --output_dir "$out/dead_s$seed" ;;
  carries)
    $PY benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds "$seed" \
      --selectors "${frontier[@]}" lze "$probe" "lze:probe_generations=2" --output_dir "$out/carries_s$seed" ;;
  arithmetic)
    $PY benchmarks/bench.py train --demo task=arithmetic --steps 80 --eval_steps 10 --seeds "$seed" \
      --selectors "${frontier[@]}" lze "$probe" --output_dir "$out/arithmetic_s$seed" ;;
  dead-more)  # LZE on GRPO's fewer-rollouts point (64 prompts x 4), and the probe at the default quota (0.54x)
    $PY benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds "$seed" \
      --demo train_levels=0,0,1,2,6,6 --demo test_levels=1,2 \
      --selectors "lze:num_generations=4,per_device_train_batch_size=256" "lze:probe_generations=2" \
      --output_dir "$out/dead_more_s$seed" ;;
  carries-more)
    $PY benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds "$seed" \
      --selectors "lze:num_generations=4,per_device_train_batch_size=256" --output_dir "$out/carries_more_s$seed" ;;
  anchor)  # the hand-tried regime of issue #28 (levels 1, 2, 6, 6, 6): LZE with and without its difficulty anchor
    $PY benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds "$seed" \
      --demo train_levels=1,2,6,6,6 --demo test_levels=1,2 \
      --selectors grpo lze "lze:energy_terms=uncertainty+momentum" --output_dir "$out/anchor_s$seed" ;;
  probe-half)  # the probe completing half of the prompts (0.625x GRPO's rollouts), in all three regimes
    half="lze:probe_generations=2,selection_ratio=0.5"
    $PY benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds "$seed" \
      --demo train_levels=0,0,1,2,6,6 --demo test_levels=1,2 --selectors "$half" --output_dir "$out/dead_half_s$seed"
    $PY benchmarks/bench.py train --steps 120 --eval_steps 20 --seeds "$seed" \
      --selectors "$half" --output_dir "$out/carries_half_s$seed"
    $PY benchmarks/bench.py train --demo task=arithmetic --steps 80 --eval_steps 10 --seeds "$seed" \
      --selectors "$half" --output_dir "$out/arithmetic_half_s$seed" ;;
  *) echo "regime: dead, carries, arithmetic, dead-more, carries-more, anchor or probe-half" >&2; exit 2 ;;
esac
