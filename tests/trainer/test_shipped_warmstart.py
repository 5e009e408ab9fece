"""The shipped warm start of the `carries` task: it loads without training and gives the recorded starting accuracy."""

import json

import pytest
import torch

from lze_examples.demo import DemoConfig, default_warm_start, greedy_accuracy
from lze_examples.demo.warmstart import SHIPPED_DIR, WarmStartConfig, load_warm_start, shipped_path
from lze_examples.tasks import get_task


def test_the_demo_default_warm_start_is_shipped_with_its_config():
    config = DemoConfig()
    assert config.task == "carries" and config.warm_start == default_warm_start("carries")
    folder = shipped_path(config.warm_start)
    assert folder is not None and folder.parent == SHIPPED_DIR and folder.name == config.warm_start.cache_key()
    meta = json.loads((folder / "warmstart.json").read_text())
    assert WarmStartConfig(**meta["config"]) == config.warm_start  # the config that produced the weights
    assert (folder / "model.safetensors").stat().st_size < 2_000_000
    assert shipped_path(WarmStartConfig(**{**meta["config"], "steps": 7})) is None  # any other config trains


def test_the_shipped_weights_load_without_training_and_give_the_recorded_accuracy(tmp_path, monkeypatch):
    import lze_examples.demo.warmstart as warmstart

    def no_training(*args, **kwargs):
        raise AssertionError("the shipped warm start must not be trained")

    monkeypatch.setattr(warmstart, "train_warm_start", no_training)
    torch.set_num_threads(1)
    config = DemoConfig()
    model, tokenizer, meta = load_warm_start(config.warm_start, cache_dir=tmp_path)
    assert meta["shipped"] and meta["from_cache"] and not any(tmp_path.iterdir())
    recorded = meta["recorded_start"]
    splits = get_task("carries").make_splits(recorded["n_train"], recorded["n_test"], recorded["n_ood"], seed=0)
    for split in ("test", "ood"):
        accuracy = greedy_accuracy(model, tokenizer, splits[split], max_new_tokens=config.max_completion_length)
        # Greedy decoding is an argmax: a different CPU's float rounding may flip a near tie, not more.
        assert accuracy["accuracy"] == pytest.approx(recorded[f"{split}_accuracy"], abs=2 / recorded[f"n_{split}"])
