"""Deterministic, cached supervised warm start of the demo's tiny Qwen2 on the easier arithmetic levels.

The warm start is a plain torch training loop (next-token cross-entropy on the answer tokens and the end-of-sequence
token, prompt tokens masked out). It is a function of its [`WarmStartConfig`] alone, so its weights are cached on disk
under a hash of that config and loaded back by every later call with the same config.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..tasks import get_task
from ..tasks.arithmetic import CHARSET, WARM_START_LEVELS
from ..tiny import char_tokenizer, tiny_qwen2


CACHE_ENV = "LZE_TRL_CACHE"
"""Environment variable overriding the cache root (default `~/.cache/lze-trl`)."""
WARMSTART_FORMAT = 1
"""Bumped whenever the warm-start procedure changes, so stale caches are not reused."""
META_FILE = "warmstart.json"
SHIPPED_DIR = Path(__file__).parent / "weights"
"""Warm starts shipped with the package, one folder per cache key (weights as safetensors, the config that produced
them and its metadata): [`load_warm_start`] loads them instead of training, so every machine starts from the same
weights whatever its CPU (training the same config on another CPU gives slightly different floats)."""

CARRIES_WARM_START: dict[str, Any] = dict(
    hidden_size=128,
    num_layers=2,
    steps=1500,
    carry_drop_prob=0.3,
    levels=[0, 1, 2],
    task="carries",
)
"""The demo's warm start on the `"carries"` task (its weights are shipped, see `SHIPPED_DIR`)."""


@dataclass
class WarmStartConfig:
    r"""
    Everything that determines the warm-started model (its cache key is a hash of these fields).

    Parameters:
        hidden_size (`int`, *optional*, defaults to `64`):
            Width of the tiny Qwen2.
        num_layers (`int`, *optional*, defaults to `2`):
            Decoder layers.
        num_heads (`int`, *optional*, defaults to `4`):
            Attention heads (one key/value head).
        max_position_embeddings (`int`, *optional*, defaults to `64`):
            Longest sequence the model handles (prompts are at most 24 characters, answers at most 8).
        levels (`list[int]`, *optional*, defaults to `[0, 1, 2, 3]`):
            Difficulty levels of the supervised examples (the easier ones: the RL levels 4-5 are never shown).
        num_examples (`int`, *optional*, defaults to `40000`):
            Size of the pool of supervised strings (train-side prompts only).
        steps (`int`, *optional*, defaults to `1000`):
            Optimizer steps.
        batch_size (`int`, *optional*, defaults to `128`):
            Examples per step, drawn with replacement from the pool.
        learning_rate (`float`, *optional*, defaults to `3e-3`):
            Peak AdamW learning rate (linear warm-up over `warmup_steps`, then linear decay to
            `final_learning_rate`).
        final_learning_rate (`float`, *optional*, defaults to `3e-4`):
            Learning rate at the last step. Ending at a learning rate of the RL phase's order rather than 0 leaves
            the model where steps of that size are stable, so that RL does not start by undoing the warm start.
        warmup_steps (`int`, *optional*, defaults to `50`):
            Warm-up steps.
        weight_decay (`float`, *optional*, defaults to `0.0`):
            AdamW weight decay.
        carry_drop_prob (`float`, *optional*, defaults to `0.0`):
            Probability that an example whose columns carry or borrow shows the carry-dropped answer instead of the
            true one (see [`~lze_examples.tasks.arithmetic.warm_start_examples`]): the warm start then learns a common
            wrong procedure next to the right one, as models do from imperfect pretraining data.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the initialisation, the examples and the batch draws.
        task (`str`, *optional*, defaults to `"arithmetic"`):
            Embedded task whose `warm_start_examples` supervise the model (see [`~lze_examples.tasks.get_task`]); on
            `"carries"`, `carry_drop_prob` is the probability of forgetting each carry.
    """

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    max_position_embeddings: int = 64
    levels: list[int] = field(default_factory=lambda: list(WARM_START_LEVELS))
    num_examples: int = 40000
    steps: int = 1000
    batch_size: int = 128
    learning_rate: float = 3e-3
    final_learning_rate: float = 3e-4
    warmup_steps: int = 50
    weight_decay: float = 0.0
    carry_drop_prob: float = 0.0
    seed: int = 0
    task: str = "arithmetic"

    def __post_init__(self) -> None:
        get_task(self.task)  # a clear error on an unknown task

    def cache_key(self) -> str:
        """Hex digest (16 characters) of the config, the charset and the procedure's version."""
        config = asdict(self)
        if config["task"] == "arithmetic":
            del config["task"]  # the first task's keys predate the field: its caches stay valid
        payload = {"config": config, "charset": CHARSET, "format": WARMSTART_FORMAT}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def default_cache_dir() -> Path:
    """`$LZE_TRL_CACHE/warmstart`, else `~/.cache/lze-trl/warmstart`."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "lze-trl")
    return Path(root) / "warmstart"


def shipped_path(config: WarmStartConfig) -> Path | None:
    """The folder of `config`'s shipped weights under `SHIPPED_DIR`, or `None` when none is shipped."""
    folder = SHIPPED_DIR / config.cache_key()
    return folder if (folder / META_FILE).is_file() else None


