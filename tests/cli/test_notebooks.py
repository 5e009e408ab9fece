"""The notebooks: clean and parameterised, the GPU branch builds a valid config, and both run end to end on CPU."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import nbformat
import pytest


ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
NAMES = ("quickstart", "analyze_selection")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ("pass_rate_vs_energy", "learning_zone", "selected_by")


def read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def python_source(cell) -> str:
    """A code cell's source without IPython magics (`%matplotlib inline`)."""
    return "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))


def cell_with(nb, marker: str):
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    return cell


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_clean_parameterised_and_compiles(name):
    nb = read(name)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "exactly one papermill `parameters` cell"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code.index(params[0]) == 0, "the parameters come first: the install cell reads PACKAGE"
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, "commit notebooks without outputs"
        compile(python_source(cell), f"{name}.ipynb", "exec")
    install = cell_with(nb, '"pip", "install"')
    assert 'for name in ("lze_trl", "lze_examples") if importlib.util.find_spec(name) is None' in install.source
    namespace: dict = {}
    exec(python_source(params[0]), namespace)
    assert namespace["PACKAGE"] == ""  # no made-up URL: without the package the install cell asks for one
    assert "set PACKAGE" in install.source
    if name == "quickstart":
        assert namespace["MODE"] == "cpu-demo" and namespace["REPORT_TO"] == "none"
    else:
        assert namespace["RUN_DIR"] is None and namespace["BY"] == "difficulty"


def test_quickstart_gsm8k_lora_branch_builds_its_run(monkeypatch, tmp_path):
    """The GPU path cannot run here: execute its data and config cells against the local GSM8K fixture."""
    import torch

    import lze_trl.data
    from lze_trl import LZEGRPOConfig

    real_loader = lze_trl.data.load_math_dataset
    fixture = ROOT / "tests" / "fixtures" / "cli" / "gsm8k_train.jsonl"
    calls = []

    def load_fixture(kind, source=None, split=None, **kwargs):
        calls.append(kind)
        return real_loader(kind, source=str(fixture), **kwargs)

    monkeypatch.setattr(lze_trl.data, "load_math_dataset", load_fixture)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    nb = read("quickstart")
    namespace: dict = {}
    exec(python_source(nb.cells[1]), namespace)  # parameters
    namespace.update(MODE="gsm8k-lora", NUM_PROMPTS=4, USE_VLLM=True, OUTPUT_DIR=str(tmp_path))
    exec(python_source(cell_with(nb, "from lze_trl import LZEGRPOConfig")), namespace)
    exec(python_source(cell_with(nb, "from lze_trl.data import load_math_dataset")), namespace)
    exec(python_source(cell_with(nb, "def make_config")), namespace)
    # A bf16 config needs a GPU to validate; everything else is checked as written.
    namespace["LZEGRPOConfig"] = lambda **kwargs: LZEGRPOConfig(**kwargs, use_cpu=True)

    assert calls == ["gsm8k"]
    from peft import LoraConfig

    from lze_trl.rewards import math_accuracy

    assert namespace["reward_funcs"] is math_accuracy
    assert isinstance(namespace["peft_config"], LoraConfig) and namespace["peft_config"].r == 32
    assert namespace["new_model"]() == "Qwen/Qwen2.5-Math-1.5B"
    dataset = namespace["train_dataset"]
    assert len(dataset) == 4 and {"prompt", "solution", namespace["BY"]} <= set(dataset.column_names)
    assert isinstance(dataset[0]["prompt"], list) and dataset[0][namespace["BY"]] > 0

    lze, grpo = namespace["make_config"]("lze", "lze"), namespace["make_config"]("none", "grpo")
    assert (lze.selector, grpo.selector) == ("lze", "none")
    for config in (lze, grpo):
        assert config.generation_batch_size == 16 * 8 and config.steps_per_generation == 16
        assert config.gradient_accumulation_steps == 16  # one optimizer step per generation batch
        assert config.use_vllm and config.vllm_mode == "colocate" and config.bf16
        assert config.model_init_kwargs == {"dtype": torch.bfloat16} and config.max_completion_length == 1024
    assert lze.output_dir != grpo.output_dir


