"""Where lze-trl meets TRL: the private names it uses (`lze_trl.common.coupling`), the sampler, the config, the script
arguments, each against the installed TRL, so that an upgrade that changes them fails here."""

import ast
import dataclasses
import inspect
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.specifiers import SpecifierSet
from transformers import Qwen2Config
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import RepeatSampler

from lze_trl.common.coupling import (
    ASYNC_PRIVATE_NAMES,
    ASYNC_TRL,
    PRIVATE_NAMES,
    SUPPORTED,
    installed,
    missing_names,
    unsupported,
)
from lze_trl.grpo.config import as_lze_config, default_output_dir
from lze_trl.grpo.sampler import LZERepeatSampler


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


# ----------------------------------------------------------------------------------------------- private names
PACKAGE = Path(__file__).resolve().parents[2] / "lze_trl"
EXAMPLES = PACKAGE.parent / "examples" / "lze_examples"
"""The examples' package: its private TRL names are lze-trl's too (the demo's meter overrides `_generate`)."""


def async_trl_classes() -> tuple[type, ...]:
    """TRL's experimental async classes `lze_trl.async_grpo` builds on (none on a TRL outside `ASYNC_TRL`)."""
    try:
        from lze_trl.async_grpo import upstream as async_trl
    except ImportError:
        return ()
    return (
        async_trl.AsyncGRPOTrainer,
        async_trl.AsyncGRPOConfig,
        async_trl._AsyncRolloutLoop,
        async_trl.AsyncRolloutWorker,
        async_trl.RolloutSample,
    )


def trl_private_names(classes: tuple[type, ...] = ()) -> set[str]:
    """Private names of TRL's `GRPOTrainer` / `GRPOConfig`, transformers' `Trainer` / `TrainingArguments` and
    `classes`: methods, class attributes and the instance attributes their methods set."""
    from transformers import Trainer, TrainingArguments

    names = set()
    for cls in (GRPOTrainer, Trainer, GRPOConfig, TrainingArguments, *classes):
        names |= {n for n in dir(cls) if n.startswith("_") and not n.startswith("__")}
        if not dataclasses.is_dataclass(cls):
            names |= set(re.findall(r"self\.(_[a-zA-Z][a-zA-Z0-9_]*)\s*(?::[^=\n]*)?=", inspect.getsource(cls)))
    return names


def used_private_names(root: Path, skip: str | None = None) -> tuple[set[str], set[str]]:
    """
    `_names` the code under `root` (but the files matching `skip`) reads, writes, calls or overrides (any `x._name`, a
    method `def _name` or a class attribute `_name = ...` of a class), and the `_names` it imports from TRL or
    transformers.
    """
    touched, imported = set(), set()
    for path in root.rglob("*.py"):
        if skip and path.match(skip):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                touched.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    targets = item.targets if isinstance(item, ast.Assign) else [getattr(item, "target", None)]
                    names = [t.id for t in targets if isinstance(t, ast.Name)]
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names = [item.name]
                    touched.update(n for n in names if n.startswith("_") and not n.startswith("__"))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("trl", "transformers"):
                imported.update(a.name for a in node.names if a.name.startswith("_"))
    return touched, imported


def test_the_private_names_lze_touches_are_exactly_the_listed_ones():
    # the async trainer's files count where TRL has the experimental async GRPO they build on (ASYNC_TRL)
    classes = async_trl_classes()
    touched, imported = used_private_names(PACKAGE, skip=None if classes else "async_grpo/*.py")
    in_examples, imported_in_examples = used_private_names(EXAMPLES)
    assert "_generate" in in_examples  # the scan reads the examples
    used = ((touched | in_examples) & trl_private_names(classes)) | imported | imported_in_examples
    listed = set(PRIVATE_NAMES) | (set(ASYNC_PRIVATE_NAMES) if classes else set())
    assert used == listed, f"unlisted: {sorted(used - listed)}, unused: {sorted(listed - used)}"


def test_the_async_names_are_scanned_where_trl_has_them():
    # guards the test above: the async worker's overrides of TRL's loop are seen as TRL's private names
    classes = async_trl_classes()
    if not classes:
        pytest.skip("TRL outside the async trainer's ASYNC_TRL")
    touched, _ = used_private_names(PACKAGE)
    assert {"_generate_loop", "_score_group", "_loop_cls"} <= touched & trl_private_names(classes)