def encode_examples(texts: list[str], tokenizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    Tokenises `"prompt=answer\\n"` strings as `prompt= answer <eos>`, right-padded.

    Args:
        texts (`list[str]`):
            Strings from [`~lze_examples.tasks.arithmetic.warm_start_examples`].
        tokenizer (`PreTrainedTokenizerFast`):
            The character tokenizer.

    Returns:
        `tuple[torch.Tensor, torch.Tensor, torch.Tensor]`: `input_ids`, `attention_mask` and `labels` (-100 on the
        prompt and the padding, so only the answer and the end-of-sequence token are learned).
    """
    rows = []
    for text in texts:
        prompt, answer = text.rstrip("\n").split("=", 1)
        prompt_ids = tokenizer(prompt + "=", add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((prompt_ids, answer_ids))
    length = max(len(p) + len(a) for p, a in rows)
    input_ids = torch.full((len(rows), length), tokenizer.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
    labels = torch.full((len(rows), length), -100, dtype=torch.long)
    for i, (prompt_ids, answer_ids) in enumerate(rows):
        n_p, n = len(prompt_ids), len(prompt_ids) + len(answer_ids)
        input_ids[i, :n] = torch.tensor(prompt_ids + answer_ids)
        attention_mask[i, :n] = 1
        labels[i, n_p:n] = torch.tensor(answer_ids)
    return input_ids, attention_mask, labels


def train_warm_start(config: WarmStartConfig, tokenizer=None, progress: bool = False) -> tuple[Any, dict[str, Any]]:
    """
    Runs the supervised warm start from scratch (no cache).

    Args:
        config ([`WarmStartConfig`]):
            The warm start to run.
        tokenizer (`PreTrainedTokenizerFast`, *optional*):
            Character tokenizer over `CHARSET`; built when not given.
        progress (`bool`, *optional*, defaults to `False`):
            Show a tqdm progress bar.

    Returns:
        `tuple[Qwen2ForCausalLM, dict]`: the model (in eval mode) and a summary (`final_loss`, `seconds`).
    """
    from tqdm.auto import tqdm

    tokenizer = tokenizer or char_tokenizer(CHARSET)
    model = tiny_qwen2(
        tokenizer,
        hidden_size=config.hidden_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        max_position_embeddings=config.max_position_embeddings,
        seed=config.seed,
    )
    texts = get_task(config.task).warm_start_examples(
        config.num_examples, seed=config.seed, levels=config.levels, carry_drop_prob=config.carry_drop_prob
    )
    input_ids, attention_mask, labels = encode_examples(texts, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    steps, warmup = config.steps, max(config.warmup_steps, 1)
    floor = config.final_learning_rate / config.learning_rate if config.learning_rate > 0 else 0.0

    def lr_factor(step: int) -> float:
        decay = max(0.0, 1.0 - step / max(steps - 1, 1))
        return min(1.0, (step + 1) / warmup) * (floor + (1.0 - floor) * decay)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    generator = torch.Generator().manual_seed(config.seed)
    start, losses = time.perf_counter(), []
    model.train()
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        for _ in tqdm(range(steps), desc="warm start", disable=not progress, leave=False, mininterval=1.0):
            idx = torch.randint(len(input_ids), (config.batch_size,), generator=generator)
            length = int(attention_mask[idx].sum(dim=1).max())
            loss = model(
                input_ids=input_ids[idx, :length],
                attention_mask=attention_mask[idx, :length],
                labels=labels[idx, :length],
            ).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
    model.eval()
    tail = losses[-50:] or [float("nan")]
    return model, {"final_loss": sum(tail) / len(tail), "seconds": time.perf_counter() - start}


def load_warm_start(
    config: WarmStartConfig | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = False,
) -> tuple[Any, Any, dict[str, Any]]:
    """
    The warm-started model of `config`: loaded from the cache when present, else trained and cached.

    Args:
        config ([`WarmStartConfig`], *optional*):
            The warm start; defaults to `WarmStartConfig()`.
        cache_dir (`str` or `os.PathLike`, *optional*):
            Root of the cache; the model lives in `<cache_dir>/<config.cache_key()>/`. Defaults to
            [`default_cache_dir`] (`$LZE_TRL_CACHE/warmstart` or `~/.cache/lze-trl/warmstart`).
        progress (`bool`, *optional*, defaults to `False`):
            Show a progress bar while training.

    Returns:
        `tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast, dict]`: the model (eval mode), its character tokenizer and
        the cache metadata (`key`, `path`, `from_cache`, `final_loss`, `seconds`, `config`).
    """
    from transformers import Qwen2ForCausalLM

    config = config or WarmStartConfig()
    tokenizer = char_tokenizer(CHARSET)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = folder / config.cache_key()
    shipped = shipped_path(config)
    if shipped is not None:
        folder = shipped
    meta_path = folder / META_FILE
    if meta_path.is_file():
        with open(meta_path) as f:
            meta = json.load(f)
        model = Qwen2ForCausalLM.from_pretrained(folder)
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.eval()
        return model, tokenizer, {**meta, "path": str(folder), "from_cache": True, "shipped": shipped is not None}
    model, summary = train_warm_start(config, tokenizer, progress=progress)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    meta = {"key": config.cache_key(), "config": asdict(config), **summary}
    with open(tmp / META_FILE, "w") as f:
        json.dump(meta, f, indent=2)
    # Move the files in place, metadata last: a reader only trusts a folder whose metadata exists.
    for path in sorted(tmp.iterdir(), key=lambda p: p.name == META_FILE):
        os.replace(path, folder / path.name)
    tmp.rmdir()
    return model, tokenizer, {**meta, "path": str(folder), "from_cache": False, "shipped": False}
