"""Tests of `lze-trl grpo`: TRL-compatible parsing, dataset and reward resolution, and end-to-end runs on a tiny
offline Qwen2 saved to disk (full model and LoRA), with local fixture datasets."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file

from lze_examples.tiny import char_tokenizer, tiny_qwen2
from lze_trl.cli import main as cli_main
from lze_trl.commands import looks_local
from lze_trl.commands.grpo import LZEGRPOScriptArguments, make_parser, resolve_reward_funcs, reward_registry
from lze_trl.data import load_datasets, resolve_math_kind
from lze_trl.rewards import format_reward, math_accuracy


FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K_TRAIN = str(FIXTURES / "gsm8k_train.jsonl")  # gsm8k's own schema (question / answer with ####)
PROMPTS = str(FIXTURES / "prompts.jsonl")  # TRL's standard format: prompt string + solution
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}answer: {% endif %}"
)
COMMON = [
    "--use_cpu",
    "true",
    "--per_device_train_batch_size",
    "8",
    "--num_generations",
    "4",
    "--max_completion_length",
    "8",
    "--max_steps",
    "2",
    "--logging_steps",
    "1",
    "--save_strategy",
    "no",
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
    "--seed",
    "0",
]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Qwen2 and a character tokenizer with a minimal chat template, saved like a Hub model."""
    path = tmp_path_factory.mktemp("tiny") / "model"
    tokenizer = char_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    tiny_qwen2(tokenizer, max_position_embeddings=512).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


# --------------------------------------------------------------------------------------------------- parsing


def test_parser_accepts_every_option_of_trl_grpo():
    """Same dataclasses as `trl grpo` (GRPOConfig -> LZEGRPOConfig): every `trl grpo` flag works here too."""
    from trl.scripts.grpo import GRPOScriptArguments
    from trl.scripts.grpo import make_parser as trl_make_parser

    ours = {s for action in make_parser()._actions for s in action.option_strings}
    theirs = {s for action in trl_make_parser()._actions for s in action.option_strings}
    assert theirs <= ours
    assert {"--selector", "--selection_ratio", "--dataset_kind", "--use_peft", "--lora_r", "--use_vllm"} <= ours
    defaults = LZEGRPOScriptArguments()
    for name, f in GRPOScriptArguments.__dataclass_fields__.items():
        assert getattr(defaults, name) == (f.default_factory() if callable(f.default_factory) else f.default)


