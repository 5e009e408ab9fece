"""
TRL's `AsyncGRPOTrainer` and `LZEAsyncGRPOTrainer` against a real `vllm serve` (vLLM's CPU build on a CPU) of the
embedded carries task's shipped warm start: each trainer's rollout worker (a spawned child process sending
`/v1/completions`), the weights synced by `ReloadWeightTransfer` (a safetensors file, then the server's
`reload_weights` over HTTP), and the server's log-probabilities checked against the trained model's.

The reward is `lze_examples.tasks.shared.arithmetic_reward`, a module-level function TRL's worker pickles into its
child.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import pytest
import trl
from packaging.specifiers import SpecifierSet
from vllm_cpu import (
    RAW_RESPONSE_TEMPLATE,
    free_loopback_port,
    on_cpu,
    running_server,
    save_warm_start,
    server_metadata_dir,
)

from lze_trl.common.coupling import ASYNC_TRL


pytestmark = [pytest.mark.vllm, pytest.mark.slow]

if not SpecifierSet(ASYNC_TRL).contains(trl.__version__):  # lze_trl/async_grpo/upstream.py refuses it
    pytest.skip("TRL's AsyncGRPOTrainer as lze_trl.async_grpo.cpu shims it is TRL 1.16's", allow_module_level=True)

# Both sides compute in float32 (the trainer's default dtype, the server's `--dtype float32`): the gaps measured after
# training were 9.5e-7 to 3.3e-6 (summation order of vLLM's CPU kernels against torch's), 300x below this tolerance;
# each optimizer step of the test moved the same log-probabilities by 1.8 to 8.5, so a server one sync behind (or still
# on the initial weights) is far outside it. (`test_vllm_server.py` needs 0.05: its server runs in bfloat16.)
SYNC_TOLERANCE = 1e-3
MAX_MODEL_LEN = 64  # the warm start's max_position_embeddings


def carries_dataset(n: int):
    """`n` prompts of the carries task's train split, as TRL's async worker takes them (conversational), with their
    answers (graded by `lze_examples.tasks.shared.arithmetic_reward`, which TRL's worker pickles into its child)."""
    from datasets import Dataset

    from lze_examples.tasks import get_task

    train = get_task("carries").make_splits(n, 8, 8, seed=0)["train"]
    prompts = [[{"role": "user", "content": p}] for p in train["prompt"]]
    return Dataset.from_dict({"prompt": prompts, "answer": list(train["answer"])})


@contextlib.contextmanager
def serving(model_dir: str, folder, served_model_name: str | None = None):
    """`vllm serve` of `model_dir` on a free loopback port, with its development endpoints (`VLLM_SERVER_DEV_MODE=1`:
    TRL's `/pause` and `/resume`, the reload's `/collective_rpc`), float32 as the trainer trains, eager (no
    torch.compile warm-up: half the start-up time); yields its base URL. `folder` holds its log and metadata."""
    port = free_loopback_port()
    env = dict(os.environ, VLLM_SERVER_DEV_MODE="1")
    env["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")
    if on_cpu():
        metadata = server_metadata_dir(os.path.join(folder, "vllm-metadata"))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (metadata, env.get("PYTHONPATH")) if p)
    vllm = os.path.join(os.path.dirname(sys.executable), "vllm")  # the `vllm` command of this environment
    command = [vllm, "serve", model_dir, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    command += ["--max-model-len", str(MAX_MODEL_LEN), "--gpu-memory-utilization", "0.3", "--enforce-eager"]
    command += ["--served-model-name", served_model_name] if served_model_name else []
    base_url = f"http://127.0.0.1:{port}"
    with running_server(command, env, os.path.join(folder, "server.log"), base_url):
        yield base_url


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """
    `vllm serve` of the carries warm start; yields `(base_url, model_dir)`. Untied embeddings (vLLM's CPU LM head
    would keep a stale copy of tied ones, see `ReloadWeightTransfer`).
    """
    model_dir = str(tmp_path_factory.mktemp("async-vllm-model"))
    save_warm_start(model_dir)
    with serving(model_dir, tmp_path_factory.mktemp("vllm-server")) as base_url:
        yield base_url, model_dir


@pytest.mark.timeout(300)  # 45 s here; a hang (a worker stuck on a dead server) fails, and the cleanup still runs
def test_trl_async_trainer_trains_with_its_worker_and_syncs_weights_to_vllm_serve(tmp_path, vllm_server):
    import torch
    from test_vllm_server import server_sequence_logps
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker
    from vllm_cpu import max_logp_gap, model_sequence_logps

    from lze_examples.tasks.shared import arithmetic_reward
    from lze_trl.async_grpo.cpu import cpu_construction, use_cpu_tree_attention
    from lze_trl.testing.vllm_reload import ReloadWeightTransfer

    base_url, model_dir = vllm_server
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.response_template = RAW_RESPONSE_TEMPLATE
    dataset = carries_dataset(8)
    args = AsyncGRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        max_steps=3,
        weight_sync_steps=1,
        num_generations=4,
        max_completion_length=8,
        max_inflight_tasks=8,  # about a step's rows (the token budget packs ~11): the worker and server idle between
        queue_maxsize=16,  # steps instead of generating ahead, which costs the trainer CPU on a 2-core machine
        learning_rate=0.05,
        vllm_server_base_url=base_url,
    )  # token_budget unset: the trainer asks the server for its max_model_len
    transfer = ReloadWeightTransfer(base_url, weights_dir=str(tmp_path / "weights"))
    with cpu_construction():
        trainer = AsyncGRPOTrainer(
            model_dir,
            arithmetic_reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            weight_transfer=transfer,
        )  # rollout_worker=None: TRL builds its AsyncRolloutWorker
    use_cpu_tree_attention()
    assert isinstance(trainer.rollout_worker, AsyncRolloutWorker)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    try:
        trainer.train()
    finally:  # TRL stops its worker when training ends; this also covers a start that failed before the loop
        trainer.rollout_worker.stop()
    assert trainer.state.global_step == 3 and args.token_budget == MAX_MODEL_LEN
    assert transfer.syncs == 4  # the cold sync, then one per step
    assert os.listdir(tmp_path / "weights") == ["model.safetensors"]  # written whole, then renamed
    assert any(not torch.equal(before[name], p) for name, p in trainer.model.named_parameters())
    logged = [entry for entry in trainer.state.log_history if "completions/mean_length" in entry]
    assert logged, "no metric from the worker's child"  # the rows came from the spawned worker's requests

    # the server now serves the trained weights: its log-probabilities of fixed sequences are the trained model's
    sequences = [tokenizer.encode(text) for text in ("12+5=17", "3+3=6 00", "(4*2)-1=7")]
    plain = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # the initial weights, sdpa
    initial = model_sequence_logps(plain, sequences)
    plain.load_state_dict(trainer.model.state_dict())
    served, trained = server_sequence_logps(base_url, sequences), model_sequence_logps(plain, sequences)
    assert max_logp_gap(served, trained) < SYNC_TOLERANCE
    assert max_logp_gap(served, initial) > 100 * SYNC_TOLERANCE  # the training moved them: not a vacuous match


