"""Tests of `lze_examples.evaluation` and `lze-trl eval`, offline on hand-built tiny models saved to disk.

The end-to-end tests use a "bigram" Qwen2 whose next token depends only on the current one (attention and MLP
outputs are zero, the embeddings one-hot, the LM head a lookup table): it answers every prompt with "7" (or, through a
LoRA adapter on its LM head, "8") and stops, so the exact Pass@1 on fixture benchmarks with known gold answers is
known in advance.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from lze_examples.evaluation import (
    Completion,
    EvalArguments,
    benchmark_metrics,
    evaluate,
    generate_transformers,
    is_adapter,
    load_model_and_tokenizer,
    markdown_table,
    merge_results,
    render_prompts,
)
from lze_examples.evaluation.arguments import BENCHMARKS_HELP
from lze_examples.tiny import char_tokenizer
from lze_trl.cli import main as cli_main


FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = str(FIXTURES / "gsm8k_eval.jsonl")  # gold answers 7, 7, 8
AMC23 = str(FIXTURES / "amc23_eval.jsonl")  # gold answers 7, 12, 8, 8
SOURCES = [f"gsm8k={GSM8K}", f"amc23={AMC23}"]
NAME_OOD = "results_carries-ood"  # the result files of `--dataset_split carries=ood`
LOGIT = 4.0  # x the RMS-normalised one-hot hidden state (sqrt(128)) = 45: other tokens get probability ~e^-45


def bigram_model(tokenizer, next_token) -> Qwen2ForCausalLM:
    """A Qwen2 whose greedy (and, at temperature 1, practically certain) next token is `next_token(current)`."""
    vocab = len(tokenizer)
    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=128,  # head_dim 64: a size every vLLM attention kernel takes
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    assert vocab <= config.hidden_size
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.model.norm.weight.fill_(1.0)
        for token in range(vocab):
            model.model.embed_tokens.weight[token, token] = 1.0
            model.lm_head.weight[next_token(token), token] = LOGIT
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A base model that answers "7", and a LoRA adapter on its LM head that makes it answer "8"."""
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("models")
    tokenizer = char_tokenizer()
    seven, eight, eos = (tokenizer.convert_tokens_to_ids(t) for t in ("7", "8", tokenizer.eos_token))
    base_dir, adapter_dir = root / "base", root / "adapter"
    bigram_model(tokenizer, lambda t: eos if t in (seven, eight) else seven).save_pretrained(base_dir)
    tokenizer.save_pretrained(base_dir)

    base = Qwen2ForCausalLM.from_pretrained(base_dir)
    peft_model = get_peft_model(base, LoraConfig(r=1, lora_alpha=1, lora_dropout=0.0, target_modules=["lm_head"]))
    layer = peft_model.base_model.model.lm_head
    with torch.no_grad():
        a = torch.ones(1, base.config.hidden_size)
        a[0, seven] = a[0, eight] = 0.0  # "7" and "8" keep their base successor (end of sequence)
        layer.lora_A["default"].weight.copy_(a)
        b = torch.zeros(len(tokenizer), 1)
        b[eight, 0], b[seven, 0] = 2 * LOGIT, -2 * LOGIT
        layer.lora_B["default"].weight.copy_(b)
    peft_model.save_pretrained(adapter_dir, save_embedding_layers=False)  # no tokenizer: read from the base model
    return str(base_dir), str(adapter_dir)


def run_cli(tmp_path, *args):
    out = tmp_path / "eval"
    code = cli_main(
        [
            "eval",
            "--benchmarks",
            "gsm8k",
            "amc23",
            "--dataset-source",
            *SOURCES,
            "--max_new_tokens",
            "4",
            "--output_dir",
            str(out),
            *args,
        ]
    )
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    return results, (out / "results.md").read_text()


# --------------------------------------------------------------------------------------------------- units


def test_metrics():
    correct = [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]
    completions = [[Completion("a", 3, False), Completion("b", 5, True)]] * 3
    metrics = benchmark_metrics(correct, completions)
    assert metrics["n"] == 3 and metrics["k"] == 2
    assert metrics["pass@1"] == pytest.approx(0.5) == metrics["avg@k"]
    assert metrics["pass@k"] == pytest.approx(2 / 3)
    assert metrics["mean_completion_tokens"] == 4 and metrics["truncated_frac"] == 0.5
    with pytest.raises(ValueError):
        benchmark_metrics([[1.0], [1.0, 0.0]])


