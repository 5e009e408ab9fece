"""The base install is the library: `pip install lze-trl` brings no plotting or table library, and training and
checkpointing a trainer load nothing of the periphery (the demo, the tasks, the evaluation, the plots, the data
recipes, SmolLM2's loader, the CLI), with matplotlib and tabulate made unimportable (issue #73)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from test_import_graph import import_graph, reachable


ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("matplotlib", "tabulate")
PERIPHERY = ("demo", "plotting", "evaluation", "tasks", "data", "smollm2", "commands", "cli", "testing")
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
    extras = project["optional-dependencies"]
    assert {"matplotlib"} <= closure(extras["plot"]) and {"matplotlib", "tabulate"} <= closure(extras["demo"])
    assert "tabulate" in closure(extras["eval"])


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
        "from lze_trl.tiny import char_tokenizer, tiny_qwen2\n"  # the harness's model, not the trainer's import
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
        "loaded = sorted(m for m in sys.modules if m.startswith('lze_trl.') and m != 'lze_trl.tiny')\n"
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
        "from lze_trl.evaluation.reports import markdown_table\n"
        "from lze_trl.plotting.callback import add_plot_callback\n"
        "from types import SimpleNamespace as Fake\n"
        "trainer = Fake(callback_handler=Fake(callbacks=[]), args=Fake(report_to=['wandb']))\n"
        "errors = []\n"
        "table = lambda: markdown_table({'benchmarks': {}, 'models': {}})\n"
        "for call in (new_figure, table, lambda: add_plot_callback(trainer)):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as error:\n"
        "        errors.append(str(error))\n"
        "print(json.dumps(errors))\n"
    )
    errors = json.loads(run_python(code))
    assert len(errors) == 3
    assert "needs matplotlib" in errors[0] and "pip install 'lze-trl[plot]'" in errors[0]
    assert "needs tabulate" in errors[1] and "pip install 'lze-trl[eval]'" in errors[1]
    assert "plots in wandb/trackio needs matplotlib" in errors[2] and "lze-trl[plot]" in errors[2]


@pytest.mark.slow
def test_the_quick_start_runs_on_the_base_install(tmp_path):
    # the README's quick start: the shipped warm start, the embedded task and greedy accuracy need neither library
    code = BLOCK + (
        "from lze_trl.demo import default_warm_start, greedy_accuracy, load_warm_start\n"
        "from lze_trl.tasks import get_task\n"
        "model, tokenizer, _ = load_warm_start(default_warm_start('carries'))\n"
        "test = get_task('carries').make_dataset(20, seed=0, split='test')\n"
        "print(greedy_accuracy(model, tokenizer, test)['accuracy'])\n"
    )
    assert 0.0 <= float(run_python(code)) <= 1.0


def test_the_demo_command_names_its_extra_before_it_trains():
    code = BLOCK + (
        "import contextlib, io, json\n"
        "from lze_trl.cli import main\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stderr(err):\n"
        "    code = main(['demo', '--tiny'])\n"
        "print(json.dumps([code, err.getvalue()]))\n"
    )
    code, message = json.loads(run_python(code))
    assert code == 2 and "lze-trl demo needs tabulate" in message and "pip install 'lze-trl[demo]'" in message
