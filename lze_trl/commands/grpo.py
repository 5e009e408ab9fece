"""`lze-trl grpo`: train with [`LZEGRPOTrainer`] from a YAML recipe or flags, exactly like `trl grpo`.

The parser is TRL's own (`TrlParser`) over the same dataclasses as `trl grpo` (script arguments, the training config,
`ModelConfig`, `DatasetMixtureConfig`), with [`LZEGRPOConfig`] in place of `GRPOConfig`: every `GRPOConfig` and
`ModelConfig` field (`--use_peft --lora_r 16 ...`, `--use_vllm --vllm_mode colocate ...`) and the LZE fields
(`--selector lze --selection_ratio 0.4 ...`) work as flags or as keys of the `--config` YAML (flags win).

```bash
lze-trl grpo --config recipes/qwen2.5-math-1.5b/math-lze.yaml
accelerate launch --config_file recipes/accelerate/zero3.yaml -m lze_trl.cli grpo \
    --config recipes/qwen3-8b/dapo_math-lze.yaml
lze-trl grpo --model_name_or_path Qwen/Qwen2.5-Math-1.5B --dataset_name gsm8k --reward_funcs math_accuracy \
    --output_dir outputs/gsm8k-lze --use_peft --lora_r 16
```

Datasets: `dataset_name` may be one of our math kinds (`gsm8k`, `math`, `math500`, `dapo_math`, `amc23`, `aime24`,
`aime25`), the canonical Hub id of one (`openai/gsm8k`, `EleutherAI/hendrycks_math`, ...), or, with `dataset_kind`, any
source [`~lze_trl.data.load_math_dataset`] reads (a local `.jsonl`/`.parquet` file in the dataset's own schema, an
`hf://` or `https://huggingface.co/datasets/...` URL, a mirror's Hub id). Those are converted to conversational
prompts with a `solution` column. Anything else is loaded as TRL does (`datasets.load_dataset`, or the `datasets:`
mixture), and a local `.json`/`.jsonl`/`.parquet` file in TRL's prompt format with the matching `datasets` builder.

Rewards (`reward_funcs`, in order; the first one defines correctness for LZE unless `correctness_reward` says
otherwise): `math_accuracy` and `format_reward` ([`lze_trl.rewards`]), TRL's `accuracy_reward`,
`reasoning_accuracy_reward`, `think_format_reward`, `get_soft_overlong_punishment`, or a dotted import path
(`my_lib.rewards.my_reward`). Defaults to `math_accuracy`.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from trl.scripts.grpo import GRPOScriptArguments

from ..data import load_datasets
from ..method.errors import LZEStateError, LZEWarning
from ..plotting.callback import add_plot_callback
from . import UsageError, did_you_mean, parse_args


logger = logging.getLogger(__name__)


def resolve_model_name(name: str) -> str:
    """
    The `model_name_or_path` to load: `name` as each installed package's entry point of the `lze_trl.model_names` group
    reads it (the examples' reads SmolLM2's Hub id as the installed file when the Hub is out of reach), else `name`.

    Args:
        name (`str`):
            A recipe's `model_name_or_path`.
    """
    for entry in entry_points(group="lze_trl.model_names"):
        name = entry.load()(name)
    return name


@dataclass
class LZEGRPOScriptArguments(GRPOScriptArguments):
    """
    Script arguments of `lze-trl grpo`: TRL's `GRPOScriptArguments` (those of `trl grpo`, inherited) plus how to read
    math datasets.

    Args:
        reward_funcs (`list[str]`, *optional*):
            Reward functions by name: `math_accuracy`, `format_reward`, `accuracy_reward`,
            `reasoning_accuracy_reward`, `think_format_reward`, `get_soft_overlong_punishment` (with
            `max_completion_len` = the run's `max_completion_length` and a soft cache of a fifth of it), or any
            dotted import path (e.g. `my_lib.rewards.custom_reward`). Defaults to `["math_accuracy"]` when no
            reward model is given either. (TRL's field, re-declared only for its help text, which names our rewards.)
        dataset_kind (`str`, *optional*):
            Read `dataset_name` with [`~lze_trl.data.load_math_dataset`] as this kind (`gsm8k`, `math`, `math500`,
            `dapo_math`, `amc23`, `aime24`, `aime25`); `dataset_name` is then the source (a local file, `hf://`,
            `https://huggingface.co/datasets/...`, a Hub id) or unset for the kind's canonical dataset. Not needed
            when `dataset_name` is a kind name or a kind's canonical Hub id.
        dataset_system_prompt (`str`, *optional*):
            System message put before each problem of a math kind.
        dataset_chat_template_only (`bool`, *optional*, defaults to `False`):
            For a math kind, use the bare problem as the user message, without the step-by-step / `\\boxed{}`
            instruction.
    """

    reward_funcs: list[str] | None = field(
        default=None,
        metadata={
            "help": "Reward functions: math_accuracy, format_reward, accuracy_reward, reasoning_accuracy_reward, "
            "think_format_reward, get_soft_overlong_punishment, or a dotted import path. Default: math_accuracy."
        },
    )
    dataset_kind: str | None = field(
        default=None,
        metadata={
            "help": "Read dataset_name as this math kind (gsm8k, math, math500, dapo_math, amc23, aime24, aime25) "
            "with lze_trl.data.load_math_dataset; dataset_name is then its source (local file, hf://, URL, Hub id)."
        },
    )
    dataset_system_prompt: str | None = field(
        default=None, metadata={"help": "System message before each problem (math kinds)."}
    )
    dataset_chat_template_only: bool = field(
        default=False, metadata={"help": "Bare problem as the user message, without the \\boxed{} instruction."}
    )

    def __post_init__(self):
        from lze_trl.data import KINDS

        if self.dataset_kind is not None and self.dataset_kind not in KINDS:
            raise ValueError(f"dataset_kind={self.dataset_kind!r} is invalid: use one of {sorted(KINDS)}.")
        if isinstance(self.reward_funcs, str):  # `reward_funcs: math_accuracy` in a YAML
            self.reward_funcs = [self.reward_funcs]
        resolve_reward_funcs(self)  # an unknown reward fails here, where the recipe that names it is known


RECIPE_PATHS = ("model_name_or_path", "dataset_name", "reward_model_name_or_path")
"""Keys of a recipe read relative to the recipe's folder when they are not found from the working directory."""


def make_parser(prog: str | None = "lze-trl grpo"):
    """
    The `lze-trl grpo` parser: `TrlParser((LZEGRPOScriptArguments, LZEGRPOConfig, ModelConfig, DatasetMixtureConfig))`,
    the dataclasses of `trl grpo` with [`LZEGRPOConfig`] for `GRPOConfig`.
    """
    from trl import DatasetMixtureConfig, ModelConfig, TrlParser

    from lze_trl import LZEGRPOConfig
    from lze_trl.method.settings import LZE_FIELDS

    parser = TrlParser((LZEGRPOScriptArguments, LZEGRPOConfig, ModelConfig, DatasetMixtureConfig), prog=prog)
    # `--help` lists LZE's settings first, in a group of their own (argparse lists groups in order of creation)
    lze = parser.add_argument_group("LZE settings (lze_trl.method.settings.LZESettings)")
    for group in parser._action_groups:
        if group is not lze:
            moved = [a for a in group._group_actions if a.dest in LZE_FIELDS]
            group._group_actions[:] = [a for a in group._group_actions if a.dest not in LZE_FIELDS]
            lze._group_actions.extend(moved)
    parser._action_groups.remove(lze)
    parser._action_groups.insert(0, lze)
    parser.usage = f"{prog} [--config RECIPE.yaml] [--<setting> VALUE ...]  (every `trl grpo` flag, LZE's first)"
    return parser


# --------------------------------------------------------------------------------------------------- rewards


def reward_registry(training_args: Any = None) -> dict[str, Callable]:
    """
    Reward functions available by name: ours (`math_accuracy`, `format_reward`) and those `trl grpo` registers.

    Args:
        training_args ([`LZEGRPOConfig`], *optional*):
            The run's config; `get_soft_overlong_punishment` punishes completions within a fifth of its
            `max_completion_length` of the limit (`trl grpo` hard-codes 1280 / 256, the same ratio).
    """
    from trl.rewards import (
        accuracy_reward,
        get_soft_overlong_punishment,
        reasoning_accuracy_reward,
        think_format_reward,
    )

    from lze_trl.rewards import format_reward, math_accuracy

    max_len = getattr(training_args, "max_completion_length", None) or 1280
    return {
        "math_accuracy": math_accuracy,
        "format_reward": format_reward,
        "accuracy_reward": accuracy_reward,
        "reasoning_accuracy_reward": reasoning_accuracy_reward,
        "think_format_reward": think_format_reward,
        "get_soft_overlong_punishment": get_soft_overlong_punishment(
            max_completion_len=max_len, soft_punish_cache=max(1, max_len // 5)
        ),
    }


def load_reward_func(name: str, registry: dict[str, Callable]) -> Callable:
    """
    The reward function `name` names: a registered one, or the function of a `module.function` import path (the
    module is searched from the working directory too, as `trl grpo` does).

    Args:
        name (`str`):
            An item of `reward_funcs`.
        registry (`dict[str, Callable]`):
            The rewards available by name ([`reward_registry`]).

    Raises:
        `ValueError`: `reward_funcs='<name>' is invalid: ...`, naming the registered rewards, or the module that does
            not import or the function it lacks, with the nearest name.
    """
    if name in registry:
        return registry[name]
    fix = f"use a registered reward ({', '.join(registry)}) or a `module.function` import path"
    if "." not in name:
        raise ValueError(
            f"reward_funcs={name!r} is invalid: not a registered reward{did_you_mean(name, registry)}: {fix}."
        )
    module_path, func_name = name.rsplit(".", 1)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError as error:
        raise ValueError(f"reward_funcs={name!r} is invalid: {error} (searched from {os.getcwd()}): {fix}.") from error
    func = getattr(module, func_name, None)
    if not callable(func):
        names = [f"{module_path}.{attribute}" for attribute in dir(module) if not attribute.startswith("_")]
        raise ValueError(
            f"reward_funcs={name!r} is invalid: module {module_path!r} has no function {func_name!r}"
            f"{did_you_mean(name, names)}: {fix}."
        )
    return func


def resolve_reward_funcs(script_args: LZEGRPOScriptArguments, training_args: Any = None) -> list:
    """The reward model and reward functions of a run, in order, resolved as `trl grpo` does (plus our names)."""
    registry = reward_registry(training_args)
    reward_funcs: list = []
    if script_args.reward_model_name_or_path:
        reward_funcs.append(script_args.reward_model_name_or_path)
    names = script_args.reward_funcs
    if names is None and not reward_funcs:
        names = ["math_accuracy"]
    return reward_funcs + [load_reward_func(name, registry) for name in names or []]


# --------------------------------------------------------------------------------------------------- training


def train(script_args: LZEGRPOScriptArguments, training_args: Any, model_args: Any, dataset_args: Any = None):
    """
    Runs a training as `trl grpo` does, with [`LZEGRPOTrainer`]: loads the model (`model_init_kwargs` from
    `ModelConfig`, quantization and PEFT configs from its fields), the datasets and the rewards, trains, and saves the
    model (the adapter with `use_peft`), the tokenizer and the LZE tables (`lze_prompts.parquet`,
    `lze_selection_log.parquet`) into `output_dir`. Unlike `main`, it does not end the trainer (`trainer.end()`
    destroys the process group), so that the caller can still evaluate or push.

    Args:
        script_args ([`LZEGRPOScriptArguments`]):
            Dataset and reward arguments.
        training_args ([`LZEGRPOConfig`]):
            Training configuration.
        model_args (`trl.ModelConfig`):
            Model, quantization and LoRA arguments.
        dataset_args (`trl.DatasetMixtureConfig`, *optional*):
            A dataset mixture, used instead of `dataset_name` when it lists datasets.

    Returns:
        [`LZEGRPOTrainer`]: The trainer, after training.
    """
    from trl import get_peft_config, get_quantization_config

    from lze_trl import LZEGRPOTrainer

    if not model_args.model_name_or_path:
        raise ValueError("model_name_or_path is required (a Hub id or a local model directory).")
    reward_funcs = resolve_reward_funcs(script_args, training_args)

    model_init_kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    if training_args.model_init_kwargs is not None:
        model_init_kwargs.update(training_args.model_init_kwargs)
    training_args.model_init_kwargs = model_init_kwargs

    train_dataset, eval_dataset = load_datasets(script_args, training_args, dataset_args)
    try:
        trainer = LZEGRPOTrainer(
            model=resolve_model_name(model_args.model_name_or_path),  # SmolLM2's Hub id: the installed file offline
            reward_funcs=reward_funcs,
            args=training_args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            quantization_config=get_quantization_config(model_args),
            peft_config=get_peft_config(model_args),
        )
    except ValueError as error:  # a setting or the data does not fit: say so, no traceback
        raise UsageError(str(error)) from error
    try:  # learning-zone histograms and plots in wandb/trackio, when either is a reporter and matplotlib is installed
        add_plot_callback(trainer)
    except ImportError as error:
        warnings.warn(f"{error}; training goes on without them.", LZEWarning, stacklevel=2)
    try:
        trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    except LZEStateError as error:  # the checkpoint's LZE state does not fit this run
        raise UsageError(str(error)) from error
    trainer.accelerator.print("Training completed.")

    trainer.save_model(training_args.output_dir)
    trainer.accelerator.print(f"Model and LZE tables saved to {training_args.output_dir}.")
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
        trainer.accelerator.print(f"Model pushed to the Hub in https://huggingface.co/{trainer.hub_model_id}.")
    return trainer


def main(argv: list[str]) -> int:
    import transformers
    from packaging.version import Version

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        script_args, training_args, model_args, dataset_args = parse_args(make_parser(), argv, RECIPE_PATHS)
        trainer = train(script_args, training_args, model_args, dataset_args)
    except UsageError as error:
        print(f"lze-trl grpo: error: {error}", file=sys.stderr)
        return 2
    # A recipe run that learned nothing is a failed job: exit 1, saying why (its model and tables are saved).
    untrained = trainer.lze.untrained() if trainer.lze_enabled else None
    if untrained is not None:
        trainer.accelerator.print(f"lze-trl grpo: error: {untrained}", file=sys.stderr)
    if Version(transformers.__version__) >= Version("5.18.0"):
        trainer.end()  # finishes the trackers and destroys the process group, as `trl grpo` does
    return 0 if untrained is None else 1
