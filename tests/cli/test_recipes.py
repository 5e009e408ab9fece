"""Every recipe parses with `lze-trl grpo`'s own parser, says how to launch it, and has a consistent batch layout."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
import torch
import yaml
from accelerate.commands.config.config_args import ClusterConfig
from testing_utils import restored_environ

from lze_examples.commands.eval import make_parser as make_eval_parser
from lze_trl.commands import UsageError, parse_args, recipe_path
from lze_trl.commands.grpo import RECIPE_PATHS, make_parser
from lze_trl.grpo.config import LZE_FIELDS


ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
TRAINING = sorted(p for p in RECIPES.rglob("*.yaml") if p.parent.name not in ("accelerate", "eval"))
ACCELERATE = sorted((RECIPES / "accelerate").glob("*.yaml"))
EVALUATION = sorted((RECIPES / "eval").glob("*.yaml"))
MAIN = [p for p in TRAINING if p.parent.name not in ("variants", "cpu")]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.fixture(autouse=True)
def restore_environ():
    """`parse_args_and_config` exports a recipe's `env:` block; keep the test process clean."""
    with restored_environ():
        yield


def parse(path: Path, *extra: str):
    """Parses a recipe as `lze-trl grpo --config <path>` does; on a machine without a bf16 GPU, on the CPU.

    GRPOConfig defaults to (and the recipes set) `bf16: true`, which `TrainingArguments.__post_init__` rejects
    without a bf16-capable GPU unless `use_cpu` is set. Appending `--use_cpu true` changes only the device: every
    other field is still parsed, type-converted and validated by the config classes' `__post_init__`.
    """
    args = ["--config", str(path), *extra]
    if not (torch.cuda.is_available() and torch.cuda.is_bf16_supported()):
        args += ["--use_cpu", "true"]
    return make_parser().parse_args_and_config(args)  # fail_with_unknown_args: an unknown key raises


def same(parsed, value) -> bool:
    """A parsed value equals the YAML one, up to the normalisation of `__post_init__` (enums, `report_to`)."""
    parsed = getattr(parsed, "value", parsed)  # ExplicitEnum fields (optim, lr_scheduler_type, save_strategy)
    if value == "none" and parsed == []:  # report_to
        return True
    return parsed == value


def header(path: Path, key: str) -> list[str]:
    """Values of the `# Key: ...` comment lines at the top of a recipe."""
    values = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(f"# {key}:"):
            values.append(line.split(":", 1)[1].strip())
    return values


def test_recipes_exist():
    assert len(MAIN) >= 16 and len(TRAINING) > len(MAIN)
    assert {p.name for p in ACCELERATE} >= {"ddp.yaml", "zero3.yaml", "fsdp.yaml", "multinode-zero3.yaml"}


@pytest.mark.parametrize("path", TRAINING, ids=rel)
def test_recipe_parses_and_sets_its_values(path):
    script_args, training_args, model_args, _ = parse(path)
    raw = yaml.safe_load(path.read_text())
    parsed = {**vars(script_args), **vars(model_args), **vars(training_args)}
    for key, value in raw.items():
        assert same(parsed[key], value), f"{key}: {parsed[key]!r} != {value!r}"
    assert model_args.model_name_or_path
    cpu = path.parent.name == "cpu"  # the offline CPU recipe: the embedded task and its reward
    cpu_rewards = ("lze_examples.tasks.arithmetic_reward", "lze_examples.tasks.word_problems.word_problem_reward")
    assert script_args.reward_funcs[0] in (cpu_rewards if cpu else ("math_accuracy",))


