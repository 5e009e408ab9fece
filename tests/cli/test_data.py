"""Tests for `lze_trl.data`, offline: local fixtures in each dataset's Hub schema and a faked Hub for routing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lze_trl.data import (
    KINDS,
    MATH_SUBJECTS,
    PROMPT_TEMPLATE,
    SourceRef,
    gsm8k_gold,
    load_math_dataset,
    parse_source,
    strip_dapo_prompt,
)
from lze_trl.rewards import math_accuracy


FIXTURES = Path(__file__).parents[1] / "fixtures" / "math"
INSTRUCTION = "\nPlease reason step by step, and put your final answer within \\boxed{}."

# kind, fixture file, expected gold answers (in file order, after deduplication), expected extra columns
CASES = [
    ("gsm8k", "gsm8k.jsonl", ["72", "10", "15000", "-7"], []),
    (
        "math",
        "hendrycks_math.jsonl",
        [
            "0",
            r"\dfrac{3}{8}",
            r"30^\circ",
            r"(-\infty,1] \cup [3,\infty)",
            r"1,\!000",
            r"\$18.90",
            r"\begin{pmatrix} -1 \\ 2 \end{pmatrix}",
            r"\frac{1}{2}",
        ],
        ["level", "type"],
    ),
    (
        "math500",
        "math500.jsonl",
        [r"\left( 3, \frac{\pi}{2} \right)", r"\frac{14}{3}", r"\text{Evelyn}", "3"],
        ["subject", "level", "unique_id"],
    ),
    ("dapo_math", "dapo_math.jsonl", ["34", "-3", "2015"], ["data_source"]),
    ("amc23", "amc23.jsonl", ["27", "36", "45"], ["id", "url"]),
    ("aime24", "aime_2024.jsonl", ["204", "025"], ["id", "url", "year"]),
    ("aime24", "aime24_math_ai.jsonl", ["204", "025"], ["id", "url"]),
    ("aime25", "aime25.jsonl", ["70", "16"], ["id"]),
    ("aime25", "aime2025_opencompass.jsonl", ["70", "16"], []),
]
CASE_IDS = [f"{kind}-{file}" for kind, file, _, _ in CASES]


def read_jsonl(name: str) -> list[dict]:
    with open(FIXTURES / name) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize(("kind", "file", "golds", "extra"), CASES, ids=CASE_IDS)
def test_local_fixture_gold_answers_and_columns(kind, file, golds, extra):
    dataset = load_math_dataset(kind, str(FIXTURES / file))
    assert isinstance(dataset, datasets.Dataset)
    assert dataset.column_names == ["prompt", "solution", *extra]
    assert dataset["solution"][:] == golds
    for prompt in dataset["prompt"]:
        assert [m["role"] for m in prompt] == ["user"]
        assert prompt[0]["content"].endswith(INSTRUCTION)
        assert prompt[0]["content"][: -len(INSTRUCTION)].strip()


@pytest.mark.parametrize(("kind", "file", "golds", "extra"), CASES, ids=CASE_IDS)
def test_end_to_end_gold_in_a_box_scores_one(kind, file, golds, extra):
    dataset = load_math_dataset(kind, str(FIXTURES / file))
    solutions = dataset["solution"][:]
    boxed = [
        [{"role": "assistant", "content": f"Step by step ... so the answer is $\\boxed{{{s}}}$."}] for s in solutions
    ]
    assert math_accuracy(boxed, solutions) == [1.0] * len(solutions)
    assert math_accuracy([r"\boxed{123456789}"] * len(solutions), solutions) == [0.0] * len(solutions)


def test_gsm8k_problem_and_gold():
    dataset = load_math_dataset("gsm8k", str(FIXTURES / "gsm8k.jsonl"))
    raw = read_jsonl("gsm8k.jsonl")
    assert dataset[0]["prompt"][0]["content"] == PROMPT_TEMPLATE.format(problem=raw[0]["question"])
    assert dataset[2]["solution"] == "15000"  # "#### 15,000": thousands separator removed


@pytest.mark.parametrize(
    ("answer", "gold"),
    [("a\n#### 72", "72"), ("#### 1,600", "1600"), ("x #### y\n#### -3.5 ", "-3.5"), ("no marker", "")],
)
def test_gsm8k_gold(answer, gold):
    assert gsm8k_gold(answer) == gold


def test_math_keeps_level_type_and_takes_the_last_nested_box():
    dataset = load_math_dataset("math", str(FIXTURES / "hendrycks_math.jsonl"))
    assert dataset["type"][:] == [row["type"] for row in read_jsonl("hendrycks_math.jsonl")]
    counting = dataset[1]  # its solution has \boxed{3} first, then \boxed{\dfrac{3}{8}}
    assert (counting["level"], counting["type"], counting["solution"]) == (
        "Level 2",
        "Counting & Probability",
        r"\dfrac{3}{8}",
    )


def test_math_drops_rows_without_a_box(tmp_path):
    rows = read_jsonl("hendrycks_math.jsonl")[:2]
    rows[0]["solution"] = "No boxed answer here."
    path = tmp_path / "math.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_math_dataset("math", str(path))["solution"][:] == [r"\dfrac{3}{8}"]


def test_dapo_strips_wrapper_and_deduplicates_by_problem():
    raw = read_jsonl("dapo_math.jsonl")
    assert len(raw) == 6
    dataset = load_math_dataset("dapo_math", str(FIXTURES / "dapo_math.jsonl"), chat_template_only=True)
    problems = [p[0]["content"] for p in dataset["prompt"]]
    assert len(dataset) == len(set(problems)) == 3
    assert problems[0].startswith("In triangle $ABC$") and problems[0].endswith("find $a + b + c$.")
    assert not any("Answer:" in p or "step by step" in p for p in problems)
    assert dataset["data_source"][:] == ["math_dapo"] * 3


def test_dapo_deduplication_keeps_first_occurrence_order(tmp_path):
    raw = read_jsonl("dapo_math.jsonl")
    reordered = [raw[3], raw[1], raw[0], raw[3], raw[2]]  # problems: C, B, A, C, A
    path = tmp_path / "dapo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in reordered))
    assert load_math_dataset("dapo_math", str(path))["solution"][:] == ["2015", "-3", "34"]


def test_dapo_deduplicates_the_same_problem_under_different_wrappers(tmp_path):
    rows = read_jsonl("dapo_math.jsonl")[:2]
    unwrapped = json.loads(json.dumps(rows[0]))
    unwrapped["prompt"][0]["content"] = strip_dapo_prompt(rows[0]["prompt"][0]["content"])
    path = tmp_path / "dapo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [unwrapped, *rows]))
    dataset = load_math_dataset("dapo_math", str(path))
    assert dataset["solution"][:] == ["34", "-3"]


def test_dapo_with_a_shared_system_message_keeps_distinct_problems(tmp_path):
    rows = read_jsonl("dapo_math.jsonl")
    for row in rows:
        row["prompt"].insert(0, {"content": "You are a math expert.", "role": "system"})
    path = tmp_path / "dapo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_math_dataset("dapo_math", str(path))["solution"][:] == ["34", "-3", "2015"]


def test_strip_dapo_prompt():
    problem = "Find $x$ if $x + 1 = 2$."
    wrapped = read_jsonl("dapo_math.jsonl")[0]["prompt"][0]["content"].replace(
        strip_dapo_prompt(read_jsonl("dapo_math.jsonl")[0]["prompt"][0]["content"]), problem
    )
    assert wrapped != problem
    assert strip_dapo_prompt(wrapped) == problem
    assert strip_dapo_prompt(problem) == problem  # no wrapper: unchanged
    assert strip_dapo_prompt("Solve the following math problem: 1+1") == "Solve the following math problem: 1+1"


def test_system_prompt_and_chat_template_only():
    path = str(FIXTURES / "aime25.jsonl")
    dataset = load_math_dataset("aime25", path, system_prompt="You are a careful mathematician.")
    assert dataset[0]["prompt"][0] == {"role": "system", "content": "You are a careful mathematician."}
    assert dataset[0]["prompt"][1]["content"].endswith(INSTRUCTION)
    bare = load_math_dataset("aime25", path, chat_template_only=True)
    assert bare[0]["prompt"] == [{"role": "user", "content": read_jsonl("aime25.jsonl")[0]["problem"]}]


@pytest.mark.parametrize("enable_thinking", [True, False])
def test_enable_thinking_is_recorded_and_leaves_the_prompt_untouched(enable_thinking):
    path = str(FIXTURES / "aime25.jsonl")
    plain = load_math_dataset("aime25", path)
    dataset = load_math_dataset("aime25", path, enable_thinking=enable_thinking)
    assert dataset["prompt"][:] == plain["prompt"][:]
    assert dataset["chat_template_kwargs"][:] == [{"enable_thinking": enable_thinking}] * len(dataset)
    assert "chat_template_kwargs" not in plain.column_names


def test_enable_thinking_reaches_trl_apply_chat_template():
    from trl.data_utils import maybe_apply_chat_template

    class RecordingTokenizer:
        def apply_chat_template(self, messages, **kwargs):
            self.kwargs = kwargs
            return "rendered"

    tokenizer = RecordingTokenizer()
    example = load_math_dataset("aime25", str(FIXTURES / "aime25.jsonl"), enable_thinking=False)[0]
    maybe_apply_chat_template(example, tokenizer)
    assert tokenizer.kwargs["enable_thinking"] is False


def test_unknown_kind_and_bad_enable_thinking():
    with pytest.raises(ValueError, match=r"Unknown `kind` 'gsm9k'; valid kinds are \['aime24', 'aime25', 'amc23'"):
        load_math_dataset("gsm9k")
    with pytest.raises(ValueError, match="`enable_thinking` must be None, True or False"):
        load_math_dataset("gsm8k", str(FIXTURES / "gsm8k.jsonl"), enable_thinking="no")


def test_wrong_schema_names_the_missing_column():
    with pytest.raises(ValueError, match=r"kind 'gsm8k' lack the column 'question'.*problem"):
        load_math_dataset("gsm8k", str(FIXTURES / "math500.jsonl"))


def test_local_parquet_glob_and_list(tmp_path):
    rows = read_jsonl("dapo_math.jsonl")
    pq.write_table(pa.Table.from_pylist(rows[:3]), tmp_path / "part-0.parquet")
    pq.write_table(pa.Table.from_pylist(rows[3:]), tmp_path / "part-1.parquet")
    from_glob = load_math_dataset("dapo_math", str(tmp_path / "*.parquet"))
    from_list = load_math_dataset("dapo_math", [tmp_path / "part-0.parquet", tmp_path / "part-1.parquet"])
    assert from_glob["solution"][:] == from_list["solution"][:] == ["34", "-3", "2015"]
    assert load_math_dataset("dapo_math", tmp_path / "part-1.parquet")["solution"][:] == ["2015", "-3", "34"]


def test_missing_local_files():
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        load_math_dataset("gsm8k", str(FIXTURES / "nothing-here.jsonl"))
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        load_math_dataset("gsm8k", str(FIXTURES / "nothing-here-*.jsonl"))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("openai/gsm8k", SourceRef(repo_id="openai/gsm8k")),
        ("openai/gsm8k@refs/convert/parquet", SourceRef(repo_id="openai/gsm8k", revision="refs/convert/parquet")),
        ("openai/gsm8k?config=socratic", SourceRef(repo_id="openai/gsm8k", config="socratic")),
        ("hf://openai/gsm8k", SourceRef(repo_id="openai/gsm8k")),
        (
            "hf://datasets/openai/gsm8k?config=main&split=test",
            SourceRef(repo_id="openai/gsm8k", config="main", split="test"),
        ),
        (
            "hf://EleutherAI/hendrycks_math?config=algebra",
            SourceRef(repo_id="EleutherAI/hendrycks_math", config="algebra"),
        ),
        (
            "hf://math-ai/aime25@abc123?split=test",
            SourceRef(repo_id="math-ai/aime25", split="test", revision="abc123"),
        ),
        ("https://huggingface.co/datasets/HuggingFaceH4/MATH-500", SourceRef(repo_id="HuggingFaceH4/MATH-500")),
        (
            "https://huggingface.co/datasets/openai/gsm8k?config=main&split=test&revision=main",
            SourceRef(repo_id="openai/gsm8k", config="main", split="test", revision="main"),
        ),
        (
            "https://huggingface.co/datasets/openai/gsm8k/viewer/socratic/test",
            SourceRef(repo_id="openai/gsm8k", config="socratic", split="test"),
        ),
        ("https://hf.co/datasets/math-ai/amc23/viewer/default", SourceRef(repo_id="math-ai/amc23", config="default")),
        ("data/train.jsonl", SourceRef(data_files=("data/train.jsonl",), file_format="json")),
        ("/abs/data/*.json", SourceRef(data_files=("/abs/data/*.json",), file_format="json")),
        ("train-0000.PARQUET", SourceRef(data_files=("train-0000.PARQUET",), file_format="parquet")),
        (["a.jsonl", "b.json"], SourceRef(data_files=("a.jsonl", "b.json"), file_format="json")),
        (Path("x/y.parquet"), SourceRef(data_files=(os.path.join("x", "y.parquet"),), file_format="parquet")),
    ],
)
def test_parse_source(source, expected):
    assert parse_source(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "non-empty"),
        ("gsm8k", "neither a Hub dataset"),
        ("a/b/c", "neither a Hub dataset"),
        ("data/*", "neither a Hub dataset"),
        ("data/train.csv", "unsupported file format '.csv'"),
        ("data/train.json.gz", "unsupported file format '.gz'"),
        ("hf://gsm8k", "does not name a Hub dataset"),
        ("hf://openai/gsm8k?subset=main", r"unknown query key\(s\) \['subset'\]"),
        ("hf://openai/gsm8k?split=", "exactly one non-empty value for 'split'"),
        ("hf://openai/gsm8k?split=a&split=b", "exactly one non-empty value for 'split'"),
        ("hf://openai/gsm8k?split", "malformed query"),
        ("https://example.com/datasets/openai/gsm8k", "not a Hub dataset URL"),
        ("https://huggingface.co/openai/gsm8k", "not a Hub dataset URL"),
        ("s3://bucket/openai/gsm8k", "not a Hub dataset URL"),
        ("https://huggingface.co/datasets/openai/gsm8k/blob/main/README.md", "viewer/<config>/<split>"),
        ("https://huggingface.co/datasets/openai/gsm8k/viewer/main/test?split=train", "two different values"),
        ("data/train.jsonl?split=test", "local files take no query"),
        ([], "at least one non-empty path"),
        (["a.jsonl", "b.parquet"], "all be .json/.jsonl or all .parquet"),
        (["a.jsonl", "b.txt"], "all be .json/.jsonl or all .parquet"),
        (42, "must be a non-empty string"),
    ],
)
def test_parse_source_rejects_malformed_references(source, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_source(source)
    assert "`source`" in str(info.value)


class FakeHub:
    """Stands in for `datasets.load_dataset` on Hub ids, serving fixture rows and recording each call."""

    def __init__(self):
        self.calls = []
        self.real_load_dataset = datasets.load_dataset

    def __call__(self, path, name=None, *, split=None, revision=None, **kwargs):
        if path in ("json", "parquet"):
            return self.real_load_dataset(path, name, split=split, **kwargs)
        self.calls.append((path, name, split, revision))
        if path == "EleutherAI/hendrycks_math":
            rows = [r for r in read_jsonl("hendrycks_math.jsonl") if _subject(r["type"]) == name]
        else:
            rows = read_jsonl(
                {"openai/gsm8k": "gsm8k.jsonl", "opencompass/AIME2025": "aime2025_opencompass.jsonl"}[path]
            )
        return datasets.Dataset.from_list(rows)


def _subject(math_type: str) -> str:
    return math_type.lower().replace(" & ", "_and_").replace(" ", "_")


@pytest.fixture
def fake_hub(monkeypatch):
    hub = FakeHub()
    monkeypatch.setattr(datasets, "load_dataset", hub)
    return hub


def test_math_default_source_loads_every_subject_config(fake_hub):
    dataset = load_math_dataset("math")
    assert fake_hub.calls == [("EleutherAI/hendrycks_math", subject, "train", None) for subject in MATH_SUBJECTS]
    assert sorted({_subject(t) for t in dataset["type"]}) == sorted(MATH_SUBJECTS)
    assert len(dataset) == len(read_jsonl("hendrycks_math.jsonl"))


def test_math_single_config_from_url(fake_hub):
    dataset = load_math_dataset("math", "hf://EleutherAI/hendrycks_math?config=geometry&split=test")
    assert fake_hub.calls == [("EleutherAI/hendrycks_math", "geometry", "test", None)]
    assert dataset["solution"][:] == [r"30^\circ"]


def test_hub_split_and_config_routing(fake_hub):
    load_math_dataset("gsm8k", split="test")
    load_math_dataset("gsm8k", "https://huggingface.co/datasets/openai/gsm8k/viewer/main/test")
    load_math_dataset("gsm8k", "openai/gsm8k@v1.0")
    load_math_dataset("aime25", "opencompass/AIME2025")
    assert fake_hub.calls == [
        ("openai/gsm8k", "main", "test", None),
        ("openai/gsm8k", "main", "test", None),
        ("openai/gsm8k", "main", "train", "v1.0"),
        ("opencompass/AIME2025", "AIME2025-I", "test", None),
        ("opencompass/AIME2025", "AIME2025-II", "test", None),
    ]
    with pytest.raises(ValueError, match="`split='train'` conflicts with the split 'test'"):
        load_math_dataset("gsm8k", "hf://openai/gsm8k?split=test", split="train")


def test_every_kind_has_a_known_canonical_source():
    from lze_trl.data import KNOWN_HUB_DATASETS

    assert set(KINDS) == {"gsm8k", "math", "math500", "dapo_math", "amc23", "aime24", "aime25"}
    for spec in KINDS.values():
        assert parse_source(spec.hub_id).repo_id in KNOWN_HUB_DATASETS
