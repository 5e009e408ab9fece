#!/usr/bin/env bash
# Run TRL's own GRPOTrainer tests (tests/test_grpo_trainer.py of the installed TRL version) offline, once per mode:
# stock `trl.GRPOTrainer`, `LZEGRPOTrainer` with selector="none", and `LZEGRPOTrainer` with the LZE selector.
#
#   tests/trl_suite/run.sh [pytest args...]       e.g. -k "entropy_mask or prepare_input"
#
# Environment:
#   PY              the Python to use (default .venv/bin/python)
#   MODES           the modes to run (default "stock none lze")
#   TRL_TESTS_DIR   a folder holding TRL's tests/ files for the installed version; without it they are downloaded
#                   from GitHub at the tag v<version> (the PyPI sdist prunes tests/)
#   SUITE           "fast" (default: the tests that train no model plus a few that do, see FAST below) or "all"
#   WORK            scratch folder (default a new temp folder); the offline Hub cache is built there once
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PY:-$PWD/.venv/bin/python}"
MODES="${MODES:-stock none lze}"
SUITE="${SUITE:-fast}"
WORK="${WORK:-$(mktemp -d)}"
VERSION="$("$PY" -c "import trl; print(trl.__version__)")"
FILES="__init__.py conftest.py testing_utils.py testing_constants.py test_grpo_trainer.py"

mkdir -p "$WORK/trl/tests"
for f in $FILES; do
  if [ -n "${TRL_TESTS_DIR:-}" ]; then cp "$TRL_TESTS_DIR/$f" "$WORK/trl/tests/$f"
  else curl -fsSL "https://raw.githubusercontent.com/huggingface/trl/v$VERSION/tests/$f" -o "$WORK/trl/tests/$f"; fi
done

export HF_HOME="$WORK/hf" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=offline
"$PY" "$HERE/build_hub.py" "$HF_HOME" >"$WORK/build_hub.log" 2>&1 || { cat "$WORK/build_hub.log"; exit 1; }

# Deselected, with the reason: what the offline cache cannot stand in for.
DESELECT=(
  # image processors and the zen-image datasets are not built
  --deselect tests/test_grpo_trainer.py::TestGRPOTrainerVLM
  # remote code (trust_remote_code) and the hybrid Mamba architecture are not built
  --deselect "tests/test_grpo_trainer.py::TestGRPOTrainer::test_trust_remote_code"
  --deselect "tests/test_grpo_trainer.py::TestGRPOTrainer::test_train[trl-internal-testing/tiny-NemotronHForCausalLM-nano]"
)
# The fast suite (a mode of the whole file takes over an hour on 2 shared cores, ~50 s a training test): every test
# that trains no model, and four training tests: a dataset format, None rewards (all and some), the sampler's batches.
T=tests/test_grpo_trainer.py
FAST=("$T::TestGetHighEntropyMask" "$T::TestGRPORolloutDispatch" "$T::TestTransformersContinuousBatchingContract")
for name in init_minimal init_with_eval_dataset get_off_policy_mask get_off_policy_mask_padding \
  mismatched_reward_processing_classes_length correct_reward_processing_classes_list \
  single_reward_model_with_single_processing_class no_reward_source_raises dataset_required_without_environment \
  "train_dataset_format[standard_prompt_only]" warning_raised_all_rewards_none \
  train_multiple_reward_funcs_with_None_output prepare_input_called_with_correct_data; do
  FAST+=("$T::TestGRPOTrainer::test_$name")
done
[ "$SUITE" = all ] && FAST=("$T")

status=0
for mode in $MODES; do
  start=$(date +%s)
  (cd "$WORK/trl" && LZE_TRL_SUITE_MODE="$mode" "$PY" -m pytest -c "$HERE/pytest.ini" --rootdir . -p swap_trainer \
    -p no:randomly -p no:cacheprovider -q -rfEs "${DESELECT[@]}" "${FAST[@]}" "$@" \
    --junitxml "$WORK/$mode.xml" >"$WORK/$mode.log" 2>&1) || status=1
  echo "mode $mode: $(tail -1 "$WORK/$mode.log") [$(( $(date +%s) - start ))s wall] log: $WORK/$mode.log"
done
exit $status
