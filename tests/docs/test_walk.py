"""docs/source/walk.md follows a real step: each table's hops (file, function) are called in that order when the tiny
model trains one step with `LZEGRPOTrainer` (the defaults) and with `LZEAsyncGRPOTrainer` (the stand-in worker)."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

import pytest
import trl
from datasets import Dataset
from testing_utils import make_trainer, prompt_dataset

import lze_trl
from lze_examples.tiny import char_tokenizer, tiny_qwen2


WALK = Path(__file__).resolve().parents[2] / "docs" / "source" / "walk.md"
ROOTS = {"lze_trl": Path(lze_trl.__file__).parent, "trl": Path(trl.__file__).parent}


def hops(heading: str) -> list[tuple[str, str]]:
    """The (file, function) of each hop of the table under the `## ` heading that starts with `heading`."""
    section = re.split(r"^## ", WALK.read_text(), flags=re.M)
    text = next(s for s in section if s.startswith(heading))
    return re.findall(r"^\| \d+ \| `([^`]+)` \| `([^`]+)` \|", text, flags=re.M)


def traced(run) -> list[tuple[str, str]]:
    """Every call of a function of lze-trl or TRL while `run()` runs (all threads), as (file, qualified name)."""
    calls: list[tuple[str, str]] = []
    roots = {str(path): name for name, path in ROOTS.items()}

    def profile(frame, event, arg):
        if event == "call":
            filename = frame.f_code.co_filename
            for root, name in roots.items():
                if filename.startswith(root):
                    calls.append((name + filename[len(root) :], frame.f_code.co_qualname))
                    break

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return calls


def missing_in_order(expected: list[tuple[str, str]], calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The hops of `expected` that do not follow the previous one in `calls` (empty when all happen in order)."""
    position, missing = 0, []
    for hop in expected:
        try:
            position = calls.index(hop, position) + 1
        except ValueError:
            missing.append(hop)
    return missing


def test_the_tables_name_functions_that_exist():
    for heading in ("`LZEGRPOTrainer`", "`LZEAsyncGRPOTrainer`"):
        table = hops(heading)
        assert len(table) >= 10
        for file, function in table:
            root, _, rest = file.partition("/")
            source = (ROOTS[root] / rest).read_text()
            name = function.split(".")[-1]
            assert re.search(rf"def {name}\b", source), f"{file} has no {function}"


def test_both_trainers_decide_through_the_same_functions_of_the_run():
    shared = "lze_trl/method/run.py"
    sync = [function for file, function in hops("`LZEGRPOTrainer`") if file == shared]
    asynchronous = [function for file, function in hops("`LZEAsyncGRPOTrainer`") if file == shared]
    life = ["LZERun.decide_batch", "LZERun.score", "LZERun.decide", "LZERun.select", "LZERun.record", "LZERun.close"]
    assert sync == life and asynchronous == life


@pytest.mark.slow
def test_the_sync_walk_follows_a_real_step(tmp_path):
    trainer = make_trainer(tmp_path, dataset=prompt_dataset(32), per_device_train_batch_size=32, max_steps=1)
    calls = traced(trainer.train)
    assert missing_in_order(hops("`LZEGRPOTrainer`"), calls) == []
    assert missing_in_order([("lze_trl/grpo/trainer.py", "no.such_hop")], calls)  # the check can fail


@pytest.mark.slow
def test_the_async_walk_follows_a_real_step(tmp_path):
    pytest.importorskip("lze_trl.async_grpo.trainer", reason="TRL outside the async trainer's ASYNC_TRL")
    from lze_trl.async_grpo.trainer import LZEAsyncGRPOConfig, LZEAsyncGRPOTrainer
    from lze_trl.testing.async_stand_ins import InProcessWeightTransfer, StandInRolloutWorker

    tokenizer = char_tokenizer()
    path = str(tmp_path / "tiny")
    tiny_qwen2(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    rates = [0.0, 0.5, 1.0, 0.25, 0.75, 0.5, 0.0, 0.5]  # the stand-in answers "1" at the row's pass rate
    dataset = Dataset.from_dict({"prompt": [f"q{i}=" for i in range(8)], "pass_rate": rates})

    def correct(completions, **kwargs):
        return [float(c == "1") for c in completions]

    policy = tiny_qwen2(tokenizer)
    args = LZEAsyncGRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", max_steps=1, num_generations=4,
        token_budget=0, logging_steps=1, save_strategy="no", per_device_train_batch_size=8, selection_ratio=0.5,
        window_groups=4,
    )  # fmt: skip
    trainer = LZEAsyncGRPOTrainer(
        path,
        [correct],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_worker=StandInRolloutWorker(policy, tokenizer, dataset, [correct]),
        weight_transfer=InProcessWeightTransfer(policy),
    )
    calls = traced(trainer.train)
    assert missing_in_order(hops("`LZEAsyncGRPOTrainer`"), calls) == []
