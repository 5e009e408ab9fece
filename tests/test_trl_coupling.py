"""`lze_trl.trl_coupling` and the other places that mirror TRL: each helper against the TRL code it copies, so that an
upgrade of TRL that changes that code fails here instead of silently desynchronising the trainer."""

import inspect
import textwrap
from collections import defaultdict
from types import SimpleNamespace

import pytest
from transformers import Qwen2Config
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import RepeatSampler

from lze_trl.sampler import LZERepeatSampler
from lze_trl.trainer import as_lze_config, default_output_dir
from lze_trl.trl_coupling import is_generation_step, skip_micro_step


def source(function) -> str:
    return textwrap.dedent(inspect.getsource(function))


def fake_trainer(step, spg=2, iterations=2, accumulation=2, training=True, buffered=True):
    return SimpleNamespace(
        args=SimpleNamespace(steps_per_generation=spg),
        num_iterations=iterations,
        model=SimpleNamespace(training=training),
        _step=step,
        _buffered_inputs=[{}] if buffered else None,
        current_gradient_accumulation_steps=accumulation,
        _metrics={"train": defaultdict(list)},
        _current_train_step_time=0.25,
    )


def test_generation_step_condition_is_trls():
    code = source(GRPOTrainer._prepare_inputs)
    assert "generate_every = self.args.steps_per_generation * self.num_iterations" in code
    assert "if self._step % generate_every == 0 or self._buffered_inputs is None:" in code
    generating = [is_generation_step(fake_trainer(step)) for step in range(9)]
    assert generating == [True, False, False, False, True, False, False, False, True]  # every 2 x 2 micro-steps
    assert is_generation_step(fake_trainer(3, buffered=False))  # nothing buffered (resume): generate
    assert not is_generation_step(fake_trainer(0, training=False))  # evaluation never uses the buffer


def test_skipped_micro_step_does_what_trls_training_step_does_besides_the_loss():
    code = source(GRPOTrainer.training_step)
    for line in (
        "self._step += 1",
        "if self._step % self.current_gradient_accumulation_steps == 0:",
        'self._metrics["train"]["step_time"].append(self._current_train_step_time)',
        "self._current_train_step_time = 0.0",
    ):
        assert line in code, line
    trainer = fake_trainer(2, accumulation=2)
    assert not skip_micro_step(trainer)  # 3 % 2: mid-window, nothing logged
    assert trainer._step == 3 and trainer._metrics["train"]["step_time"] == []
    assert skip_micro_step(trainer)  # 4 % 2: the window ends
    assert trainer._step == 4 and trainer._metrics["train"]["step_time"] == [0.25]
    assert trainer._current_train_step_time == 0.0


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
