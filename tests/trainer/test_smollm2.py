"""SmolLM2-135M-Instruct from the package index (examples/lze_examples/smollm2.py) and its task
(examples/lze_examples/tasks/word_problems.py): the loader's errors, the transformers workaround it pins
(docs/upstream/transformers-gguf-trainable.md), the task's splits and grader, and two steps of training with LZE on the
CPU. The model's tests are skipped, with the pip lines to run, where the file is not installed
(the Makefile's install puts it in)."""

import copy
import hashlib
import importlib.metadata
import re
from pathlib import Path

import pytest
import torch

from lze_examples import smollm2
from lze_examples.tasks import get_task, is_test_prompt
from lze_examples.tasks.word_problems import OOD_LEVELS, TRAIN_LEVELS, last_number, make_dataset, word_problem_reward
from lze_trl import LZEGRPOConfig, LZEGRPOTrainer


def installed() -> str | None:
    """None where the file is installed, else the loader's message (which names the pip lines)."""
    try:
        smollm2.gguf_path()
    except smollm2.SmolLM2NotInstalledError as error:
        return str(error)
    return None


needs_model = pytest.mark.skipif(installed() is not None, reason=f"SmolLM2 is not installed: {installed()}")


def test_a_missing_install_names_the_pip_lines(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(smollm2.importlib.metadata, "distribution", missing)
    with pytest.raises(smollm2.SmolLM2NotInstalledError) as error:
        smollm2.gguf_path()
    assert all(line in str(error.value) for line in smollm2.INSTALL_LINES)


def test_the_conversion_is_reused_by_any_environment_holding_the_same_file(tmp_path, monkeypatch):
    # the cache is keyed by the file's content: the same file installed in another virtual environment (another
    # path) reuses the converted folder; another file is converted again
    conversions = []

    class Saved:
        def save_pretrained(self, folder):
            Path(folder).mkdir(parents=True, exist_ok=True)

    def convert():
        conversions.append(smollm2.gguf_path())
        return Saved(), Saved()

    monkeypatch.setattr(smollm2, "_load_from_file", convert)
    first, second = (tmp_path / env / "site-packages" / smollm2.GGUF_NAME for env in ("venv-a", "venv-b"))
    for path in (first, second):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    cache = tmp_path / "cache"
    for path in (first, second, first):
        monkeypatch.setattr(smollm2, "gguf_path", lambda path=path: path)
        assert smollm2.model_dir(cache) == cache / "smollm2-135m-instruct-q4_1"
    assert conversions == [first]
    second.write_bytes(b"GGUF another model")
    monkeypatch.setattr(smollm2, "gguf_path", lambda: second)
    smollm2.model_dir(cache)
    assert conversions == [first, second]
    # read in chunks: the same digest as in one read
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    assert smollm2.file_digest(first, chunk_size=7) == smollm2.file_digest(first) == f"sha256:{digest}"


def test_resolve_model_name_keeps_other_names_and_checks_source():
    assert smollm2.resolve_model_name("Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"
    assert smollm2.resolve_model_name(smollm2.HUB_ID, source="hub") == smollm2.HUB_ID
    with pytest.raises(ValueError, match="source='gguf' is invalid"):
        smollm2.resolve_model_name(smollm2.HUB_ID, source="gguf")


def test_lze_trl_grpo_reads_the_hub_id_through_the_examples_entry_point(monkeypatch):
    # `lze-trl grpo` (the library) imports nothing of the examples: the installed file comes through their entry point
    from lze_trl.commands import grpo

    monkeypatch.setattr(smollm2, "hub_reachable", lambda timeout=5.0: False)
    monkeypatch.setattr(smollm2, "model_dir", lambda cache_dir=None: Path("/converted/smollm2"))
    assert grpo.resolve_model_name(smollm2.HUB_ID) == str(Path("/converted/smollm2"))
    assert grpo.resolve_model_name("Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"
    monkeypatch.setattr(grpo, "entry_points", lambda group: [])  # without the examples: the name as it is
    assert grpo.resolve_model_name(smollm2.HUB_ID) == smollm2.HUB_ID


def test_word_problems_splits_levels_and_grader():
    assert get_task("word_problems").make_dataset is make_dataset
    train, test, ood = (make_dataset(200, seed=0, split=s) for s in ("train", "test", "ood"))
    text = lambda ds: {row[0]["content"] for row in ds["prompt"]}  # noqa: E731
    assert not text(train) & text(test)
    assert all(not is_test_prompt(t) for t in text(train)) and all(is_test_prompt(t) for t in text(test))
    assert set(train["difficulty"]) == set(TRAIN_LEVELS) and set(ood["difficulty"]) == set(OOD_LEVELS)
    assert make_dataset(20, seed=3)["prompt"] == make_dataset(20, seed=3)["prompt"]
    for row in (*train, *ood):  # every answer is the arithmetic of the numbers in the question
        numbers = [int(n) for n in re.findall(r"\d+", row["prompt"][0]["content"])]
        level, answer = row["difficulty"], int(row["answer"])
        expected = {
            0: lambda a, b: a + b,
            1: lambda a, b: a - b,
            2: lambda a, b: a * b,
            3: lambda a, b: a + b,
            4: lambda a, b: a - b,
            6: lambda a, b: a // b,
        }
        if level == 5:
            assert answer == numbers[0] + numbers[1] - numbers[2] > 0
        else:
            assert answer == expected[level](*numbers) > 0
    assert last_number("3 + 4 = 7, so 7.") == 7.0 and last_number("1,250 cards") == 1250.0 and last_number("") is None
    completions = ["So Tom has 12 apples.", "12 and then 13", [{"role": "assistant", "content": "-2"}], "twelve"]
    assert word_problem_reward(completions, ["12", "12", "-2", "12"]) == [1.0, 0.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="completions but"):
        word_problem_reward(["1"], ["1", "2"])


@pytest.fixture(scope="module")
def model_and_tokenizer():
    return smollm2.load_smollm2(source="package")


@pytest.mark.slow
@needs_model
def test_transformers_marks_the_dequantised_gguf_model_quantized_and_make_trainable_fixes_it(model_and_tokenizer):
    from transformers import AutoModelForCausalLM
    from transformers.trainer_utils import validate_quantization_for_training

    path = smollm2.gguf_path()
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    # The defect: when this stops raising, transformers has fixed it and make_trainable can go.
    with pytest.raises(ValueError, match="purely quantized"):
        validate_quantization_for_training(model)
    smollm2.make_trainable(model)
    validate_quantization_for_training(model)
    assert not model.is_quantized and getattr(model.config, "quantization_config", None) is None
    folder_model = model_and_tokenizer[0]  # the converted folder holds the same weights
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), folder_model.state_dict().values()))


@pytest.mark.slow
@needs_model
def test_two_steps_of_training_on_the_cpu(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    model = copy.deepcopy(model)
    before = model.model.layers[0].mlp.down_proj.weight.detach().clone()
    torch.set_num_threads(1)
    args = LZEGRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=32,  # 4 prompts x 8 rollouts
        num_generations=8,
        max_completion_length=12,
        temperature=0.7,
        learning_rate=1e-5,
        max_steps=2,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,  # float32: on a CPU without bfloat16 instructions a bf16 step of this model takes many minutes
        seed=0,
        selector="lze",
        selection_ratio=0.5,
    )
    dataset = make_dataset(16, seed=0, levels=(0, 2))  # the levels with live groups at the start
    trainer = LZEGRPOTrainer(
        model=model, reward_funcs=word_problem_reward, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "lze/generated_rollouts" in entry]
    assert trainer.state.global_step == 2 and len(logs) == 2
    assert [entry["lze/generated_rollouts"] for entry in logs] == [32, 32]
    updated = any(entry["lze/update_rows"] > 0 and entry["reward_std"] > 0 for entry in logs)
    assert updated == (not torch.equal(before, model.model.layers[0].mlp.down_proj.weight))
