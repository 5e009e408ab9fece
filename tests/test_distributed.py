"""Two CPU processes (torchrun, gloo): same global selection, same state on both ranks, no hang."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


pytestmark = [pytest.mark.slow, pytest.mark.distributed]


@pytest.mark.parametrize("mode", ["select", "prune"])
def test_two_processes_end_with_identical_state(tmp_path, mode):
    script = Path(__file__).with_name("dist_train.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port]
    result = subprocess.run(
        [*cmd, str(script), str(tmp_path), mode], env=env, capture_output=True, text=True, timeout=240
    )
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
    selected = [e["lze/selected_frac"] for e in infos[0]["log"] if "lze/selected_frac" in e]
    assert selected and all(0 < s <= 0.5 for s in selected)