def test_the_scan_sees_class_attributes_methods_and_attribute_access():
    # guards the test above against a scan that misses a kind of use
    touched, _ = used_private_names(PACKAGE)
    assert {"_tag_names", "_paper", "_calculate_rewards", "_metrics"} <= touched & trl_private_names()


@pytest.mark.parametrize(
    "name, parameters",
    [
        ("_generate_and_score_completions", ["self", "inputs"]),
        ("_calculate_rewards", ["self", "inputs", "prompts", "completions", "completion_ids_list"]),
        ("_get_train_sampler", ["self", "dataset"]),
        ("_generate", ["self", "prompts"]),
        ("_load_rng_state", ["self", "checkpoint"]),
    ],
)
def test_the_private_methods_lze_calls_or_overrides_keep_their_signature(name, parameters):
    signature = inspect.signature(getattr(GRPOTrainer, name)).parameters
    assert list(signature)[: len(parameters)] == parameters


def test_the_trainer_method_lze_overrides_takes_what_the_override_takes():
    # transformers 5.0-5.2 passed a third argument (total_train_batch_size): below the floor of SUPPORTED
    from lze_trl import LZEGRPOTrainer

    ours = inspect.signature(LZEGRPOTrainer.set_initial_training_values).parameters
    assert list(inspect.signature(GRPOTrainer.set_initial_training_values).parameters) == list(ours)


def test_trl_generates_and_rewards_once_per_step_and_gathers_the_rewards():
    # `LZEGRPOTrainer.generate_and_score` reads the step's rewards from its override of `_calculate_rewards`: TRL
    # calls it once per `_generate_and_score_completions`, after `_generate`, and returns every process's rewards
    # (gathered), in the order of the prompt keys the trainer gathers
    code = source(GRPOTrainer._generate_and_score_completions)
    assert code.count("self._generate(") == 1 and code.count("self._calculate_rewards(") == 1
    assert code.index("= self._generate(prompts)") < code.index("self._calculate_rewards(")
    rewards = source(GRPOTrainer._calculate_rewards).strip()
    assert "rewards_per_func = gather(rewards_per_func)" in rewards and rewards.endswith("return rewards_per_func")


@pytest.mark.parametrize("trainer_class", ["GRPOTrainer", "LZEGRPOTrainer"])
def test_a_trainer_built_without_init_generates_as_grpo_trainer(trainer_class):
    # TRL's own rollout-dispatch tests build trainers with `object.__new__` and call `_generate` on them
    from lze_trl import LZEGRPOTrainer

    cls = {"GRPOTrainer": GRPOTrainer, "LZEGRPOTrainer": LZEGRPOTrainer}[trainer_class]
    trainer = object.__new__(cls)
    trainer.accelerator = SimpleNamespace(device="cpu")
    trainer.model = SimpleNamespace(training=True)
    trainer.use_vllm = False
    trainer.rollout_func = lambda prompts, trainer: {"prompt_ids": [[1]] * len(prompts)}
    with pytest.raises(ValueError, match=r"rollout_func must return keys \['completion_ids', 'logprobs'\]"):
        trainer._generate(["p"])


def test_the_private_attributes_lze_reads_are_set_by_trl():
    init = source(GRPOTrainer.__init__)
    assert "self._step = 0" in init  # the micro-step counter that paces generation (restored on resume)
    assert re.search(r"self\._metrics = \{.*defaultdict\(list\)", init)  # appended to, then averaged by `log`
    assert "self._calculate_rewards(inputs, prompts, completions, completion_ids_list)" in source(
        GRPOTrainer._generate_and_score_completions
    )  # TRL's rewards reach LZE through the override of this call


def test_the_model_card_names_lze_and_cites_its_paper():
    from lze_trl import LZEGRPOTrainer

    assert LZEGRPOTrainer._name == "LZE" and LZEGRPOTrainer._paper["id"] == "2605.17003"
    assert "Learning-Zone Energy" in LZEGRPOTrainer._paper["citation"]


# ------------------------------------------------------------------------------------------- the tested versions
def test_pyproject_asks_for_the_tested_ranges():
    import tomllib
    from packaging.requirements import Requirement

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    asked = {r.name: r.specifier for r in map(Requirement, project["dependencies"])}
    for package, tested in SUPPORTED.items():
        assert asked[package] == SpecifierSet(tested), package
    # what CI tests: the oldest of each range in `make test-trl-min`, the newest the caps admit in `make test`
    makefile = (PACKAGE.parent / "Makefile").read_text()
    for package in SUPPORTED:
        oldest = min(s.version for s in SpecifierSet(SUPPORTED[package]) if s.operator == ">=")
        assert re.search(rf"^\w+_MIN := {package}=={re.escape(oldest)}(\.0)?$", makefile, re.M), package
    for package in SUPPORTED:
        assert unsupported(package, SUPPORTED[package], installed(package)) is None  # this suite runs in the range


