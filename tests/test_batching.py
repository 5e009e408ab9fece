import pytest
import torch

from lze_trl.batching import active_positions, concat_batches, pack_kept_rows, plan_micro_steps, take_rows


def batch(n, width=3):
    return {
        "prompt_ids": torch.arange(n * 2).reshape(n, 2),
        "completion_ids": torch.arange(n * width).reshape(n, width),
        "completion_mask": torch.ones(n, width, dtype=torch.long),
        "advantages": torch.arange(1, n + 1, dtype=torch.float),
        "num_items_in_batch": torch.tensor(n * width),
        "names": [f"r{i}" for i in range(n)],
    }


def test_plan_uses_fewest_rows_then_fewest_steps():
    assert plan_micro_steps(0, 8, 4) == (0, 0)
    assert plan_micro_steps(12, 8, 4) == (2, 6)  # 2 x 6 = 12 rows, no padding (4 x 3 also 12, but more steps)
    assert plan_micro_steps(13, 8, 4) == (2, 7)  # 14 rows; 4 x 4 = 16
    assert plan_micro_steps(410, 4, 256) == (205, 2)  # the paper-scale recipe: no padding at all
    assert plan_micro_steps(5, 1, 8) == (5, 1)
    with pytest.raises(ValueError):
        plan_micro_steps(33, 8, 4)


def test_active_positions_end_each_accumulation_window():
    assert active_positions(4, 4, 4) == [0, 1, 2, 3]
    assert active_positions(2, 4, 4) == [2, 3]  # the window's last (synchronising) micro-step always runs
    assert active_positions(3, 8, 4) == [3, 6, 7]  # spread over the two windows, each ending its window
    assert active_positions(1, 8, 4) == [7]  # the first window is skipped entirely
    assert active_positions(0, 8, 4) == []
    for steps in range(0, 9):
        positions = active_positions(steps, 8, 2)
        assert len(positions) == steps
        windows = {p // 2 for p in positions}
        assert all(2 * w + 1 in positions for w in windows)


def test_pack_kept_rows_lays_out_kept_rows_and_zero_weight_padding():
    b = batch(6)
    keep = torch.tensor([False, True, False, True, True, False])
    layout = pack_kept_rows(b, keep, positions=[2, 3], rows_per_step=2, num_steps=4)
    assert len(layout) == 4
    first, second = layout[2], layout[3]
    assert first["advantages"].tolist() == [2.0, 4.0]
    assert second["advantages"].tolist() == [5.0, 0.0]  # row 5 kept, then one zero-weight pad
    assert second["completion_mask"][1].sum() == 0 and second["completion_mask"][0].sum() == 3
    assert second["names"] == ["r4", "r0"]
    assert first["num_items_in_batch"] == b["num_items_in_batch"]  # scalars pass through
    assert b["completion_mask"].sum() == 18  # the input is not modified


def test_take_and_concat_rows_pad_widths_like_grpo():
    a, b = batch(2, width=3), batch(1, width=5)
    b["prompt_ids"] = torch.tensor([[7, 8, 9]])
    merged = concat_batches([a, b], pad_token_id=0, sum_keys=("num_items_in_batch",))
    assert merged["completion_ids"].shape == (3, 5) and merged["completion_ids"][0, 3:].tolist() == [0, 0]
    assert merged["prompt_ids"].shape == (3, 3) and merged["prompt_ids"][0].tolist() == [0, 0, 1]  # left padded
    assert merged["num_items_in_batch"] == 6 + 5
    assert merged["names"] == ["r0", "r1", "r0"]
    picked = take_rows(merged, torch.tensor([2, 0]))
    assert picked["prompt_ids"][0].tolist() == [7, 8, 9] and picked["names"] == ["r0", "r0"]