def test_render_prompts_with_and_without_chat_template():
    tokenizer = char_tokenizer()
    messages = [[{"role": "system", "content": "be brief"}, {"role": "user", "content": "1+1=?"}]]
    texts, templated = render_prompts(messages, tokenizer)
    assert texts == ["be brief\n\n1+1=?"] and not templated
    tokenizer.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
        "{% if enable_thinking %}think{% endif %}{% if add_generation_prompt %}:{% endif %}"
    )
    texts, templated = render_prompts(messages, tokenizer, {"enable_thinking": True})
    assert texts == ["<system>be brief<user>1+1=?think:"] and templated
    assert render_prompts(["plain"], tokenizer) == (["plain"], False)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="temperature"):
        EvalArguments(model_name_or_path=["m"], num_samples=2)
    with pytest.raises(ValueError, match="Unknown benchmarks"):
        EvalArguments(model_name_or_path=["m"], benchmarks=["mmlu"])
    with pytest.raises(
        ValueError, match="--dataset_source, e.g. `--benchmarks amc23 --dataset_source amc23=my.jsonl`"
    ):
        EvalArguments(model_name_or_path=["m"], benchmarks=["my.jsonl"])
    with pytest.raises(ValueError, match="kind=value"):
        EvalArguments(model_name_or_path=["m"], benchmarks=["amc23"], dataset_source=["amc23"])
    with pytest.raises(ValueError, match="not among the benchmarks"):
        EvalArguments(model_name_or_path=["m"], benchmarks=["amc23"], dataset_source=["aime25=x.jsonl"])
    with pytest.raises(ValueError, match="at least one model"):
        EvalArguments()
    with pytest.raises(ValueError, match="embedded task 'carries', whose prompts are generated"):
        EvalArguments(model_name_or_path=["m"], benchmarks=["carries"], dataset_source=["carries=x.jsonl"])
    args = EvalArguments(model_name_or_path="m", benchmarks=["amc23"], dataset_source=["amc23=hf://a/b?split=train"])
    assert args.sources == {"amc23": "hf://a/b?split=train"} and args.model_name_or_path == ["m"]
    assert args.results_name == "results"
    args = EvalArguments(model_name_or_path="m", benchmarks=["carries", "gsm8k"], dataset_split=["gsm8k=train[:8]"])
    assert args.results_name == "results_gsm8k-train-8"  # a file of its own, with a name a shell takes as it is


def test_markdown_table_is_shaped_like_table_1():
    results = {
        "settings": {"num_samples": 1, "temperature": 0.0},
        "benchmarks": ["gsm8k", "amc23"],
        "models": {
            "Base": {"benchmarks": {"gsm8k": {"pass@1": 0.859}, "amc23": {"pass@1": 0.575}}},
            "Ours": {"benchmarks": {"gsm8k": {"pass@1": 0.86}, "amc23": {"pass@1": 0.6}}},
        },
    }
    table = [cells(line) for line in markdown_table(results).splitlines()]
    assert table[0] == ["Model", "GSM8K", "AMC23", "Avg"]
    assert table[2] == ["Base", "0.859", "0.575", "0.717"]
    assert table[3] == ["Ours", "0.860", "0.600", "0.730"]
    other = {**results, "models": {"New": {"benchmarks": {"gsm8k": {"pass@1": 1.0}}}}}
    merged = merge_results(results, other)
    assert list(merged["models"]) == ["Base", "Ours", "New"]
    assert cells(markdown_table(merged).splitlines()[4]) == ["New", "1.000", "–", "–"]


def cells(line: str) -> list[str]:
    """The cells of a Markdown table row."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_batched_generation_pads_left_and_keeps_the_prompt_order():
    """A digit answers with its letter (0 -> a, 1 -> b, ...): each output must follow its own prompt's last token."""
    tokenizer = char_tokenizer()
    ids = tokenizer.convert_tokens_to_ids
    eos = tokenizer.eos_token_id
    letters = {ids(str(d)): ids("abcdefghij"[d]) for d in range(10)}
    model = bigram_model(tokenizer, lambda t: letters.get(t, eos))
    prompts = ["x 3", "a much longer prompt 7", "0", "mid 5"]
    outputs = generate_transformers(model, tokenizer, prompts, batch_size=3, max_new_tokens=4)
    assert [[c.text for c in row] for row in outputs] == [["d"], ["h"], ["a"], ["f"]]
    assert all(row[0].num_tokens == 2 and not row[0].truncated for row in outputs)  # letter + end of sequence
    loop = bigram_model(tokenizer, lambda t: ids("1"))  # never ends
    (row,) = generate_transformers(loop, tokenizer, ["2"], max_new_tokens=3, num_samples=2, temperature=1.0)
    assert [c.text for c in row] == ["111", "111"] and all(c.truncated and c.num_tokens == 3 for c in row)