@pytest.mark.timeout(400)
def test_lze_async_trainer_rolls_out_in_its_vllm_worker_and_resumes(tmp_path, vllm_server):
    """`LZEAsyncGRPOTrainer` with `rollout_worker=None`: TRL builds LZE's worker (its spawned child rolls out the
    trainer's orders against `vllm serve`, each group's `num_generations` rollouts in one go), only selected groups are
    trained, and a checkpoint resumes with the groups in flight ordered again."""
    import numpy as np
    from testing_utils import decided
    from transformers import AutoTokenizer

    from lze_examples.tasks.shared import arithmetic_reward
    from lze_trl.async_grpo.trainer import LZEAsyncGRPOConfig, LZEAsyncGRPOTrainer
    from lze_trl.async_grpo.worker import LZERolloutWorker
    from lze_trl.common.in_flight_files import load_in_flight
    from lze_trl.method import checkpoint as checkpoint_files
    from lze_trl.testing.vllm_reload import ReloadWeightTransfer

    base_url, model_dir = vllm_server
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.response_template = RAW_RESPONSE_TEMPLATE
    dataset = carries_dataset(16)

    def make(max_steps, **overrides):
        args = LZEAsyncGRPOConfig(
            output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", logging_steps=1, max_steps=max_steps,
            weight_sync_steps=1, num_generations=4, max_completion_length=8, max_inflight_tasks=8, queue_maxsize=16,
            learning_rate=1e-3, vllm_server_base_url=base_url, token_budget=0, per_device_train_batch_size=8,
            window_groups=4, selection_ratio=0.5, **overrides,
        )  # fmt: skip
        transfer = ReloadWeightTransfer(base_url, weights_dir=str(tmp_path / "weights"))
        return LZEAsyncGRPOTrainer(model_dir, arithmetic_reward, args=args, train_dataset=dataset,
                                   processing_class=tokenizer, weight_transfer=transfer)  # fmt: skip

    trainer = make(2, save_strategy="steps", save_steps=2)
    assert isinstance(trainer.rollout_worker, LZERolloutWorker)
    try:
        trainer.train()
    finally:
        trainer.rollout_worker.stop()
    assert trainer.state.global_step == 2 and trainer.weight_transfer.syncs == 3
    generated = [e["lze/generated_rollouts"] for e in trainer.state.log_history if "lze/generated_rollouts" in e]
    assert generated and all(g == 4 * 4 for g in generated)  # every group whole, from the worker's child
    selected, idle = decided(trainer.lze_window.decisions, 4)  # idle: batches handed on at zero advantage
    assert trainer._trained_groups and trainer._trained_groups <= selected | idle
    logged = [entry for entry in trainer.state.log_history if "completions/mean_length" in entry]
    assert logged, "no metric from the worker's child"

    folder = str(tmp_path / "out" / "checkpoint-2")
    saved, counters = checkpoint_files.load_state(folder)
    resumed = make(3)
    try:
        resumed.train(resume_from_checkpoint=folder)
    finally:
        resumed.rollout_worker.stop()
    assert resumed.state.global_step == 3 and resumed.model_version == counters["model_version"] + 2  # cold, step 3
    assert resumed.lze.batches_recorded > int(saved["run.batches_recorded"])
    # the first group the resumed run decided is one the checkpoint held open: ordered again, not skipped
    _, window = load_in_flight(folder, 0, 1, "this test")
    open_groups = set(np.concatenate([b["group_ids"] for b in json.loads(window["window_batches"])]))
    assert resumed.lze_window.decisions[0][0] in open_groups


