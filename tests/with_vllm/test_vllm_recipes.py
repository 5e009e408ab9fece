"""
Every recipe that generates with vLLM colocate runs for 2 steps through `lze-trl grpo --config <recipe>`, with the
tiny local model, the dataset kind's local fixture, and CPU-sized batches and lengths substituted on the command
line (which overrides the YAML); every other setting of the recipe is used as written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from testing_utils import restored_environ
from vllm_cpu import on_cpu, save_tiny_model

from lze_trl.commands.grpo import make_parser, train


pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "math"
FIXTURE = {"gsm8k": "gsm8k.jsonl", "math": "hendrycks_math.jsonl", "dapo_math": "dapo_math.jsonl"}
COLOCATE = sorted(
    path
    for path in (ROOT / "recipes").rglob("*.yaml")
    if path.parent.name not in ("accelerate", "eval")
    and (raw := yaml.safe_load(path.read_text())).get("use_vllm")
    and raw.get("vllm_mode") == "colocate"
)
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}answer: {% endif %}"
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("vllm-recipe-model")
    save_tiny_model(path, chat_template=CHAT_TEMPLATE, max_position_embeddings=1024)  # math prompts: ~500 chars
    return str(path)


@pytest.fixture(autouse=True)
def restore_environ():
    """The CLI exports a recipe's `env:` block and TRL sets the distributed variables for vLLM."""
    with restored_environ():
        yield


def test_some_recipes_use_vllm_colocate():
    assert len(COLOCATE) >= 16


@pytest.mark.parametrize("path", COLOCATE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_colocate_recipe_runs_two_steps(tmp_path, model_dir, path):
    raw = yaml.safe_load(path.read_text())
    out = tmp_path / "run"
    flags = [
        "--model_name_or_path", model_dir,
        "--dataset_name", str(FIXTURES / FIXTURE[raw["dataset_name"]]),
        "--dataset_kind", raw["dataset_name"],
        "--output_dir", str(out),
        "--max_steps", "2",
        "--generation_batch_size", "16",  # 2 prompts x 8 rollouts per generation, one optimizer step each
        "--per_device_train_batch_size", "8",
        "--gradient_accumulation_steps", "2",
        "--max_completion_length", "8",
        "--vllm_max_model_length", "1024",
        "--save_strategy", "no",
        "--logging_steps", "1",
        "--report_to", "none",
        "--disable_tqdm", "true",
    ]  # fmt: skip
    if on_cpu():
        # vLLM's CPU build rejects sleep mode ("Sleep mode is not supported on current platform").
        flags += ["--use_cpu", "true", "--vllm_enable_sleep_mode", "false"]
    parsed = make_parser().parse_args_and_config(["--config", str(path), *flags])  # as `lze-trl grpo` does
    trainer = train(*parsed)
    assert trainer.vllm_generation.mode == "colocate" and trainer.state.global_step == 2
    args = trainer.args
    for key in ("selector", "loss_type", "scale_rewards", "beta", "temperature", "num_generations"):
        assert getattr(args, key) == raw[key], key
    log = trainer.selection_log.to_pandas()
    assert len(log) == 2 * 2 and log["batch"].nunique() == 2  # two generations of 2 groups
    if raw["selector"] == "none":
        assert log["selected"].all()
    saved = "adapter_model.safetensors" if raw.get("use_peft") else "model.safetensors"
    assert (out / saved).is_file() and (out / "lze_prompts.parquet").is_file()
