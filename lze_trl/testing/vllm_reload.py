"""[`ReloadWeightTransfer`]: TRL's `WeightTransferProtocol` for a real `vllm serve` where TRL's NCCL transfer cannot
run (vLLM's CPU build): each sync writes the weights to a folder and has the server reload them over HTTP; and
[`untied_for_serving`], the copy of a model with tied embeddings that such a server serves.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import torch


class ReloadWeightTransfer:
    """
    TRL's `WeightTransferProtocol` for a `vllm serve` that NCCL cannot reach (vLLM's CPU build: TRL's default
    `WeightTransferClient` needs CUDA): each sync writes the trainer's weights to a folder as one safetensors file and
    asks the server, over HTTP, to reload its weights from that folder with vLLM's own `reload_weights`.

    A sync is four requests and one file: `POST /pause?mode=keep` (TRL's `VLLMClient.pause`: in-flight requests are
    frozen, not aborted); the weights written to `{weights_dir}/model.safetensors` (a temporary file, then
    `os.replace`, so that no reader sees half a file); `POST /collective_rpc` with method `reload_weights`
    (`weights_path=weights_dir`, `is_checkpoint_format=True`), which every worker of the server runs: vLLM's layer-wise
    reload, which also restores the layers its CPU backend repacked for its kernels; `POST
    /reset_prefix_cache?reset_running_requests=true`, so that no request goes on with keys and values computed by the
    old weights (the frozen requests are preempted and their prefixes recomputed with the new weights when they resume;
    the tokens they sampled before keep their old log-probabilities; TRL's NCCL transfer resets nothing, so its frozen
    requests go on with the old keys and values); and `POST /resume`.

    The server must run with `VLLM_SERVER_DEV_MODE=1` (all four endpoints are vLLM development endpoints, as TRL's
    `/pause` is) and read `weights_dir` on the trainer's filesystem. Tested against `vllm serve` of vLLM's CPU build
    0.31 (`tests/with_vllm/test_async_vllm.py`). With tied embeddings (SmolLM2's), vLLM's CPU backend keeps computing
    the LM head from its packed copy of the embedding, which the reload leaves stale: serve the model untied
    ([`untied_for_serving`]) and set `tied_lm_head`, so that each sync writes the LM head the trainer's embedding is.

    Cost per sync: a reference to every tensor the trainer sends, held until the file is written (no copy for CPU
    tensors that are contiguous); one write and one read of the file (the weights in the trainer's dtype); the
    server's full `load_weights`, during which it generates nothing; and the recomputed prefixes of the frozen
    requests. For a tiny model a sync takes about 50 ms; for a real one the disk and the reload dominate (seconds per
    GB), against NCCL's device-to-device copy on a GPU.

    Args:
        server_url (`str`):
            Base URL of the vLLM server, e.g. `"http://127.0.0.1:8000"` (the trainer's `vllm_server_base_url`).
        weights_dir (`str`, *optional*):
            Folder the weights are written to and the server reloads them from. vLLM loads every `*.safetensors` file
            in it, so it must hold no other weights file (a dedicated folder, or the served model's folder if its only
            weights file is `model.safetensors`, which the syncs then overwrite). If `None`, a temporary folder, made
            at the first sync and removed by [`~ReloadWeightTransfer.destroy`].
        timeout (`float`, *optional*, defaults to `1800.0`):
            Seconds allowed for each request to the server (a reload scales with the model's size). Training's start
            ([`~ReloadWeightTransfer.init_weight_transfer`]) waits up to 240 s for the server, TRL's default.
        tied_lm_head (`str`, *optional*):
            For a model whose LM head is its input embedding (`tie_word_embeddings=True`): the embedding's name among
            the weights TRL sends (e.g. `"model.embed_tokens.weight"`; TRL sends a tied weight once, under that name).
            Each sync then also writes it as `lm_head.weight`, for a server of the untied copy.

    Attributes:
        syncs (`int`):
            Number of syncs done.
    """

    def __init__(
        self,
        server_url: str,
        weights_dir: str | None = None,
        timeout: float = 1800.0,
        tied_lm_head: str | None = None,
    ) -> None:
        from trl.experimental.async_grpo.vllm_client import VLLMClient

        self.client = VLLMClient(server_url)
        self.server_url = self.client.server_url
        self.weights_dir = weights_dir
        self.timeout = timeout
        self.tied_lm_head = tied_lm_head
        self.syncs = 0
        self._temporary_dir: str | None = None

    def _request(self, path: str, **kwargs: Any) -> Any:
        import requests

        response = requests.post(f"{self.server_url}{path}", timeout=self.timeout, **kwargs)
        if response.status_code == 404:
            raise RuntimeError(
                f"The vLLM server at {self.server_url} does not expose `{path}`: start it with VLLM_SERVER_DEV_MODE=1 "
                "in its environment."
            )
        response.raise_for_status()
        return response

    def init_weight_transfer(self) -> None:
        """Waits for the server and checks that it exposes the development endpoints a sync needs."""
        import requests

        self.client.wait_for_server_ready()
        if requests.get(f"{self.server_url}/is_paused", timeout=self.timeout).status_code == 404:
            raise RuntimeError(
                f"The vLLM server at {self.server_url} has no development endpoints (`/pause`, `/collective_rpc`): "
                "start it with VLLM_SERVER_DEV_MODE=1 in its environment."
            )

    def pause(self) -> None:
        """Freezes the server's in-flight requests (`/pause?mode=keep`)."""
        self.client.pause(timeout=self.timeout)

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Writes the `(name, tensor)` pairs to `{weights_dir}/model.safetensors` and has the server reload them."""
        from safetensors.torch import save_file

        folder = self.weights_dir
        if folder is None:
            if self._temporary_dir is None:
                self._temporary_dir = tempfile.mkdtemp(prefix="lze-vllm-weights-")
            folder = self._temporary_dir
        os.makedirs(folder, exist_ok=True)
        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in iterator}
        if self.tied_lm_head is not None:
            if self.tied_lm_head not in tensors:
                raise ValueError(
                    f"tied_lm_head={self.tied_lm_head!r} is not among the {len(tensors)} weights TRL sends (e.g. "
                    f"{sorted(tensors)[:3]}): name the model's input embedding, or leave tied_lm_head unset for a "
                    "model without tied embeddings."
                )
            tensors.setdefault("lm_head.weight", tensors[self.tied_lm_head].clone())  # a file holds no shared tensor
        path = os.path.join(folder, "model.safetensors")
        save_file(tensors, path + ".tmp")  # not `*.safetensors`: vLLM would load it
        os.replace(path + ".tmp", path)
        body = {"method": "reload_weights", "kwargs": {"weights_path": folder, "is_checkpoint_format": True}}
        self._request("/collective_rpc", json=body)
        reset = self._request("/reset_prefix_cache", params={"reset_running_requests": "true"})
        if not reset.json().get("success", False):
            raise RuntimeError(f"The vLLM server at {self.server_url} did not reset its prefix cache after a reload.")
        self.syncs += 1

    def resume(self) -> None:
        """Resumes generation (`/resume`)."""
        self.client.resume(timeout=self.timeout)

    def destroy(self) -> None:
        """Removes the temporary folder, if one was made (a later sync makes a new one)."""
        if self._temporary_dir is not None:
            shutil.rmtree(self._temporary_dir, ignore_errors=True)
            self._temporary_dir = None


def untied_for_serving(model: Any, path: str) -> None:
    """
    Saves `model` (a transformers causal LM) to `path` as `vllm serve` of vLLM's CPU build serves it for
    [`ReloadWeightTransfer`]: with its LM head untied from its input embedding (a copy of it), since that backend keeps
    a tied LM head in a packed copy that a reload leaves stale. Train the tied model itself, with
    `ReloadWeightTransfer(tied_lm_head=...)`, and serve the copy under the trainer's model name, which TRL's worker
    names in its requests (`vllm serve PATH --served-model-name NAME`, NAME the trained model's `_name_or_path`). A
    model without tied embeddings is saved as it is.
    """
    import copy

    served = copy.deepcopy(model)
    config = served.config.get_text_config()
    if getattr(config, "tie_word_embeddings", False):
        config.tie_word_embeddings = served.config.tie_word_embeddings = False
        embedding = served.get_input_embeddings().weight
        served.get_output_embeddings().weight = torch.nn.Parameter(embedding.detach().clone())
    served.save_pretrained(path)
