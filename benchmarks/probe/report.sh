#!/usr/bin/env bash
# The reports of BENCHMARKS.md section 10, rebuilt from the committed per-seed results
# (benchmarks/results/probe/runs/<regime>_s<seed>/seed_<seed>/demo_results.json.gz, written by run.sh):
#   bash benchmarks/probe/report.sh [RUNS]
# writes benchmarks/results/probe/{dead,carries,arithmetic,anchor}/ (report.md, report.json, figure).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
runs=${1:-benchmarks/results/probe/runs}
if [ ! -d "$runs" ]; then
  echo "$runs: no per-seed results. Section 10's runs were never committed (they are lost), so its reports cannot be" \
    "rebuilt from a clone; rerun them with benchmarks/probe/run.sh, or see section 12, which re-measures the probe" \
    "at 240 steps with its raw results in git (python benchmarks/adaptive/report.py)." >&2
  exit 2
fi
out=benchmarks/results/probe
seeds=(0 1 2 3 4)
frontier=("grpo:per_device_train_batch_size=256" "grpo:per_device_train_batch_size=128"
  "grpo:num_generations=4,per_device_train_batch_size=256" "grpo:num_generations=2,per_device_train_batch_size=128")
folders() { for name in "$@"; do for s in "${seeds[@]}"; do echo "$runs/${name}_s$s"; done; done; }
report() { $PY benchmarks/frontier/report.py "$@" --baseline grpo; }
# shellcheck disable=SC2046  # one folder per word
report $(folders dead dead_more dead_half) --controls "${frontier[@]}" \
  "grpo:per_device_train_batch_size=256,learning_rate=2e-4" \
  "grpo:num_generations=4,per_device_train_batch_size=256,learning_rate=2e-4" --output "$out/dead"
# shellcheck disable=SC2046
report $(folders carries carries_more carries_half carries_filter) --controls "${frontier[@]}" --output "$out/carries"
# shellcheck disable=SC2046
report $(folders arithmetic arithmetic_half arithmetic_filter) --controls "${frontier[@]}" --output "$out/arithmetic"
# shellcheck disable=SC2046
report $(folders anchor) --output "$out/anchor"
for regime in dead carries arithmetic anchor; do  # accuracy against rollouts, GRPO's frontier as lines (frontier.png)
  $PY benchmarks/probe/frontier_plot.py "$out/$regime/report.json" --title "$regime"
done