@pytest.mark.parametrize(
    "found, in_range",
    [("1.12.0", True), ("1.14.2", True), ("1.15.0", False), ("1.16.0", True), ("1.16.1.dev0", True),
     ("1.16.0+local", True), ("1.17.0.dev0", False), ("1.17.0", False), ("1.19.0", False), ("1.11.9", False)],
)  # fmt: skip
def test_a_trl_outside_the_range_gets_one_line_with_the_fix(found, in_range):
    line = unsupported("trl", SUPPORTED["trl"], found, what="LZEGRPOTrainer")
    if in_range:
        assert line is None
    else:
        assert line == f"LZEGRPOTrainer is tested with trl{SUPPORTED['trl']}, found trl {found}: " + (
            f"pip install 'trl{SUPPORTED['trl']}'"
        )


def test_missing_names_sees_methods_class_and_instance_attributes():
    assert missing_names((GRPOTrainer, GRPOConfig), PRIVATE_NAMES) == []
    names = ["_metrics", "_step", "_paper", "_generate", "_not_in_trl"]  # instance, class attribute, method
    assert missing_names((GRPOTrainer,), names) == ["_not_in_trl"]

    class Older(GRPOTrainer):  # a TRL whose trainer lacks a name: neither inherited nor set in any source
        pass

    assert missing_names((Older,), ["_pending_extra_logs", "_gone"]) == ["_gone"]


def import_with(*lines: str, module: str = "lze_trl.grpo.trainer") -> subprocess.CompletedProcess:
    """Imports `module` in a fresh interpreter after `lines`, which fake what TRL offers."""
    code = "\n".join(["import trl", *lines, f"import {module}"])
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_importing_the_trainer_with_an_untested_trl_warns_in_one_line():
    for fake, line in [
        ("trl.__version__ = '1.19.0'", unsupported("trl", SUPPORTED["trl"], "1.19.0", what="LZEGRPOTrainer")),
        (
            "from trl import GRPOTrainer; import transformers; transformers.__version__ = '6.0.0'",  # TRL reimports it
            unsupported("transformers", SUPPORTED["transformers"], "6.0.0", what="LZEGRPOTrainer"),
        ),
    ]:
        ran = import_with(fake)
        assert ran.returncode == 0 and ran.stderr.count(f"LZEWarning: {line}\n") == 1, ran.stderr
    ran = import_with()
    assert ran.returncode == 0 and "LZEWarning" not in ran.stderr  # the installed TRL is a tested one: no word


def test_importing_the_trainer_with_a_trl_that_lacks_a_name_refuses_in_one_line():
    ran = import_with("trl.__version__ = '1.19.0'", "from trl import GRPOTrainer", "del GRPOTrainer._generate")
    assert ran.returncode != 0 and ran.stderr.strip().splitlines()[-1] == (
        f"ImportError: LZEGRPOTrainer is tested with trl{SUPPORTED['trl']}, found trl 1.19.0, which lacks _generate: "
        f"pip install 'trl{SUPPORTED['trl']}'"
    )


def test_importing_the_async_trainer_where_trl_moved_it_refuses_in_one_line():
    # TRL 1.18 removed `trl.experimental.async_grpo`'s submodules (docs/upstream/trl-1.18-port.md)
    ran = import_with(
        "import sys; trl.__version__ = '1.18.0'",
        "sys.modules['trl.experimental.async_grpo.async_rollout_worker'] = None",
        module="lze_trl.async_grpo.trainer",
    )
    assert ran.returncode != 0 and ran.stderr.strip().splitlines()[-1] == (
        "ImportError: " + unsupported("trl", ASYNC_TRL, "1.18.0", what="LZEAsyncGRPOTrainer")
    )
    if async_trl_classes():  # where the async trainer imports, a version outside its range is warned about
        line = unsupported("trl", ASYNC_TRL, "1.17.0", what="LZEAsyncGRPOTrainer")
        ran = import_with("trl.__version__ = '1.17.0'", module="lze_trl.async_grpo.trainer")
        assert ran.returncode == 0 and ran.stderr.count(f"LZEWarning: {line}\n") == 1, ran.stderr