# --------------------------------------------------------------------------------------------------- end to end


def test_model_and_adapter_loading(models):
    base_dir, adapter_dir = models
    assert is_adapter(adapter_dir) and not is_adapter(base_dir)
    for path, answer in ((base_dir, "7"), (adapter_dir, "8")):
        model, tokenizer = load_model_and_tokenizer(path, device="cpu")
        assert tokenizer.padding_side == "left"
        (row,) = generate_transformers(model, tokenizer, ["what is 3 + 4?"], max_new_tokens=4)
        assert row[0].text == answer


def test_eval_cli_greedy_model_and_adapter(models, tmp_path):
    base_dir, adapter_dir = models
    results, table = run_cli(
        tmp_path, "--model", base_dir, adapter_dir, "--model_names", "base", "lora", "--backend", "transformers"
    )
    base, lora = results["models"]["base"], results["models"]["lora"]
    assert not base["adapter"] and lora["adapter"]
    assert base["benchmarks"]["gsm8k"]["n"] == 3 and base["benchmarks"]["amc23"]["n"] == 4
    assert base["benchmarks"]["gsm8k"]["pass@1"] == pytest.approx(2 / 3)  # answers 7: golds 7, 7, 8
    assert base["benchmarks"]["amc23"]["pass@1"] == pytest.approx(1 / 4)  # golds 7, 12, 8, 8
    assert lora["benchmarks"]["gsm8k"]["pass@1"] == pytest.approx(1 / 3)  # answers 8
    assert lora["benchmarks"]["amc23"]["pass@1"] == pytest.approx(2 / 4)
    assert base["average"]["pass@1"] == pytest.approx((2 / 3 + 1 / 4) / 2)
    assert "samples" not in base["benchmarks"]["gsm8k"]
    assert results["splits"] == {"gsm8k": "train", "amc23": "train"}  # a local file is read as one split, `train`
    lines = [cells(line) for line in table.splitlines()]
    assert lines[0] == ["Model", "GSM8K", "AMC23", "Avg"]
    assert lines[2] == ["base", "0.667", "0.250", "0.458"]
    assert lines[3] == ["lora", "0.333", "0.500", "0.417"]


def test_eval_avg_at_k_with_samples(models, tmp_path):
    base_dir, _ = models
    results, _ = run_cli(
        tmp_path,
        "--model",
        base_dir,
        "--num_samples",
        "2",
        "--temperature",
        "1.0",
        "--save_samples",
        "--max_samples",
        "3",
        "--backend",
        "transformers",
    )
    amc = results["models"][base_dir]["benchmarks"]["amc23"]
    assert amc["n"] == 3 and amc["k"] == 2
    samples = amc["samples"]
    assert [s["solution"] for s in samples] == ["7", "12", "8"]
    assert all(len(s["completions"]) == 2 and len(s["correct"]) == 2 for s in samples)
    assert [s["correct"] for s in samples] == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
    mean = sum(sum(s["correct"]) / 2 for s in samples) / 3
    assert amc["avg@k"] == pytest.approx(mean) == pytest.approx(1 / 3) == amc["pass@1"]
    assert amc["pass@k"] == pytest.approx(1 / 3)
    assert results["settings"]["num_samples"] == 2 and results["settings"]["backend"] == "transformers"
    assert 0.0 <= amc["pass@1"] <= 1.0


@pytest.mark.vllm
def test_eval_vllm_backend_matches_transformers(models, tmp_path):
    base_dir, adapter_dir = models
    common = dict(
        model_name_or_path=[base_dir, adapter_dir],
        model_names=["base", "lora"],
        benchmarks=["gsm8k", "amc23"],
        dataset_source=SOURCES,
        max_new_tokens=4,
        dtype="bfloat16",  # vLLM's attention kernels do not all take float32
        vllm_gpu_memory_utilization=0.3,
        vllm_max_model_length=512,
    )
    vllm = evaluate(EvalArguments(backend="vllm", output_dir=str(tmp_path / "vllm"), **common))
    hf = evaluate(EvalArguments(backend="transformers", output_dir=str(tmp_path / "hf"), **common))
    assert vllm["settings"]["backend"] == "vllm"
    for label in ("base", "lora"):
        for name in ("gsm8k", "amc23"):
            got = vllm["models"][label]["benchmarks"][name]["pass@1"]
            assert got == pytest.approx(hf["models"][label]["benchmarks"][name]["pass@1"])


