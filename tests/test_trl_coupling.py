"""`lze_trl.trl_coupling` and the other places that mirror TRL: each helper against the TRL code it copies, so that an
upgrade of TRL that changes that code fails here instead of silently desynchronising the trainer."""

import inspect
import textwrap
from types import SimpleNamespace

import pytest
from transformers import Qwen2Config
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import RepeatSampler

from lze_trl.sampler import LZERepeatSampler
from lze_trl.trainer import as_lze_config, default_output_dir


def source(function) -> str:
    return textwrap.dedent(inspect.getsource(function))


@pytest.mark.parametrize("name_or_path, expected", [("org/Tiny-Model", "Tiny-Model-LZE"), ("", "-LZE")])
def test_default_output_dir_is_named_as_grpo_trainer_names_it(name_or_path, expected):
    code = source(GRPOTrainer.__init__)
    assert "get_config_model_id(model.config)" in code and 'GRPOConfig(f"{model_name}-GRPO")' in code
    model = SimpleNamespace(config=Qwen2Config(name_or_path=name_or_path))
    assert default_output_dir(model) == expected
    assert default_output_dir("org/Other") == "Other-LZE"
    plain = GRPOConfig("out", report_to="none", learning_rate=3e-5, use_cpu=True, bf16=False)
    converted = as_lze_config(plain, model)
    assert converted.output_dir == "out" and converted.learning_rate == 3e-5 and converted.selector == "lze"


def test_sampler_is_trls_repeat_sampler():
    sampler = LZERepeatSampler(10, mini_repeat_count=3, batch_size=4, repeat_count=2, seed=1)
    assert isinstance(sampler, RepeatSampler)
    assert "__len__" not in vars(LZERepeatSampler)  # TRL's length, not a copy
    trl_sampler = RepeatSampler(range(10), mini_repeat_count=3, batch_size=4, repeat_count=2, seed=1)
    first_epoch = list(trl_sampler)
    assert len(sampler) == len(trl_sampler) == len(first_epoch) == 48
    assert list(sampler) == first_epoch


def test_script_arguments_are_trls_plus_ours():
    from dataclasses import fields

    from trl.scripts.grpo import GRPOScriptArguments

    from lze_trl.commands.grpo import LZEGRPOScriptArguments

    assert issubclass(LZEGRPOScriptArguments, GRPOScriptArguments)
    ours = {f.name for f in fields(LZEGRPOScriptArguments)} - {f.name for f in fields(GRPOScriptArguments)}
    assert ours == {"dataset_kind", "dataset_system_prompt", "dataset_chat_template_only"}