@pytest.mark.parametrize("path", TRAINING, ids=rel)
def test_recipe_header_and_batch_layout(path):
    assert header(path, "Hardware"), "state the hardware assumption in a `# Hardware:` comment"
    launches = header(path, "Launch")
    assert launches, "say how to launch the recipe in a `# Launch:` comment"
    train_launch = [
        shlex.split(line.split(")", 1)[-1])
        for line in launches
        if "lze_trl.cli grpo" in line or "lze-trl grpo" in line
    ]
    assert train_launch
    _, args, _, _ = parse(path)
    for tokens in train_launch:
        assert tokens[tokens.index("--config") + 1] == rel(path)
        if "--config_file" in tokens:
            config = ROOT / tokens[tokens.index("--config_file") + 1]
            world = ClusterConfig.from_yaml_file(str(config)).num_processes
            if "--num_processes" in tokens:
                world = int(tokens[tokens.index("--num_processes") + 1])
        else:
            assert tokens[0] == "lze-trl"
            world = 1
        micro = args.per_device_train_batch_size * world
        assert args.generation_batch_size % micro == 0, "the generation batch must split into micro-batches"
        steps_per_generation = args.generation_batch_size // micro
        assert steps_per_generation % args.gradient_accumulation_steps == 0, "whole optimizer steps per generation"
        assert args.generation_batch_size % args.num_generations == 0
        assert (micro * args.gradient_accumulation_steps) % args.num_generations == 0, "whole groups per update"


@pytest.mark.parametrize("path", MAIN, ids=rel)
def test_main_recipes_follow_the_paper(path):
    script_args, args, model_args, _ = parse(path)
    model = model_args.model_name_or_path
    qwen3 = model.startswith("Qwen/Qwen3-")
    assert args.num_generations == 8
    assert args.temperature == 1.0 and args.top_p == 1.0
    assert args.beta == 0.0 and args.scale_rewards == "none"
    assert args.learning_rate == 2e-6 and args.optim.value.startswith("adamw")
    size = float(model.split("-")[-1].rstrip("B"))
    assert args.generation_batch_size // args.num_generations == (1024 if size < 4 else 512)
    assert args.max_completion_length == (16384 if qwen3 else 4096)
    if qwen3:
        assert args.chat_template_kwargs == {"enable_thinking": True}
    assert args.use_vllm and args.vllm_mode == "colocate"
    assert script_args.dataset_name in ("gsm8k", "math", "dapo_math")
    assert args.selector == ("lze" if path.stem.endswith("-lze") else "none")
    if args.selector == "lze":
        assert args.selection_ratio == 0.4


@pytest.mark.parametrize("path", [p for p in MAIN if p.stem.endswith("-lze")], ids=rel)
def test_lze_recipe_and_its_baseline_differ_only_in_the_selector(path):
    twin = path.with_name(path.name.replace("-lze.yaml", "-grpo.yaml"))
    assert twin.exists()
    lze, full = yaml.safe_load(path.read_text()), yaml.safe_load(twin.read_text())
    allowed = set(LZE_FIELDS) | {"output_dir", "run_name"}
    assert {k: v for k, v in lze.items() if k not in allowed} == {k: v for k, v in full.items() if k not in allowed}
    assert lze["selector"] == "lze" and full["selector"] == "none"
    assert lze["output_dir"] != full["output_dir"]


@pytest.mark.parametrize("path", ACCELERATE, ids=rel)
def test_accelerate_configs_load(path):
    config = ClusterConfig.from_yaml_file(str(path))  # raises on unknown keys
    assert config.num_processes >= 1 and config.mixed_precision == "bf16"
    assert "Usage:" in path.read_text() or "accelerate launch" in path.read_text()


@pytest.mark.parametrize("path", EVALUATION, ids=rel)
def test_eval_recipes_parse(path):
    (args,) = make_eval_parser().parse_args_and_config(["--config", str(path), "--model", "some/model"])
    assert args.benchmarks and header(path, "Launch")
    raw = yaml.safe_load(path.read_text())
    for key, value in raw.items():
        assert getattr(args, key) == value, key