def test_flags_override_the_yaml(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model_name_or_path": "some/model",
                "dataset_name": "gsm8k",
                "output_dir": str(tmp_path / "out"),
                "selector": "none",
                "selection_ratio": 0.3,
                "use_peft": True,
                "lora_r": 8,
                "lora_target_modules": ["q_proj", "v_proj"],
                "chat_template_kwargs": {"enable_thinking": True},
                "use_cpu": True,
            }
        )
    )
    script, args, model, _ = make_parser().parse_args_and_config(
        ["--config", str(config), "--selector", "lze", "--lora_r", "4"]
    )
    assert script.dataset_name == "gsm8k"
    assert args.selector == "lze" and args.selection_ratio == 0.3
    assert model.use_peft and model.lora_r == 4 and model.lora_target_modules == ["q_proj", "v_proj"]
    assert args.chat_template_kwargs == {"enable_thinking": True}
    with pytest.raises(ValueError, match="dataset_kind"):
        make_parser().parse_args_and_config(["--config", str(config), "--dataset_kind", "mmlu"])


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("selection_ratio", "abc", ["expected a number", "in (0, 1]"]),  # argparse's type, the field's help
        ("learning_rate", "fast", ["expected a number", "learning rate"]),
        ("max_steps", "ten", ["expected an integer"]),
        ("selection_ratio", 3, ["selection_ratio=3 is invalid: use a fraction in (0, 1]"]),  # the config's own fix
        ("selector", "best", ["selector='best' is invalid: use one of"]),
    ],
)
def test_a_bad_yaml_value_is_one_error_naming_the_file_key_and_value(tmp_path, capsys, key, value, says):
    config = tmp_path / "bad.yaml"
    settings = {"model_name_or_path": "some/model", "output_dir": str(tmp_path / "out"), "use_cpu": True, key: value}
    config.write_text(yaml.safe_dump(settings))
    assert cli_main(["grpo", "--config", str(config)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()  # one line: no usage text, no traceback
    assert line.startswith(f"lze-trl grpo: error: {config}: ") and key in line and str(value) in line
    assert all(text in line for text in says), line
    # the same value as a flag: argparse's own message names the flag, still without the usage text
    assert cli_main(["grpo", "--config", str(config), f"--{key}", str(value)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{config}:" not in line and key in line and str(value) in line


def test_a_missing_config_file_is_named(tmp_path, capsys):
    assert one_error(capsys, ["grpo", "--config", str(tmp_path / "nope.yaml")]) == (
        f"lze-trl grpo: error: --config {tmp_path / 'nope.yaml'}: no such file: looked for {tmp_path / 'nope.yaml'}; "
        "give the path of a YAML recipe, from the working directory or from the repository's root (`recipes/...`)."
    )


# --------------------------------------------------------------------------------------------------- first contact
# A new user's mistakes in a recipe end in one line naming the recipe, the key and the fix (issue #53)


def one_error(capsys, argv: list[str]) -> str:
    """Runs `lze-trl <argv>`, which must exit with status 2 and print one line on stderr; returns that line."""
    assert cli_main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()  # no traceback, no usage text
    return line


def write_recipe(path: Path, **settings) -> Path:
    """A recipe at `path` for the CPU with a model, an output folder and `settings`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = {"model_name_or_path": "some/model", "output_dir": "out", "use_cpu": True, **settings}
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


@pytest.mark.parametrize(
    "value, local",
    [
        ("carries_train.jsonl", True),  # a data file's name
        ("data/train.parquet", True),
        ("./my_data", True),
        ("../models/tiny", True),
        ("/abs/data", True),
        ("examples/lze_examples/demo/weights/48f3e60dc1d23923", True),  # more than one `/`: no Hub id
        ("gsm8k", False),  # a math kind
        ("openai/gsm8k", False),  # Hub ids
        ("Qwen/Qwen2.5-Math-1.5B", False),
        ("owner/name@refs/pr/1?split=train", False),
        ("hf://BytedTsinghua-SIA/DAPO-Math-17k?split=train", False),
    ],
)
def test_looks_local(value, local):
    assert looks_local(value) == local


def test_a_missing_dataset_file_is_one_error_naming_the_recipe_key_and_places(tmp_path, monkeypatch, capsys):
    folder, cwd = tmp_path / "recipes", tmp_path / "cwd"
    cwd.mkdir()
    recipe = write_recipe(folder / "run.yaml", dataset_name="trian.jsonl")
    (folder / "train.jsonl").write_text("{}\n")
    monkeypatch.chdir(cwd)
    assert one_error(capsys, ["grpo", "--config", str(recipe)]) == (
        f"lze-trl grpo: error: {recipe}: dataset_name='trian.jsonl' is invalid: no such file or folder: looked for "
        f"{cwd / 'trian.jsonl'} (from the working directory), {folder / 'trian.jsonl'} (next to the recipe) (did you "
        "mean `train.jsonl`?); set dataset_name to an existing path (relative to the working directory or the "
        "recipe's folder) or to a Hub id."
    )
    # a flag is read from the working directory only, as it is written
    assert one_error(capsys, ["grpo", "--config", str(recipe), "--dataset_name", "data/train.jsonl"]) == (
        f"lze-trl grpo: error: dataset_name='data/train.jsonl' is invalid: no such file or folder: looked for "
        f"{cwd / 'data' / 'train.jsonl'} (from the working directory); set dataset_name to an existing path "
        "(relative to the working directory) or to a Hub id."
    )
    # the model's path the same way
    write_recipe(recipe, model_name_or_path="models/tiny/", dataset_name="train.jsonl")
    line = one_error(capsys, ["grpo", "--config", str(recipe)])
    assert line.startswith(f"lze-trl grpo: error: {recipe}: model_name_or_path='models/tiny/' is invalid: ")
    assert f"{cwd / 'models' / 'tiny'} (from the working directory), {folder / 'models' / 'tiny'} (next to" in line


def test_an_unknown_reward_is_one_error_naming_the_recipe_and_the_valid_rewards(tmp_path, capsys):
    registered = ", ".join(reward_registry())
    fix = f"use a registered reward ({registered}) or a `module.function` import path."
    recipe = write_recipe(tmp_path / "run.yaml", dataset_name="gsm8k", reward_funcs=["math_acuracy"])
    assert one_error(capsys, ["grpo", "--config", str(recipe)]) == (
        f"lze-trl grpo: error: {recipe}: reward_funcs='math_acuracy' is invalid: not a registered reward (did you "
        f"mean `math_accuracy`?): {fix}"
    )
    write_recipe(recipe, dataset_name="gsm8k", reward_funcs=["lze_examples.tasks.arithmetic_rewad"])
    assert one_error(capsys, ["grpo", "--config", str(recipe)]) == (
        f"lze-trl grpo: error: {recipe}: reward_funcs='lze_examples.tasks.arithmetic_rewad' is invalid: module "
        "'lze_examples.tasks' has no function 'arithmetic_rewad' (did you mean "
        "`lze_examples.tasks.arithmetic_reward`?): "
        f"{fix}"
    )
    write_recipe(recipe, dataset_name="gsm8k", reward_funcs="no_such_module.reward")  # one name, not a list
    assert one_error(capsys, ["grpo", "--config", str(recipe)]) == (
        f"lze-trl grpo: error: {recipe}: reward_funcs='no_such_module.reward' is invalid: No module named "
        f"'no_such_module' (searched from {os.getcwd()}): {fix}"
    )
    # as a flag: the same message, without the recipe's name in front
    line = one_error(capsys, ["grpo", "--config", str(recipe), "--reward_funcs", "format_rewards"])
    assert line.startswith("lze-trl grpo: error: reward_funcs='format_rewards' is invalid: not a registered reward")
    assert "(did you mean `format_reward`?)" in line


@pytest.mark.parametrize(
    "key, nearest",
    [("selection_ration", "selection_ratio"), ("lora_rr", "lora_r"), ("dataset_nmae", "dataset_name")],
)
def test_a_misspelled_key_is_one_error_naming_the_nearest_valid_key(tmp_path, capsys, key, nearest):
    # the keys of every dataclass of the parser: the config's, the model's and the script's
    recipe = write_recipe(tmp_path / "run.yaml", **{key: 1})
    assert one_error(capsys, ["grpo", "--config", str(recipe)]) == (
        f"lze-trl grpo: error: {recipe}: unknown key `{key}` (did you mean `{nearest}`?): rename or remove it "
        "(`lze-trl grpo --help` lists the valid keys)."
    )


def test_misspelled_keys_are_all_named(tmp_path, capsys):
    recipe = write_recipe(tmp_path / "run.yaml", selection_ration=0.4, colour="blue")
    assert one_error(capsys, ["grpo", "--config", str(recipe)]) == (
        f"lze-trl grpo: error: {recipe}: unknown keys `selection_ration` (did you mean `selection_ratio`?), `colour`: "
        "rename or remove them (`lze-trl grpo --help` lists the valid keys)."
    )


@pytest.mark.parametrize(
    "name, kind, expected",
    [
        ("gsm8k", None, ("gsm8k", None)),
        ("dapo_math", None, ("dapo_math", None)),
        ("openai/gsm8k", None, ("gsm8k", "openai/gsm8k")),
        ("EleutherAI/hendrycks_math", None, ("math", "EleutherAI/hendrycks_math")),
        (
            "hf://BytedTsinghua-SIA/DAPO-Math-17k?split=train",
            None,
            ("dapo_math", "hf://BytedTsinghua-SIA/DAPO-Math-17k?split=train"),
        ),
        (
            "https://huggingface.co/datasets/math-ai/aime25",
            None,
            ("aime25", "https://huggingface.co/datasets/math-ai/aime25"),
        ),
        ("data/train.jsonl", "gsm8k", ("gsm8k", "data/train.jsonl")),
        (None, "math", ("math", None)),
        ("math", "math", ("math", None)),
        ("trl-lib/DeepMath-103K", None, None),  # TRL's loader
        ("data/train.jsonl", None, None),  # a local file in TRL's format
        ("my_dataset_dir", None, None),
    ],
)
def test_resolve_math_kind(name, kind, expected):
    assert resolve_math_kind(name, kind) == expected


def test_resolve_math_kind_rejects_unknown_urls():
    with pytest.raises(ValueError, match="dataset_kind"):
        resolve_math_kind("hf://someone/some-math-set", None)


def test_reward_resolution():
    def resolve(**kw):
        return resolve_reward_funcs(LZEGRPOScriptArguments(**kw))

    assert resolve() == [math_accuracy]
    assert resolve(reward_funcs=["format_reward", "math_accuracy"]) == [format_reward, math_accuracy]
    trl_names = ["accuracy_reward", "think_format_reward", "reasoning_accuracy_reward", "get_soft_overlong_punishment"]
    assert all(callable(f) for f in resolve(reward_funcs=trl_names))
    (func,) = resolve(reward_funcs=["testing_utils.mixed_reward"])
    assert func.__name__ == "mixed_reward"
    assert resolve(reward_model_name_or_path="some/rm") == ["some/rm"]
    with pytest.raises(ValueError, match="reward_funcs='no_such_reward' is invalid: not a registered reward"):
        resolve(reward_funcs=["no_such_reward"])


def test_datasets_of_a_math_kind_and_of_trl_format(tmp_path):
    from lze_trl import LZEGRPOConfig

    args = LZEGRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=8)
    train, test = load_datasets(LZEGRPOScriptArguments(dataset_name=GSM8K_TRAIN, dataset_kind="gsm8k"), args)
    assert test is None and len(train) == 8
    assert train[0]["prompt"][-1]["role"] == "user" and train[0]["solution"] == "7"
    train, _ = load_datasets(LZEGRPOScriptArguments(dataset_name=PROMPTS), args)
    assert train[3] == {"prompt": "3+3=", "solution": "6"}
    args.eval_strategy = "steps"
    with pytest.raises(ValueError, match="test split"):
        load_datasets(LZEGRPOScriptArguments(dataset_name=GSM8K_TRAIN, dataset_kind="gsm8k"), args)
    with pytest.raises(ValueError, match="dataset_config"):
        load_datasets(LZEGRPOScriptArguments(dataset_name=GSM8K_TRAIN, dataset_kind="gsm8k", dataset_config="x"), args)


# --------------------------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_grpo_cli_full_model_on_a_math_kind(tiny_model_dir, tmp_path, monkeypatch):
    """gsm8k rows in their own schema -> conversational prompts -> chat template -> LZE training -> saved model, on
    the thread policy's one thread (a 2-core CPU)."""
    out = tmp_path / "run"
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    code = cli_main(
        [
            "grpo",
            "--model_name_or_path",
            tiny_model_dir,
            "--dataset_name",
            GSM8K_TRAIN,
            "--dataset_kind",
            "gsm8k",
            "--reward_funcs",
            f"{__name__}.half_right",  # the correctness reward (the first): live groups, so that LZE trains
            "math_accuracy",
            "format_reward",
            "--output_dir",
            str(out),
            *COMMON,
        ]
    )
    ran_on, _ = torch.get_num_threads(), torch.set_num_threads(threads)
    assert code == 0 and ran_on == 1
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
    assert (out / "tokenizer.json").is_file() and not (out / "adapter_config.json").exists()
    table = pd.read_parquet(out / "lze_prompts.parquet")
    assert len(table) == 4  # 2 steps x 8 rows / 4 generations
    questions = [json.loads(line)["question"] for line in open(GSM8K_TRAIN)]
    assert all(any(p.startswith(q) for q in questions) and "\\boxed{}" in p for p in table["prompt"])
    args = torch.load(out / "training_args.bin", weights_only=False)
    assert args.selector == "lze" and args.model_init_kwargs["dtype"] == "float32"


@pytest.mark.slow
def test_grpo_cli_lora_from_a_yaml_recipe(tiny_model_dir, tmp_path):
    """A YAML recipe plus flags, LoRA on, TRL-format prompts, a dotted-path reward: the adapter is trained, saved."""
    out = tmp_path / "lora"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "model_name_or_path": tiny_model_dir,
                "dataset_name": PROMPTS,
                "reward_funcs": ["testing_utils.mixed_reward", "math_accuracy"],
                "output_dir": str(out),
                "learning_rate": 0.01,
                "selector": "lze",
                "selection_ratio": 0.5,
                "max_steps": 5,
            }
        )
    )
    flags = ["--use_peft", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj"]
    assert cli_main(["grpo", "--config", str(recipe), *flags, *COMMON]) == 0  # COMMON's --max_steps 2 wins
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["r"] == 4 and set(config["target_modules"]) == {"q_proj", "v_proj"}
    assert config["base_model_name_or_path"] == tiny_model_dir
    assert not (out / "model.safetensors").exists()
    weights = load_file(out / "adapter_model.safetensors")
    lora_b = [w for name, w in weights.items() if "lora_B" in name]
    assert lora_b and any(w.abs().sum() > 0 for w in lora_b)  # B starts at zero: the adapter was trained
    args = torch.load(out / "training_args.bin", weights_only=False)
    assert args.max_steps == 2 and args.selection_ratio == 0.5
    log = pd.read_parquet(out / "lze_selection_log.parquet")
    assert len(log) == 2 * 2 and 0 < log["selected"].sum() < len(log)
    assert len(pd.read_parquet(out / "lze_prompts.parquet")) == 4


@pytest.mark.slow
@pytest.mark.vllm
def test_grpo_cli_vllm_colocate(tmp_path):
    path = tmp_path / "model"
    tokenizer = char_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    model = tiny_qwen2(tokenizer, hidden_size=128, max_position_embeddings=512)  # head_dim 64 for vLLM's kernels
    model.to(torch.bfloat16).save_pretrained(path)  # vLLM loads the checkpoint's dtype; training upcasts to fp32
    tokenizer.save_pretrained(path)
    out = tmp_path / "run"
    flags = list(COMMON)
    if torch.cuda.is_available():  # train on the GPU vLLM shares; on a CPU-only machine both run on the CPU
        i = flags.index("--use_cpu")
        del flags[i : i + 2]
    code = cli_main(
        [
            "grpo",
            "--model_name_or_path",
            str(path),
            "--dataset_name",
            GSM8K_TRAIN,
            "--dataset_kind",
            "gsm8k",
            "--output_dir",
            str(out),
            "--use_vllm",
            "true",
            "--vllm_mode",
            "colocate",
            "--vllm_gpu_memory_utilization",
            "0.2",
            "--vllm_max_model_length",
            "512",
            "--reward_funcs",
            f"{__name__}.half_right",  # live groups: the tiny model solves no GSM8K question
            *flags,
        ]
    )
    assert code == 0
    assert (out / "model.safetensors").is_file() and (out / "lze_prompts.parquet").is_file()


@pytest.mark.slow
def test_grpo_cli_refuses_a_dataset_too_small_for_one_batch(tiny_model_dir, tmp_path, capsys):
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"prompt": "1+1=", "solution": "2"}) + "\n")
    out = tmp_path / "run"
    code = cli_main(
        ["grpo", "--model_name_or_path", tiny_model_dir, "--dataset_name", str(data), "--output_dir", str(out)]
        + ["--reward_funcs", "math_accuracy", *COMMON]
    )
    captured = capsys.readouterr()
    assert code == 2
    assert "train dataset has 1 prompts, but one generation batch needs 2" in captured.err
    assert "Training completed" not in captured.out