@pytest.mark.timeout(300)
def test_a_model_with_tied_embeddings_trains_against_its_untied_copy_on_vllm_serve(tmp_path):
    # SmolLM2 ties its LM head to its input embedding, as the warm start does. vLLM's CPU backend keeps a tied head in
    # a packed copy that a reload leaves stale, so the server serves the untied copy (`untied_for_serving`) under the
    # trained model's name, and each sync also writes the trained embedding as the head: the server then serves the
    # tied model's weights.
    import torch
    from safetensors import safe_open
    from test_vllm_server import server_sequence_logps
    from transformers import AutoModelForCausalLM
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    from vllm_cpu import RAW_PROMPT_TEMPLATE, max_logp_gap, model_sequence_logps

    from lze_examples.demo.config import default_warm_start
    from lze_examples.demo.warmstart import load_warm_start
    from lze_examples.tasks.shared import arithmetic_reward
    from lze_trl.async_grpo.cpu import cpu_construction, use_cpu_tree_attention
    from lze_trl.testing.vllm_reload import ReloadWeightTransfer, untied_for_serving

    model, tokenizer, _ = load_warm_start(default_warm_start("carries"))
    assert model.config.tie_word_embeddings  # the warm start ties them, as SmolLM2 does
    model_dir, served_dir = str(tmp_path / "tied"), str(tmp_path / "untied")
    tokenizer.chat_template = RAW_PROMPT_TEMPLATE
    for folder in (model_dir, served_dir):
        tokenizer.save_pretrained(folder)
    model.save_pretrained(model_dir)
    untied_for_serving(model, served_dir)
    assert not AutoModelForCausalLM.from_pretrained(served_dir).config.tie_word_embeddings
    tokenizer.response_template = RAW_RESPONSE_TEMPLATE
    weights = tmp_path / "weights"
    with serving(served_dir, tmp_path, served_model_name=model_dir) as base_url:  # TRL's requests name model_dir
        args = AsyncGRPOConfig(
            output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", save_strategy="no", max_steps=2,
            weight_sync_steps=1, num_generations=4, max_completion_length=8, max_inflight_tasks=8, queue_maxsize=16,
            learning_rate=0.05, vllm_server_base_url=base_url,
        )  # fmt: skip
        transfer = ReloadWeightTransfer(base_url, weights_dir=str(weights), tied_lm_head="model.embed_tokens.weight")
        with cpu_construction():
            trainer = AsyncGRPOTrainer(model_dir, arithmetic_reward, args=args, train_dataset=carries_dataset(8),
                                       processing_class=tokenizer, weight_transfer=transfer)  # fmt: skip
        use_cpu_tree_attention()
        assert trainer.model.config.tie_word_embeddings
        try:
            trainer.train()
        finally:
            trainer.rollout_worker.stop()
        sequences = [tokenizer.encode(text) for text in ("12+5=17", "3+3=6 00", "(4*2)-1=7")]
        served = server_sequence_logps(base_url, sequences)
    assert trainer.state.global_step == 2 and transfer.syncs == 3
    embedding = trainer.model.get_input_embeddings().weight.detach()
    with safe_open(str(weights / "model.safetensors"), "pt") as f:
        assert torch.equal(f.get_tensor("lm_head.weight"), embedding)  # the head the trained embedding is
        assert torch.equal(f.get_tensor("model.embed_tokens.weight"), embedding)
    plain = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # tied, the initial weights
    initial = model_sequence_logps(plain, sequences)
    plain.load_state_dict(trainer.model.state_dict())
    trained = model_sequence_logps(plain, sequences)
    assert max_logp_gap(served, trained) < SYNC_TOLERANCE
    assert max_logp_gap(served, initial) > 100 * SYNC_TOLERANCE  # the training moved them: not a vacuous match


def test_reload_refuses_a_tied_lm_head_name_it_is_not_sent():
    import torch

    from lze_trl.testing.vllm_reload import ReloadWeightTransfer

    transfer = ReloadWeightTransfer("http://127.0.0.1:9", tied_lm_head="model.embed_tokens.weight")
    with pytest.raises(ValueError, match="tied_lm_head='model.embed_tokens.weight' is not among the 1 weights"):
        transfer.send_weights(iter([("model.embedding.weight", torch.zeros(2, 2))]))
    transfer.destroy()