def test_an_unknown_key_fails(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((RECIPES / "qwen2.5-math-1.5b" / "math-lze.yaml").read_text() + "selection_ration: 0.5\n")
    with pytest.raises(ValueError, match="selection_ration"):
        parse(bad)


# --------------------------------------------------------------------------------------------------- paths


def test_recipe_paths_are_read_from_the_recipe_folder_when_not_found_from_the_cwd(tmp_path, monkeypatch):
    folder, elsewhere = tmp_path / "recipes", tmp_path / "cwd"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "train.jsonl").write_text("{}\n")
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    found = os.path.join(str(folder), "data", "train.jsonl")
    assert recipe_path("data/train.jsonl", str(folder)) == found
    assert recipe_path(["data/train.jsonl", "Qwen/Qwen3-4B"], str(folder)) == [found, "Qwen/Qwen3-4B"]
    assert recipe_path("missing.jsonl", str(folder)) == "missing.jsonl"  # the error names the path as written
    assert recipe_path(0.4, str(folder)) == 0.4
    (elsewhere / "data").mkdir()
    (elsewhere / "data" / "train.jsonl").write_text("{}\n")
    assert recipe_path("data/train.jsonl", str(folder)) == "data/train.jsonl"  # found from the cwd: kept


@pytest.mark.parametrize("cwd", ["root", "elsewhere"])
def test_the_cpu_recipe_finds_its_model_and_data_from_any_folder(cwd, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT if cwd == "root" else tmp_path)
    recipe = os.path.relpath(RECIPES / "cpu" / "carries.yaml")
    script_args, _, model_args, _ = parse_args(make_parser(), ["--config", recipe], RECIPE_PATHS)
    assert Path(script_args.dataset_name).resolve() == RECIPES / "cpu" / "carries_train.jsonl"
    assert (Path(model_args.model_name_or_path) / "model.safetensors").is_file()
    assert script_args.reward_funcs == ["lze_examples.tasks.arithmetic_reward"]  # not a path: as written
    flag = ["--dataset_name", str(tmp_path / "mine.jsonl")]  # a flag wins over the recipe, as it is written
    (tmp_path / "mine.jsonl").write_text("{}\n")
    script_args, _, _, _ = parse_args(make_parser(), ["--config", recipe, *flag], RECIPE_PATHS)
    assert script_args.dataset_name == flag[1]


@pytest.mark.parametrize("written", ["recipes/cpu/carries.yaml", "cpu/carries.yaml"])
def test_a_config_path_not_found_from_the_cwd_is_read_from_the_repository(written, tmp_path, monkeypatch):
    # the README's `lze-trl grpo --config recipes/cpu/carries.yaml`, literally, from another folder than the root
    monkeypatch.chdir(tmp_path)
    script_args, _, model_args, _ = parse_args(make_parser(), ["--config", written], RECIPE_PATHS)
    assert Path(script_args.dataset_name) == RECIPES / "cpu" / "carries_train.jsonl"
    assert (Path(model_args.model_name_or_path) / "model.safetensors").is_file()
    (tmp_path / "recipes" / "cpu").mkdir(parents=True)  # a recipe of the working directory wins
    (tmp_path / "recipes" / "cpu" / "carries.yaml").write_text("model_name_or_path: mine/model\nuse_cpu: true\n")
    _, _, model_args, _ = parse_args(make_parser(), ["--config", "recipes/cpu/carries.yaml"], RECIPE_PATHS)
    assert model_args.model_name_or_path == "mine/model"


def test_a_config_path_found_nowhere_names_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as error:
        parse_args(make_parser(), ["--config", "recipes/cpu/carriez.yaml"], RECIPE_PATHS)
    looked = [
        tmp_path / "recipes/cpu/carriez.yaml",
        ROOT / "recipes/cpu/carriez.yaml",
        RECIPES / "recipes/cpu/carriez.yaml",
    ]
    assert str(error.value) == (
        f"--config recipes/cpu/carriez.yaml: no such file: looked for {', '.join(map(str, looked))} (did you mean "
        "`recipes/cpu/carries.yaml`?); give the path of a YAML recipe, from the working directory or from the "
        "repository's root (`recipes/...`)."
    )
