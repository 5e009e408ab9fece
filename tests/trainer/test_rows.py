import numpy as np
import torch

from lze_trl.grpo.rows import pad_rows


def batch(n, width=3):
    return {
        "prompt_ids": torch.arange(n * 2).reshape(n, 2),
        "completion_ids": torch.arange(n * width).reshape(n, width),
        "completion_mask": torch.ones(n, width, dtype=torch.long),
        "advantages": torch.arange(1, n + 1, dtype=torch.float),
        "num_items_in_batch": torch.tensor(n * width),
        "names": [f"r{i}" for i in range(n)],
    }


class OneOfTwoProcesses:
    """The accelerator of process 1 of 2 whose `gather` adds process 0's value 100 (enough for `pad_rows`)."""

    process_index = 1

    @staticmethod
    def gather(value):
        return torch.stack([torch.as_tensor(100), value])


def test_pad_rows_returns_kept_rows_padded_to_the_largest_process_and_a_multiple_of_the_micro_steps():
    b = batch(6)
    keep = np.array([False, True, False, True, True, False])  # process 1's rows; process 0 keeps 5
    out = pad_rows(b, torch.as_tensor(keep), max_kept=5, multiple=2, accelerator=OneOfTwoProcesses())
    # process 0 keeps 5 rows: every process returns 6 (a multiple of 2); process 1 its 3 kept rows, then 3 pads
    assert out["advantages"].tolist() == [2.0, 4.0, 5.0, 0.0, 0.0, 0.0]
    assert out["names"] == ["r1", "r3", "r4", "r0", "r0", "r0"]
    assert out["completion_mask"].sum(dim=1).tolist() == [3, 3, 3, 0, 0, 0]  # pads hold no loss token
    assert out["num_items_in_batch"] == 100 + 9  # recounted over the kept rows of every process
    assert b["completion_mask"].sum() == 18 and b["advantages"][0] == 1.0  # the input is not modified


def test_pad_rows_keeps_one_zero_weight_row_per_micro_step_when_nothing_is_kept():
    out = pad_rows(batch(4), torch.zeros(4, dtype=torch.bool), max_kept=0, multiple=3, accelerator=OneOfTwoProcesses())
    assert len(out["names"]) == 3 and out["completion_mask"].sum() == 0 and not out["advantages"].any()
