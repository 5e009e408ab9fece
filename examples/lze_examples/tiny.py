"""Tiny offline models: a character tokenizer and a small Qwen2 built from a config, nothing downloaded.

Used by the tests and the CPU demo.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM


SPECIAL_TOKENS = ("<pad>", "<eos>", "<unk>")
DEFAULT_CHARSET = "0123456789+-*/=()., \nabcdefghijklmnopqrstuvwxyz?:"


def char_tokenizer(charset: str = DEFAULT_CHARSET) -> PreTrainedTokenizerFast:
    """
    A character-level tokenizer (`tokenizers` library): one token per character of `charset`, plus pad/eos/unk.

    Args:
        charset (`str`, *optional*):
            The characters to cover; others map to `<unk>`.

    Returns:
        `PreTrainedTokenizerFast`: left-padding tokenizer (as GRPO needs) with `pad_token` and `eos_token` set.
    """
    chars = list(dict.fromkeys(charset))
    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *chars])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", padding_side="left"
    )
    return fast


def tiny_qwen2(
    tokenizer: PreTrainedTokenizerFast,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 2,
    max_position_embeddings: int = 128,
    seed: int = 0,
) -> Qwen2ForCausalLM:
    """
    A small randomly initialised Qwen2 causal LM sized to `tokenizer`.

    Args:
        tokenizer (`PreTrainedTokenizerFast`):
            Tokenizer whose vocabulary and special tokens the model uses.
        hidden_size (`int`, *optional*, defaults to `32`):
            Width of the model.
        num_layers (`int`, *optional*, defaults to `2`):
            Number of decoder layers.
        num_heads (`int`, *optional*, defaults to `2`):
            Attention heads (one key/value head).
        max_position_embeddings (`int`, *optional*, defaults to `128`):
            Longest sequence.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the initialisation.
    """
    import torch

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=1,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model