def half_right(completions, **kwargs):
    """A correctness reward that passes about half of any model's completions (by a hash of their text): the tiny
    random model solves no GSM8K question, and a run whose every group is dead trains no token (exit 1)."""
    return [float(zlib.crc32(str(c).encode()) % 2) for c in completions]


def scores_nothing(completions, **kwargs):
    """A reward that cannot read any completion: `None` for every one."""
    return [None] * len(completions)


@pytest.mark.slow
def test_grpo_cli_fails_a_run_that_trained_no_token_naming_the_reward(tiny_model_dir, tmp_path, capsys):
    # TRL trains on (zero advantages) when every reward is None, and so does the Python API; the command is a job that
    # learned nothing: it exits 1 and names the reward that scored nothing, after saving what it trained
    out = tmp_path / "run"
    code = cli_main(
        ["grpo", "--model_name_or_path", tiny_model_dir, "--dataset_name", str(PROMPTS), "--output_dir", str(out)]
        + ["--reward_funcs", f"{__name__}.scores_nothing", *COMMON]
    )
    captured = capsys.readouterr()
    assert code == 1 and (out / "model.safetensors").is_file()
    assert "lze-trl grpo: error: This run trained no token" in captured.err
    assert "No rollout was scored: the reward functions ('scores_nothing')" in captured.err


