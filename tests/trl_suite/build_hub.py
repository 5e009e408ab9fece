"""Build, offline, the Hugging Face cache that TRL's GRPO tests read: tiny random models and the `zen` dataset.

TRL's tests load `trl-internal-testing/*` repositories from the Hub. This module writes stand-ins built in code into a
local cache (`HF_HOME`), so that the tests run with `HF_HUB_OFFLINE=1` and `HF_DATASETS_OFFLINE=1`:

- models: randomly initialised, a few thousand weights apart from the embeddings, saved in the Hub cache layout
  (`hub/models--<org>--<name>/snapshots/<revision>`, `refs/main`);
- tokenizers: byte-level BPE (the `tokenizers` library) whose special tokens sit at the ids of the real Qwen 2.5/3
  and Llama 3.2 vocabularies (TRL's tests hard-code some of them, e.g. `<|im_end|>` = 151645), with TRL's own copies of
  the models' chat templates (`trl/chat_templates/*.jinja`); architectures other than Llama use the Qwen tokenizer;
- the `zen` dataset's `standard_prompt_only` and `conversational_prompt_only` configs (the prompts of TRL's
  `scripts/generate_zen_dataset.py`, train/test split 17/2), written to the `datasets` cache as a prepared builder.

Usage: `python tests/trl_suite/build_hub.py <HF_HOME>`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


REVISION = "0" * 40
ORG = "trl-internal-testing"

# The special tokens of the real vocabularies, at their real ids.
QWEN_SPECIAL = {
    151643: "<|endoftext|>",
    151644: "<|im_start|>",
    151645: "<|im_end|>",
    151646: "<|object_ref_start|>",
    151647: "<|object_ref_end|>",
    151648: "<|box_start|>",
    151649: "<|box_end|>",
    151650: "<|quad_start|>",
    151651: "<|quad_end|>",
    151652: "<|vision_start|>",
    151653: "<|vision_end|>",
    151654: "<|vision_pad|>",
    151655: "<|image_pad|>",
    151656: "<|video_pad|>",
    151657: "<tool_call>",
    151658: "</tool_call>",
    151659: "<|fim_prefix|>",
    151660: "<|fim_middle|>",
    151661: "<|fim_suffix|>",
    151662: "<|fim_pad|>",
    151663: "<|repo_name|>",
    151664: "<|file_sep|>",
    151665: "<tool_response>",
    151666: "</tool_response>",
    151667: "<think>",
    151668: "</think>",
}
LLAMA_SPECIAL = {
    128000: "<|begin_of_text|>",
    128001: "<|end_of_text|>",
    128004: "<|finetune_right_pad_id|>",
    128006: "<|start_header_id|>",
    128007: "<|end_header_id|>",
    128008: "<|eom_id|>",
    128009: "<|eot_id|>",
    128010: "<|python_tag|>",
}
TOKENIZERS = {
    # family: (special tokens, chat template file, bos, eos, pad)
    "qwen2_5": (QWEN_SPECIAL, "qwen2_5.jinja", None, "<|im_end|>", "<|endoftext|>"),
    "qwen3": (QWEN_SPECIAL, "qwen3.jinja", None, "<|im_end|>", "<|endoftext|>"),
    "llama3_2": (LLAMA_SPECIAL, "llama3_2.jinja", "<|begin_of_text|>", "<|eot_id|>", None),
}
SMALL = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
MOE = {"num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2}
MOE.update({"moe_intermediate_size": 16, "first_k_dense_replace": 0, "n_group": 1, "topk_group": 1})
# repository name: (transformers model class, model_type, tokenizer family, extra config)
MODELS = {
    "tiny-Qwen2ForCausalLM-2.5": ("Qwen2ForCausalLM", "qwen2", "qwen2_5", {"num_key_value_heads": 2}),
    "tiny-Qwen2ForSequenceClassification-2.5": (
        "Qwen2ForSequenceClassification",
        "qwen2",
        "qwen2_5",
        {"num_key_value_heads": 2, "num_labels": 1},
    ),
    "tiny-Qwen3ForCausalLM": ("Qwen3ForCausalLM", "qwen3", "qwen3", {"num_key_value_heads": 2, "head_dim": 4}),
    "tiny-Qwen3ForSequenceClassification": (
        "Qwen3ForSequenceClassification",
        "qwen3",
        "qwen3",
        {"num_key_value_heads": 2, "head_dim": 4, "num_labels": 1},
    ),
    "tiny-Qwen3MoeForCausalLM": ("Qwen3MoeForCausalLM", "qwen3_moe", "qwen3", {"num_key_value_heads": 2, **MOE}),
    "tiny-LlamaForCausalLM-3.2": ("LlamaForCausalLM", "llama", "llama3_2", {"num_key_value_heads": 2}),
    "tiny-LlamaForSequenceClassification-3.2": (
        "LlamaForSequenceClassification",
        "llama",
        "llama3_2",
        {"num_key_value_heads": 2, "num_labels": 1},
    ),
    "tiny-MistralForCausalLM-0.2": ("MistralForCausalLM", "mistral", "qwen2_5", {"num_key_value_heads": 2}),
    "tiny-Gemma2ForCausalLM": ("Gemma2ForCausalLM", "gemma2", "qwen2_5", {"num_key_value_heads": 2, "head_dim": 4}),
    "tiny-Cohere2ForCausalLM": ("Cohere2ForCausalLM", "cohere2", "qwen2_5", {"num_key_value_heads": 2}),
    "tiny-Glm4MoeForCausalLM": ("Glm4MoeForCausalLM", "glm4_moe", "qwen2_5", {"num_key_value_heads": 2, **MOE}),
    "tiny-GptOssForCausalLM": (
        "GptOssForCausalLM",
        "gpt_oss",
        "qwen2_5",
        {"num_key_value_heads": 2, "head_dim": 4, **MOE},
    ),
}
ZEN_PROMPTS = [
    "Beautiful is better than",
    "Explicit is",
    "Simple is better",
    "Complex",
    "Flat is better than",
    "Sparse is better",
    "Readability",
    "Special cases aren't special",
    "Although practicality beats",
    "Errors should never",
    "Unless explicitly",
    "In the face of ambiguity, refuse",
    "There should be one-- and preferably",
    "Although that way may not be obvious at first unless you're",
    "Now is",
    "Although never is often",
    "If the implementation is hard to explain,",
    "If the implementation is easy",
    "Namespaces are one honking great",
]
ZEN_TRAIN_ROWS = 17  # TRL's generator: train_test_split(test_size=0.1, shuffle=False) of 19 prompts


def build_tokenizer(family: str):
    """
    A byte-level BPE tokenizer whose special tokens have the ids of the real vocabulary of `family`.

    Args:
        family (`str`):
            One of `TOKENIZERS`.

    Returns:
        `PreTrainedTokenizerFast`: with the family's chat template, eos/pad/bos tokens and left padding.
    """
    import trl
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special, template_file, bos, eos, pad = TOKENIZERS[family]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    first_special = min(special)
    vocab = {char: i for i, char in enumerate(sorted(alphabet))}
    vocab.update({f"<f{i}>": i for i in range(len(vocab), first_special)})  # fill up to the special ids
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    for token_id in range(first_special, max(special) + 1):  # special ids are contiguous after the filler
        tokenizer.add_special_tokens([special.get(token_id, f"<|reserved_special_token_{token_id}|>")])
    template = (Path(trl.__file__).parent / "chat_templates" / template_file).read_text()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        chat_template=template,
        padding_side="left",
    )


def snapshot_dir(hf_home: Path, kind: str, repo: str) -> Path:
    """The Hub cache's snapshot folder of `ORG/repo` (`kind` is `"models"`), with `refs/main` pointing at it."""
    root = hf_home / "hub" / f"{kind}--{ORG}--{repo}"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(REVISION)
    path = root / "snapshots" / REVISION
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_models(hf_home: Path) -> None:
    """Save every model of `MODELS`, with its tokenizer and generation config, into the Hub cache of `hf_home`."""
    import torch
    import transformers
    from transformers import AutoConfig, GenerationConfig

    tokenizers = {family: build_tokenizer(family) for family in TOKENIZERS}
    for repo, (class_name, model_type, family, extra) in MODELS.items():
        tokenizer = tokenizers[family]
        special = TOKENIZERS[family][0]
        config = AutoConfig.for_model(
            model_type,
            vocab_size=max(special) + 1,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.bos_token_id,
            **SMALL,
            **extra,
        )
        torch.manual_seed(0)
        model = getattr(transformers, class_name)(config)
        path = snapshot_dir(hf_home, "models", repo)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        if class_name.endswith("ForCausalLM"):
            GenerationConfig(
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
                bos_token_id=tokenizer.bos_token_id,
            ).save_pretrained(path)