def execute(name: str, tmp_path: Path, monkeypatch, **parameters) -> nbformat.NotebookNode:
    papermill = pytest.importorskip("papermill")
    # The kernel is a separate process: it must import this checkout's lze_trl (and the tests' settings).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    output = tmp_path / f"{name}-out.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(output),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(tmp_path),
        progress_bar=False,
        execution_timeout=300,
    )
    return nbformat.read(output, as_version=4)


def outputs(nb) -> tuple[list[bytes], str]:
    """The executed notebook's PNG images and its text output (streams and plain-text results)."""
    images, text = [], []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                text.append(out.text)
            elif out.output_type in ("display_data", "execute_result"):
                if "image/png" in out.data:
                    images.append(base64.b64decode(out.data["image/png"]))
                text.append(out.data.get("text/plain", ""))
            elif out.output_type == "error":
                pytest.fail(f"{out.ename}: {out.evalue}")
    return images, "\n".join(text)


def assert_pngs(images: list[bytes], at_least: int) -> None:
    assert len(images) >= at_least, f"{len(images)} images shown, expected at least {at_least}"
    for data in images:
        assert data[:8] == PNG_MAGIC and len(data) > 8_000, len(data)


@pytest.mark.slow
def test_quickstart_then_analyze_its_run(tmp_path, monkeypatch):
    from lze_trl.plotting import load_run

    out = tmp_path / "quickstart"
    nb = execute(
        "quickstart",
        tmp_path,
        monkeypatch,
        MAX_STEPS=3,
        NUM_PROMPTS=32,
        PROMPTS_PER_STEP=4,
        NUM_GENERATIONS=4,
        EVAL_PROMPTS=24,
        EVAL_STEPS=2,
        OUTPUT_DIR=str(out),
    )
    images, text = outputs(nb)
    assert_pngs(images, at_least=6)  # runs compared, 3 learning-zone plots, trajectories, raster
    assert "fewer tokens through the update than plain GRPO" in text
    # the accuracies side by side: after the same steps, and GRPO at LZE's update tokens (measured every 2 steps here)
    assert "Held-out pass rate (24 prompts, 8 samples each): warm start" in text
    assert "after the same 3 steps, LZE" in text and "at the same update tokens (GRPO's step " in text
    for name in PLOTS:
        assert (out / "lze" / "plots" / f"{name}.png").stat().st_size > 8_000
    assert (out / "compare_runs.png").stat().st_size > 8_000
    # Same budget: both runs rolled out 4 prompts for 3 steps; plain GRPO updated on all of them, LZE on fewer.
    _, lze_log = load_run(out / "lze")
    _, grpo_log = load_run(out / "grpo")
    assert len(lze_log) == len(grpo_log) == 3 * 4
    assert grpo_log["selected"].all() and not lze_log["selected"].all()

    nb = execute("analyze_selection", tmp_path, monkeypatch, RUN_DIR=str(out / "lze"))
    images, text = outputs(nb)
    assert_pngs(images, at_least=6)
    assert "12 prompts observed; 12 group decisions over 3 steps" in text
    assert "did not use forward pruning" in text


@pytest.mark.slow
def test_analyze_selection_runs_its_own_demo(tmp_path, monkeypatch):
    out = tmp_path / "demo"
    nb = execute(
        "analyze_selection",
        tmp_path,
        monkeypatch,
        DEMO_OUTPUT_DIR=str(out),
        DEMO_PROMPTS=16,
        DEMO_STEPS=6,
        DEMO_PROMPTS_PER_STEP=4,
        WARM_START_STEPS=20,
    )
    images, text = outputs(nb)
    assert_pngs(images, at_least=6)  # raster, by difficulty, flow, zone over time, trajectories, scatter
    # 16 rows, 14 distinct prompts (two repeat): rows holding the same prompt share one state
    assert "14 prompts observed; 24 group decisions over 6 steps" in text
    assert "prompts are pruned at the end of the run" in text and "explorations" in text
    assert (out / "lze_prompts.parquet").exists() and (out / "lze_selection_log.parquet").exists()
