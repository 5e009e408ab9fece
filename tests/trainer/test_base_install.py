"""The base install is the library: lze-trl's wheel holds `lze_trl` alone (the demo, the tasks, the evaluation, the
tiny models, SmolLM2's loader and the shipped weights are the examples' package, examples/), `pip install lze-trl`
brings no plotting or table library, and training and checkpointing a trainer load nothing of the periphery (the plots,
the data recipes, the CLI), with matplotlib and tabulate made unimportable (issue #73)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from test_import_graph import import_graph, reachable


ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("matplotlib", "tabulate")
PERIPHERY = ("plotting", "data", "commands", "cli", "testing")
"""The subpackages and modules of `lze_trl` beyond the trainers, their config, the method and the rounds."""
BLOCK = f"import sys\nfor name in {OPTIONAL!r}: sys.modules[name] = None  # `import` raises ImportError\n"
"""A subprocess's first lines: neither optional library can be imported, as after `pip install lze-trl`."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(requirements: list[str]) -> set[str]:
    """Every distribution the base `requirements` pull in, transitively, read from the installed packages'
    metadata (extras left out, environment markers evaluated)."""
    seen, stack = set(), [Requirement(r) for r in requirements]
    while stack:
        requirement = stack.pop()
        name = canonical(requirement.name)
        if name in seen or (requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        try:
            stack.extend(Requirement(r) for r in distribution(name).requires or [])
        except PackageNotFoundError:  # an optional platform package pip would skip here
            continue
    return seen


def run_python(code: str, timeout: int = 600) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT / "tests"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_the_base_install_brings_no_plotting_or_table_library():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pulled = closure(project["dependencies"])
    assert {"trl", "torch", "pandas"} <= pulled  # the walk reads the dependency tree
    assert pulled & set(OPTIONAL) == set()
    assert {"matplotlib"} <= closure(project["optional-dependencies"]["plot"])
    examples = tomllib.loads((ROOT / "examples" / "pyproject.toml").read_text())["project"]
    assert {"lze-trl", "matplotlib", "tabulate"} <= closure(examples["dependencies"])


@pytest.mark.parametrize("trainer", ["lze_trl.grpo.trainer", "lze_trl.async_grpo.trainer"])
def test_no_import_of_a_trainer_reaches_the_periphery(trainer):
    # every import, lazy ones and those only a type checker runs included (tests/docs/test_import_graph.py's graph)
    graph = import_graph()
    reached = reachable(graph, trainer)
    assert "lze_trl.method.run" in reached  # the walk follows the trainer's imports
    assert sorted(m for m in reached if m.split(".")[1] in PERIPHERY) == []


@pytest.mark.slow
def test_training_and_checkpointing_load_none_of_the_periphery(tmp_path):
    code = BLOCK + (
        "import json\n"
        "from datasets import Dataset\n"
        "from lze_trl import LZEGRPOConfig, LZEGRPOTrainer\n"
        "from lze_examples.tiny import char_tokenizer, tiny_qwen2\n"  # the examples' test model
        "dataset = Dataset.from_dict({'prompt': [f'{i}+{i}=' for i in range(16)]})\n"
        "def reward(prompts, completions, **kwargs):\n"
        "    return [float(len(c) % 2) for c in completions]\n"
        "def trainer(steps):\n"
        "    args = LZEGRPOConfig(output_dir=OUT, per_device_train_batch_size=8, num_generations=4,\n"
        "        max_completion_length=6, max_steps=steps, save_strategy='steps', save_steps=1, report_to='none',\n"
        "        use_cpu=True, bf16=False, prune_solved=True, prune_unsolved=True, prune_exploration='adaptive')\n"
        "    tokenizer = char_tokenizer()\n"
        "    return LZEGRPOTrainer(model=tiny_qwen2(tokenizer), reward_funcs=reward, args=args,\n"
        "                          train_dataset=dataset, processing_class=tokenizer)\n"
        "first = trainer(2)\n"
        "first.train()\n"
        "table = first.prompt_table()\n"
        "resumed = trainer(3)\n"
        "resumed.train(resume_from_checkpoint=True)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('lze_trl.') and m != 'lze_examples.tiny')\n"
        "print(json.dumps({'loaded': loaded, 'rows': len(table), 'columns': list(table.columns),\n"
        "                  'steps': resumed.state.global_step}))\n"
    ).replace("OUT", repr(str(tmp_path)))
    seen = json.loads(run_python(code))
    assert (
        seen["steps"] == 3 and seen["rows"] > 0 and {"prompt_key", "ema_pass_rate", "pruned"} <= set(seen["columns"])
    )
    assert {"lze_trl.grpo.trainer", "lze_trl.method.run", "lze_trl.common.state_owner"} <= set(seen["loaded"])
    periphery = [m for m in seen["loaded"] if m.split(".")[1] in PERIPHERY]
    assert periphery == []


def test_the_periphery_names_its_extra_when_its_library_is_missing():
    code = BLOCK + (
        "import json\n"
        "from lze_trl.plotting import new_figure\n"
        "from lze_trl.plotting.callback import add_plot_callback\n"
        "from types import SimpleNamespace as Fake\n"
        "trainer = Fake(callback_handler=Fake(callbacks=[]), args=Fake(report_to=['wandb']))\n"
        "errors = []\n"
        "for call in (new_figure, lambda: add_plot_callback(trainer)):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as error:\n"
        "        errors.append(str(error))\n"
        "print(json.dumps(errors))\n"
    )
    errors = json.loads(run_python(code))
    assert len(errors) == 2
    assert "needs matplotlib" in errors[0] and "pip install 'lze-trl[plot]'" in errors[0]
    assert "plots in wandb/trackio needs matplotlib" in errors[1] and "lze-trl[plot]" in errors[1]


@pytest.mark.slow
def test_the_quick_start_loads_no_plotting_or_table_library(tmp_path):
    # the README's quick start: the shipped warm start, the embedded task and greedy accuracy need neither library
    code = BLOCK + (
        "from lze_examples.demo import default_warm_start, greedy_accuracy, load_warm_start\n"
        "from lze_examples.tasks import get_task\n"
        "model, tokenizer, _ = load_warm_start(default_warm_start('carries'))\n"
        "test = get_task('carries').make_dataset(20, seed=0, split='test')\n"
        "print(greedy_accuracy(model, tokenizer, test)['accuracy'])\n"
    )
    assert 0.0 <= float(run_python(code)) <= 1.0


def test_the_examples_commands_say_how_to_install_them_when_missing(monkeypatch, capsys):
    from lze_trl import cli

    assert {"demo", "eval"} <= set(cli.added_commands())  # the examples' entry points (the Makefile installs them)
    monkeypatch.setattr(cli, "added_commands", dict)  # as after `pip install lze-trl` alone
    assert cli.main(["demo", "--tiny"]) == 2
    assert "'demo' comes with lze-trl's examples, which are not installed: `pip install -e examples`" in (
        capsys.readouterr().err
    )
    assert cli.main(["--help"]) == 0
    assert "demo and eval come with lze-trl's examples" in capsys.readouterr().out


@pytest.mark.slow
def test_the_wheel_holds_the_library_and_the_examples_theirs(tmp_path):
    # built as pip builds them from the clone: lze-trl's wheel is lze_trl (trainers, config, method, rounds, rewards,
    # the plots, the data recipes and the CLI), the examples' the demo with its weights, the tasks and the evaluation
    source = tmp_path / "clone"  # a copy: setuptools' build/ folder stays out of the clone
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for part in ("lze_trl", "examples"):
        shutil.copytree(ROOT / part, source / part, ignore=skip)
    for part in ("pyproject.toml", "setup.cfg", "README.md"):
        shutil.copy(ROOT / part, source / part)
    for folder in (source, source / "examples"):
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", tmp_path,
             folder],
            check=True, capture_output=True, cwd=tmp_path,
        )  # fmt: skip
    library = zipfile.ZipFile(next(tmp_path.glob("lze_trl-*.whl")))
    names = [n for n in library.namelist() if ".dist-info/" not in n]
    assert names and all(n.startswith("lze_trl/") for n in names)
    assert not [n for n in names if n.endswith((".safetensors", ".json"))]
    assert {n.split("/")[1] for n in names} & {"demo", "tasks", "evaluation", "tiny.py", "smollm2.py"} == set()
    examples = zipfile.ZipFile(next(tmp_path.glob("lze_trl_examples-*.whl")))
    shipped = [n for n in examples.namelist() if ".dist-info/" not in n]
    assert all(n.startswith("lze_examples/") for n in shipped)
    assert any(n.startswith("lze_examples/demo/weights/") and n.endswith("model.safetensors") for n in shipped)
    assert {"lze_examples/tasks/__init__.py", "lze_examples/evaluation/__init__.py"} <= set(shipped)
    points = next(n for n in examples.namelist() if n.endswith("entry_points.txt"))
    assert "[lze_trl.commands]" in examples.read(points).decode()