LORA_RECIPE = Path(__file__).parents[2] / "recipes" / "variants" / "qwen2.5-math-1.5b-gsm8k-lze-lora-24gb.yaml"


@pytest.mark.slow
def test_lora_recipe_runs_on_cpu_with_the_overrides_its_header_names(tiny_model_dir, tmp_path):
    header = [line for line in LORA_RECIPE.read_text().splitlines() if line.startswith("# CPU")]
    assert header, "the LoRA recipe's header must say how to run it on a CPU"
    cpu_flags = header[0].split("`")[1].split()[len(["lze-trl", "grpo", "--config", "..."]) :]
    assert cpu_flags[:2] == ["--use_cpu", "true"]
    # The tiny model and a local GSM8K file stand in for the Hub ones; the batch is shrunk to the file's 8 rows.
    shrink = ["--model_name_or_path", tiny_model_dir, "--dataset_name", GSM8K_TRAIN, "--dataset_kind", "gsm8k"]
    shrink += ["--generation_batch_size", "8", "--gradient_accumulation_steps", "1", "--num_generations", "4"]
    shrink += ["--max_completion_length", "8", "--max_steps", "1", "--output_dir", str(tmp_path / "out")]
    shrink += ["--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true", "--lora_r", "4"]
    shrink += ["--reward_funcs", f"{__name__}.half_right"]  # stands in for math_accuracy, which it never passes
    assert cli_main(["grpo", "--config", str(LORA_RECIPE), *cpu_flags, *shrink]) == 0
    assert (tmp_path / "out" / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_the_cpu_recipe_trains_offline_from_the_shipped_warm_start(tmp_path, monkeypatch, capsys):
    # The README's CPU command line, run from another folder than the repository's root: the recipe's model (the
    # shipped weights and tokenizer) and data are found next to the recipe, the embedded task's reward by its import
    # path, and the output goes under the working directory; nothing downloaded
    monkeypatch.chdir(tmp_path)
    recipe = Path(__file__).parents[2] / "recipes" / "cpu" / "carries.yaml"
    flags = ["--max_steps", "2", "--output_dir", "cpu-carries", "--disable_tqdm", "true"]
    assert cli_main(["grpo", "--config", os.path.relpath(recipe), *flags]) == 0
    assert "Model and LZE tables saved to cpu-carries." in capsys.readouterr().out
    assert {"model.safetensors", "tokenizer.json", "lze_prompts.parquet", "lze_selection_log.parquet"} <= {
        p.name for p in (tmp_path / "cpu-carries").iterdir()
    }


def test_help_lists_lzes_settings_first(capsys):
    from lze_trl.commands.grpo import make_parser

    text = make_parser().format_help()
    assert text.index("LZE settings") < text.index("--selection_ratio") < text.index("--dataset_name")
    assert text.index("--prune_unsolved") < text.index("--learning_rate") and text.count("--selection_ratio ") == 1
