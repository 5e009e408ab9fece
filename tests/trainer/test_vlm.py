"""LZE on image prompts (vision-language GRPO) with a tiny Qwen2-VL built offline: a prompt's identity includes its
image, and the rows LZE keeps carry their own image patches into the update, exactly as under `selector="none"`."""

import pytest
import torch
from testing_utils import colour_dataset, completion_bucket, logged, tiny_config, tiny_qwen2_vl
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import split_pixel_values_by_grid

from lze_trl import LZEGRPOConfig, LZEGRPOTrainer


pytestmark = pytest.mark.slow


def colour_reward(completions, **kwargs):
    return [float(completion_bucket(str(c), 3) == 0) for c in completions]


def recording(trainer_cls):
    class Recording(trainer_cls):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            self.updates.append({k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()})
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    return Recording


def train(tmp_path, trainer_cls, config_cls, **overrides):
    model, processor = tiny_qwen2_vl()
    args = tiny_config(
        tmp_path, config_cls, max_steps=1, per_device_train_batch_size=16, max_completion_length=4, **overrides
    )
    data = colour_dataset(16)
    trainer = recording(trainer_cls)(
        model=model, reward_funcs=colour_reward, args=args, train_dataset=data, processing_class=processor
    )
    trainer.updates = []
    trainer.train()
    return trainer


def rows_by_content(batch):
    """`{(prompt ids, completion ids): (row index, the row's image patches, its grid)}` of an update micro-batch."""
    split = split_pixel_values_by_grid(batch)
    out = {}
    for i in range(len(batch["prompt_ids"])):
        if batch["completion_mask"][i].sum() == 0:
            continue  # a zero-weight padding row
        key = (tuple(batch["prompt_ids"][i].tolist()), tuple(batch["completion_ids"][i].tolist()))
        out[key] = (i, split["pixel_values"][i], split["image_grid_thw"][i])
    return out


def completion_logits(model, batch, i, pixel_values, grid):
    ids = torch.cat([batch["prompt_ids"][i], batch["completion_ids"][i]])[None]
    mask = torch.cat([batch["prompt_mask"][i], batch["completion_mask"][i]])[None]
    extra = {"mm_token_type_ids": batch["mm_token_type_ids"][i][None]} if "mm_token_type_ids" in batch else {}
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, pixel_values=pixel_values, image_grid_thw=grid, **extra)
    return logits.logits[0, batch["prompt_ids"].shape[1] - 1 : -1]


def test_kept_image_rows_train_exactly_as_under_selector_none(tmp_path):
    stock = train(tmp_path / "stock", GRPOTrainer, GRPOConfig)
    none = train(tmp_path / "none", LZEGRPOTrainer, LZEGRPOConfig, selector="none")
    lze = train(tmp_path / "lze", LZEGRPOTrainer, LZEGRPOConfig, selector="lze")
    # selector="none" is stock GRPO on image prompts: the same rows, images and advantages reach the update
    for a, b in zip(stock.updates, none.updates):
        for key in ("prompt_ids", "completion_ids", "advantages", "pixel_values", "image_grid_thw"):
            torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    # LZE keeps some groups: each kept row is a row of the `none` run (same generation), with its own image patches
    all_rows = rows_by_content(none.updates[0])
    kept = rows_by_content(lze.updates[0])
    assert 0 < len(kept) < len(all_rows)
    assert logged(lze, "lze/selected_frac")[0] < 1.0
    model = tiny_qwen2_vl()[0]  # the weights both runs had when they computed these losses
    for key, (i, pixels, grid) in kept.items():
        j, reference_pixels, reference_grid = all_rows[key]
        torch.testing.assert_close(pixels, reference_pixels, rtol=0, atol=0)
        torch.testing.assert_close(grid, reference_grid, rtol=0, atol=0)
        assert lze.updates[0]["advantages"][i] == none.updates[0]["advantages"][j]
        torch.testing.assert_close(
            completion_logits(model, lze.updates[0], i, pixels, grid),
            completion_logits(model, none.updates[0], j, reference_pixels, reference_grid),
        )
    # a prompt's identity includes its image: 16 images, two texts, 16 prompts (4 of them observed in the step)
    assert len(set(lze.prompt_keys.dataset_keys.tolist())) == 16 and len(lze.prompt_table()) == 4