def test_eval_grades_an_embedded_task_as_the_demo_does(tmp_path):
    # `lze-trl eval --config recipes/eval/cpu-carries.yaml`: the README's CPU evaluation, offline, on the shipped warm
    # start: the same greedy accuracy as the demo's `greedy_accuracy` on the same 200 held-out prompts (and on OOD)
    from lze_examples.demo import default_warm_start, greedy_accuracy, load_warm_start
    from lze_examples.demo.warmstart import shipped_path
    from lze_examples.tasks import get_task

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "eval" / "cpu-carries.yaml"
    warm = str(shipped_path(default_warm_start("carries")))
    out = tmp_path / "eval"
    argv = ["eval", "--config", str(recipe), "--model", warm, "--output_dir", str(out)]
    assert cli_main(argv) == 0
    assert cli_main([*argv, "--dataset_split", "carries=ood"]) == 0  # same folder: the in-domain files are kept
    in_domain, ood_results = (json.loads((out / f"{name}.json").read_text()) for name in ("results", NAME_OOD))
    assert in_domain["splits"] == {"carries": "test"} and ood_results["splits"] == {"carries": "ood"}
    assert (out / "results.md").read_text().rstrip().endswith("splits: carries=test")
    assert (out / f"{NAME_OOD}.md").read_text().rstrip().endswith("splits: carries=ood")
    scores = in_domain["models"][warm]["benchmarks"]["carries"]
    ood = ood_results["models"][warm]["benchmarks"]["carries"]
    model, tokenizer, _ = load_warm_start(default_warm_start("carries"))
    task = get_task("carries")
    assert scores["n"] == 200 and ood["n"] == task.DEFAULT_N_OOD
    test = greedy_accuracy(model, tokenizer, task.make_dataset(200, seed=0, split="test"), max_new_tokens=8)
    assert scores["pass@1"] == test["accuracy"] == 0.85  # the README's "0.85 before"
    ood_split = task.make_dataset(task.DEFAULT_N_OOD, seed=0, split="ood")
    assert ood["pass@1"] == greedy_accuracy(model, tokenizer, ood_split, max_new_tokens=8)["accuracy"]


def test_the_help_lists_every_benchmark_from_the_registries(capsys):
    # `lze-trl --help` and `lze-trl eval --help` list what `--benchmarks` accepts: the math kinds and embedded tasks
    from lze_examples.tasks import TASKS
    from lze_trl.data import KINDS

    names = [*KINDS, *TASKS]
    assert {"carries", "word_problems", "gsm8k"} <= set(names)
    assert cli_main(["--help"]) == 0
    usage = capsys.readouterr().out
    start = usage.index("  eval ")  # the examples' commands come after the library's
    eval_text = " ".join(usage[start : usage.index("\n\n", start)].split())
    assert eval_text == f"eval Pass@1 / avg@k of a model, checkpoint or LoRA adapter on {BENCHMARKS_HELP}."
    with pytest.raises(SystemExit) as exit:
        cli_main(["eval", "--help"])
    assert exit.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    option = help_text[help_text.index("--benchmarks BENCHMARKS [BENCHMARKS ...] ") :]
    assert option.startswith(f"--benchmarks BENCHMARKS [BENCHMARKS ...] Benchmarks by name: {BENCHMARKS_HELP}.")
    assert re.findall(r"\w+", BENCHMARKS_HELP.split("math benchmarks")[1]) == [
        *KINDS,
        "and",
        "the",
        "embedded",
        "tasks",
        *TASKS,
        "no",
        "download",
    ]


def test_the_readme_evaluation_runs_from_another_folder(tmp_path, monkeypatch):
    # `lze-trl eval --config recipes/eval/cpu-carries.yaml --model ...` from a folder other than the repository's root:
    # the recipe is read from the repository, the results go under the working directory
    from lze_examples.demo import default_warm_start
    from lze_examples.demo.warmstart import shipped_path

    monkeypatch.chdir(tmp_path)
    warm = str(shipped_path(default_warm_start("carries")))
    assert cli_main(["eval", "--config", "recipes/eval/cpu-carries.yaml", "--model", warm, "--max_samples", "8"]) == 0
    results = json.loads((tmp_path / "outputs" / "cpu-carries-eval" / "results.json").read_text())
    assert results["models"][warm]["benchmarks"]["carries"]["n"] == 8