def build_zen(hf_home: Path) -> None:
    """Prepare the `zen` configs that the GRPO tests read in the `datasets` cache of `hf_home`."""
    from datasets import Dataset
    from datasets.packaged_modules.parquet.parquet import Parquet

    configs = {
        "standard_prompt_only": [{"prompt": p} for p in ZEN_PROMPTS],
        "conversational_prompt_only": [{"prompt": [{"role": "user", "content": p}]} for p in ZEN_PROMPTS],
    }
    source = hf_home / "zen-source"
    for config_name, rows in configs.items():
        files = {}
        for split, part in (("train", rows[:ZEN_TRAIN_ROWS]), ("test", rows[ZEN_TRAIN_ROWS:])):
            files[split] = str(source / config_name / f"{split}.parquet")
            Path(files[split]).parent.mkdir(parents=True, exist_ok=True)
            Dataset.from_list(part).to_parquet(files[split])
        builder = Parquet(
            cache_dir=str(hf_home / "datasets"),
            config_name=config_name,
            data_files=files,
            dataset_name="zen",
            hash=REVISION[:16],
        )
        # The cache folder that `load_dataset("trl-internal-testing/zen", config_name)` looks up offline.
        builder.repo_id, builder.config_id = f"{ORG}/zen", config_name
        builder._cache_dir = builder._build_cache_dir()
        builder.download_and_prepare()


def main(hf_home: str) -> None:
    """Build the cache in `hf_home` unless a previous build finished there."""
    home = Path(hf_home)
    done = home / ".built"
    if done.exists():
        return
    os.environ["HF_HOME"] = str(home)
    os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    build_models(home)
    build_zen(home)
    done.touch()


if __name__ == "__main__":
    main(sys.argv[1])
