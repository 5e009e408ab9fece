"""The GPU timing script (`benchmarks/gpu/`) at its tiny size on the CPU: every arm with both generation backends, its
counts checked against the trainer's own (`lze/` metrics) and against what each arm must generate; the EOS hazard that
sets completion lengths; the time budget and deadline; the report's table."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.gpu import report as gpu_report
from benchmarks.gpu import run as gpu_run
from benchmarks.gpu.arms import ARMS, BACKENDS, Arm
from benchmarks.gpu.timing import trainer_settings
from benchmarks.gpu.workload import SIZES, EOSHazard, build_model, full_vocab_tokenizer
from lze_trl import LZEGRPOConfig


ROOT = Path(__file__).resolve().parents[2]
TINY = SIZES["tiny"]
P, G = TINY.prompts_per_step, TINY.num_generations


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """`benchmarks/gpu/run.py --tiny` in a subprocess, as a person runs it; its JSON."""
    output = tmp_path_factory.mktemp("gpu_bench") / "tiny.json"
    command = [sys.executable, "benchmarks/gpu/run.py", "--tiny", "--output", str(output)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| grpo " in done.stdout  # the report's table, printed at the end
    return json.loads(output.read_text())


@pytest.mark.slow
def test_every_arm_runs_with_both_backends(tiny):
    assert tiny["complete"] and tiny["size"]["name"] == "tiny"
    records = {(r["arm"], r["backend"]): r for r in tiny["arms"]}
    assert set(records) == {(a, b) for a in ARMS for b in BACKENDS}
    env = tiny["environment"]
    assert env["device_name"].startswith("CPU") and env["versions"]["trl"] and env["date"]
    for (arm, backend), r in records.items():
        assert r["status"] == "ok", (arm, backend, r.get("error"))
        assert r["timed_steps"] == TINY.timed_steps
        assert r["config"]["use_transformers_continuous_batching"] is (backend == "continuous_batching")
        group = G // 2 if arm == "grpo_half" else G
        assert r["config"]["num_generations"] == group
        assert 0 < r["generation_s_per_step"] < r["s_per_step"]
        assert r["generation_calls_per_step"] == 1, (arm, backend)  # one generation call a step
        assert r["skipped_steps"] == TINY.warmup_steps
        for step in r["steps"]:
            lze = step["lze"]
            # the wrapped generation calls see what the trainer says it generated: every prompt's whole group
            assert step["generated_rollouts"] == lze["lze/generated_rollouts"] == P * group, (arm, backend, step)
            if step["timed"]:
                # the update's rows with a loss token: the selected groups' rollouts
                assert step["update_rows"] == lze["lze/update_rows"], (arm, backend, step)
                assert step["update_rows"] % group == 0
                assert step["update_forward_tokens"] >= step["update_loss_tokens"] >= step["update_rows"]
        # every rollout of GRPO reaches the update; the selectors keep fewer
        assert (r["update_rows_per_step"] == P * group) is arm.startswith("grpo")
        # lengths set by the EOS hazard with both backends (a random model alone runs to the limit)
        lengths = r["completion_length"]
        assert lengths["max"] <= TINY.max_completion_length
        assert 2 < lengths["mean"] < 0.6 * TINY.max_completion_length, (arm, backend, lengths)


@pytest.mark.slow
def test_report_tables_the_run(tiny, tmp_path):
    table = gpu_report.rows(tiny)
    assert len(table) == len(ARMS) * len(BACKENDS)
    by_arm = {(row[0], row[1]): dict(zip(gpu_report.HEADER, row)) for row in table}
    for backend in BACKENDS:
        assert by_arm["grpo", backend]["step / GRPO"] == "1.00"
        assert by_arm["grpo", backend]["generation / GRPO"] == "1.00"
        assert by_arm["lze", backend]["generation calls/step"] == "1.00"
        assert by_arm["lze", backend]["rollouts/step"] == str(P * G)
        assert by_arm["grpo_half", backend]["rollouts/step"] == str(P * G // 2)
    results, output = tmp_path / "tiny.json", tmp_path / "REPORT.md"
    results.write_text(json.dumps(tiny))
    assert gpu_report.main([str(results), "--output", str(output)]) == 0
    text = output.read_text()
    assert text.startswith("# GPU step times: tiny size on CPU") and "| grpo_half " in text
    assert gpu_report.main([str(results), "--output", str(output), "--check"]) == 0
    output.write_text(text.replace("grpo_half", "grpo_halves"))
    assert gpu_report.main([str(results), "--output", str(output), "--check"]) == 1


@pytest.mark.slow
def test_budget_skips_and_deadline_cuts(tmp_path):
    # No time at all: the first arm (nothing to predict from) stops after its first step, the next is not started.
    output = tmp_path / "short.json"
    argv = ["--tiny", "--arms", "grpo", "lze", "--backends", "transformers", "--budget_s", "0", "--deadline_s", "0"]
    assert gpu_run.main([*argv, "--output", str(output)]) == 0
    result = json.loads(output.read_text())
    grpo, lze = result["arms"]
    assert grpo["status"] == "cut" and len(grpo["steps"]) == 1 and grpo["timed_steps"] == 0
    assert lze["status"] == "skipped" and "> budget 0 s" in lze["reason"] and "steps" not in lze
    notes = [row[-1] for row in gpu_report.rows(result)]
    assert notes[0].startswith("cut by the deadline") and notes[1].startswith("skipped: predicted")


def test_budget_predicts_from_the_measured_steps():
    budget = gpu_run.Budget(start=0.0, budget_s=1e12)
    assert budget.predict(Arm("grpo", "transformers"), TINY) is None  # nothing measured yet: the arm runs
    step = {"seconds": 5.0, "generation_seconds": 4.0, "generation_calls": 2}
    budget.add({"backend": "transformers", "setup_seconds": 1.0, "steps": [step]})
    # 2 s a call, 1 s outside generation a step; an arm makes one call a step, 2 steps (1 not counted, 1 timed)
    assert budget.predict(Arm("lze", "transformers"), TINY) == 1.0 + 2 * (2.0 + 1.0)
    # another backend borrows the one measured until it has its own
    assert budget.predict(Arm("grpo", "continuous_batching"), TINY) == 1.0 + 2 * 3.0
    assert budget.fits(10.0) and not gpu_run.Budget(start=0.0, budget_s=0.0).fits(10.0)


def test_eos_hazard_ends_sequences_only_while_active():
    tokenizer = full_vocab_tokenizer(TINY.vocab_size)
    assert len(tokenizer) == TINY.vocab_size
    # every id decodes, the fillers included
    assert tokenizer.decode([TINY.vocab_size - 1]).startswith("<t")
    assert len(tokenizer.decode(list(range(TINY.vocab_size)), skip_special_tokens=True)) > TINY.vocab_size
    model = build_model(TINY, tokenizer).eval()
    inputs = torch.tensor([tokenizer("12+3=")["input_ids"]] * 4)
    with torch.no_grad():
        before = model(inputs).logits
        hazard = EOSHazard(model, tokenizer.eos_token_id, hazard=1.0)
        assert torch.equal(model(inputs).logits, before)  # inactive: the training forwards are untouched
        hazard.active = True
        assert (model(inputs).logits.argmax(-1) == tokenizer.eos_token_id).all()
        out = model.generate(inputs, max_new_tokens=10, do_sample=True)
        assert out.shape[1] == inputs.shape[1] + 1  # every sequence ends at its first token
        hazard.hazard = 0.25
        torch.manual_seed(0)
        out = model.generate(inputs.repeat(64, 1), max_new_tokens=40, do_sample=True)
    completions = out[:, inputs.shape[1] :]
    ended = (completions == tokenizer.eos_token_id).any(1)
    lengths = np.where(ended, (completions == tokenizer.eos_token_id).int().argmax(1) + 1, 40)
    assert 2.5 < lengths.mean() < 5.5  # geometric, mean 1 / 0.25 = 4 (truncation at 40 is negligible)
    hazard.remove()
    with torch.no_grad():
        assert torch.equal(model(inputs).logits, before)


def test_the_gpu_size_is_qwen25_15b_and_its_configs_are_valid(tmp_path):
    size = dataclasses.replace(SIZES["h100"], device="meta")
    model = build_model(size, full_vocab_tokenizer(size.vocab_size))
    assert sum(p.numel() for p in model.parameters()) == 1_543_714_304  # Qwen2.5-1.5B's count
    assert model.dtype == torch.bfloat16 and model.config.tie_word_embeddings
    for arm in ARMS:
        for backend in BACKENDS:
            settings = trainer_settings(Arm(arm, backend), SIZES["h100"], 3, str(tmp_path))
            assert settings["bf16"] and not settings["use_cpu"]
            # validated as on the GPU (the LZE settings, whole groups per micro-batch layout), here on the CPU
            args = LZEGRPOConfig(**{**settings, "bf16": False, "use_cpu": True})
            assert args.generation_batch_size == SIZES["h100"].prompts_per_step * args.num_generations
