"""Two CPU processes (torchrun, gloo): same global selection, same state on both ranks, no hang."""

import json
from pathlib import Path

import numpy as np
import pytest
from testing_utils import run_torchrun


pytestmark = [pytest.mark.slow, pytest.mark.distributed]


@pytest.mark.parametrize("mode", ["select", "prune", "rollout", "replay", "probe"])
def test_two_processes_end_with_identical_state(tmp_path, mode):
    result = run_torchrun(Path(__file__).with_name("dist_train.py"), tmp_path, mode, timeout=240)
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
    if mode == "rollout":
        # both ranks skipped the same prompts predicted dead (their filter state is compared above)
        assert "rollout_filter.visit" in ranks[0].files
        assert max(e.get("lze/rollout_filter/skipped_total", 0) for e in infos[0]["log"]) > 0
        # calibrated (the default): both ranks learned the same map from the gathered groups
        assert ranks[0]["rollout_filter.calibration.count"].sum() > 0
    if mode == "replay":
        # both ranks took the same replay decisions from the same buffer metadata; each holds its own groups' rows
        assert max(e["lze/replayed_share"] for e in infos[0]["log"] if "lze/replayed_share" in e) > 0
        keys, owners = ranks[0]["replay.meta.key"], ranks[0]["replay.meta.owner"]
        for r in range(2):
            assert infos[r]["replay_owned_rows"] == sorted(keys[owners == r].tolist())
        assert set(infos[0]["replay_owned_rows"]).isdisjoint(infos[1]["replay_owned_rows"])
    if mode == "probe":
        # both ranks completed the same groups, each its own half, and only those reached the update
        completed = [e["lze/completed_groups"] for e in infos[0]["log"] if "lze/completed_groups" in e]
        assert completed and all(c > 0 and c % 2 == 0 for c in completed)
    selected = [e["lze/selected_frac"] for e in infos[0]["log"] if "lze/selected_frac" in e]
    if mode != "replay":  # with replay, the fresh groups are a quarter of the candidates and may all be taken
        assert selected and all(0 < s <= 0.5 for s in selected)
