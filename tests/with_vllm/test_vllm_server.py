"""
LZE training with vLLM in server mode: `trl vllm-serve` started on the loopback interface with a tiny local Qwen2
(untied embeddings, see `tests/support/vllm_cpu.py`), the trainer generating through it (`vllm_mode="server"`).
"""

from __future__ import annotations

import os
import sys

import pytest
import requests
import torch
from testing_utils import count_grad_rows, expected_forward_rows, make_trainer
from vllm_cpu import (
    free_loopback_port,
    max_logp_gap,
    model_sequence_logps,
    on_cpu,
    running_server,
    save_tiny_model,
    server_metadata_dir,
)


pytestmark = [pytest.mark.vllm, pytest.mark.slow]

SYNC_TOLERANCE = 0.05  # as in test_vllm_colocate: bfloat16 in vLLM vs float32 in the trainer


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`trl vllm-serve` of a saved tiny model on a free loopback port; yields `(base_url, model_dir)`."""
    model_dir = tmp_path_factory.mktemp("vllm-server-model")
    save_tiny_model(model_dir, tie_word_embeddings=False)
    port = free_loopback_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    if on_cpu():
        metadata = server_metadata_dir(tmp_path_factory.mktemp("vllm-metadata"))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (metadata, env.get("PYTHONPATH")) if p)
    trl = os.path.join(os.path.dirname(sys.executable), "trl")  # the `trl` command of this environment
    command = [trl, "vllm-serve", "--model", str(model_dir), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--max_model_len", "512", "--gpu_memory_utilization", "0.3"]
    base_url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("vllm-server-log") / "server.log"
    with running_server(command, env, log, base_url):
        yield base_url, str(model_dir)


def server_trainer(tmp_path, server, selector="lze", **overrides):
    from transformers import AutoTokenizer

    base_url, model_dir = server
    values = dict(use_vllm=True, vllm_mode="server", vllm_server_base_url=base_url, max_steps=2)
    values.update(overrides)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return make_trainer(tmp_path, selector, model=model_dir, tokenizer=tokenizer, **values)


def server_sequence_logps(base_url, sequences):
    """The server's log-probabilities of `sequences[i][1:]` (prompt logprobs of `/v1/completions`)."""
    model = requests.get(f"{base_url}/v1/models", timeout=30).json()["data"][0]["id"]
    logps = []
    for seq in sequences:
        body = {"model": model, "prompt": seq, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}
        response = requests.post(f"{base_url}/v1/completions", json=body, timeout=60)
        response.raise_for_status()
        steps = response.json()["choices"][0]["prompt_logprobs"]
        logps.append(torch.tensor([step[str(token)]["logprob"] for step, token in zip(steps[1:], seq[1:])]))
    return logps


def test_server_weight_sync(tmp_path, server):
    trainer = server_trainer(tmp_path, server, "none")
    base_url = server[0]
    tokenizer = trainer.processing_class
    sequences = [tokenizer.encode(text) for text in ("12+5=17", "3+3=6 ok", "(4*2)-1=7")]
    model = trainer.model
    trainer.vllm_generation.sync_weights()  # an earlier test may have left other weights on the server
    assert max_logp_gap(server_sequence_logps(base_url, sequences), model_sequence_logps(model, sequences)) < (
        SYNC_TOLERANCE
    )
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    stale = max_logp_gap(server_sequence_logps(base_url, sequences), model_sequence_logps(model, sequences))
    assert stale > 0.5
    trainer.vllm_generation.sync_weights()
    synced = max_logp_gap(server_sequence_logps(base_url, sequences), model_sequence_logps(model, sequences))
    assert synced < SYNC_TOLERANCE, f"after sync: {synced:.4f} (before: {stale:.4f})"


def first_rollout_reward(completions, **kwargs):
    """The first rollout of each group of 4 passes: every group is live (pass rate 0.25), whatever is sampled."""
    return [float(i % 4 == 0) for i in range(len(completions))]


@pytest.mark.parametrize("selector", ["none", "lze"])
def test_server_training(tmp_path, server, selector):
    # The server's sampling is not reproducible across runs (its RNG is shared with the earlier tests' requests), so
    # the reward does not read the text: the selection is then the same on every run.
    trainer = server_trainer(tmp_path, server, selector, reward=first_rollout_reward, learning_rate=1e-2)
    rows = count_grad_rows(trainer.model)
    trainer.train()
    assert trainer.state.global_step == 2
    gaps = [e["sampling/sampling_logp_difference/max"] for e in trainer.state.log_history if "loss" in e]
    assert len(gaps) == 2 and max(gaps) < SYNC_TOLERANCE  # step 2 generated with step 1's update
    log = trainer.selection_log.to_pandas()
    if selector == "none":
        assert log["selected"].all() and rows["rows"] == 2 * 8
    else:  # 2 equal-energy groups per step: LZE keeps one (ties broken by order), only its rollouts reach the backward
        assert log.groupby("batch")["selected"].sum().tolist() == [1, 1]
        assert rows["rows"] == expected_forward_rows(log) == 2 * 4
