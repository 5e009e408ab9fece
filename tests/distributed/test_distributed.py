"""Two CPU processes (torchrun, gloo): same global selection, same state on both ranks, no hang."""

import json

import numpy as np
import pytest
from testing_utils import SUPPORT, run_torchrun


pytestmark = [pytest.mark.slow, pytest.mark.distributed]


@pytest.mark.parametrize(
    "mode",
    [
        "select",
        "prune",
        "prune-both",
        "prune-skip",
        "shadow",
        "resume",
    ],
)
def test_two_processes_end_with_identical_state(tmp_path, mode):
    result = run_torchrun(SUPPORT / "dist_train.py", tmp_path, mode, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [i["world"] for i in infos] == [2, 2]
    assert infos[0]["counters"] == infos[1]["counters"]
    assert infos[0]["log"] == infos[1]["log"]  # metrics are global: both ranks log the same values
    # every rank ran the same number of forward/backward rows (padded to equal counts)
    assert infos[0]["grad_rows"] == infos[1]["grad_rows"] > 0
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    assert set(ranks[0].files) == set(ranks[1].files)
    for key in ranks[0].files:
        np.testing.assert_array_equal(ranks[0][key], ranks[1][key], err_msg=key)
    # selection kept a fraction of the 16 rows x 2 ranks generated per step
    if mode == "prune-both":  # both sides skipped before generation, the same prompts on both ranks
        log = infos[0]["log"]
        for side in ("solved", "unsolved"):
            assert max(e.get(f"lze/skipped_prompts_{side}", 0) for e in log) > 0
        assert any("lze/prune_precision" in e for e in log)
    if mode == "prune-skip":  # fewer groups generated, as many on each rank; every step ran
        log = infos[0]["log"]
        generated = [e["lze/groups_generated"] for e in log if "lze/groups_generated" in e]
        skipped = [e.get("lze/groups_skipped_solved", 0) + e.get("lze/groups_skipped_unsolved", 0) for e in log
                   if "lze/groups_generated" in e]  # fmt: skip
        assert len(generated) == 10 and all(g % 2 == 0 and g >= 2 for g in generated) and sum(skipped) > 0
        assert all(g + s == 8 for g, s in zip(generated, skipped))
    if mode == "resume":  # each rank resumed: the same model and metrics as unbroken
        assert [i["resumed_equals_full"] for i in infos] == [True, True]
        assert [i["resumed_log_equals_full"] for i in infos] == [True, True]
    if mode == "shadow":  # the update took every group; what LZE would have kept and skipped, decided on both ranks
        log = infos[0]["log"]
        assert all(e["lze/selected_frac"] == 1 for e in log if "lze/selected_frac" in e)
        assert any(e.get("lze/shadow_update_tokens", 0) < e.get("lze/grpo_update_tokens", 0) for e in log)
        assert sum(e.get("lze/shadow_prunable_unsolved", 0) for e in log) > 0
        return
    selected = [e["lze/selected_frac"] for e in infos[0]["log"] if "lze/selected_frac" in e]
    # with pruning on both sides a batch of 4 prompts can hold no live complete group (its update is empty)
    assert selected and all(0 < s <= 0.5 or (mode == "prune-both" and s == 0) for s in selected) and max(selected) > 0
