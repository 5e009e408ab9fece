"""The trainer warns once when FSDP or DeepSpeed was asked for but the run is not sharded (one process, CPU)."""

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from testing_utils import TEST_PATHS, make_trainer

from lze_trl.common.engines import requested_engine


FSDP = {"fsdp": "full_shard auto_wrap", "fsdp_config": {"version": 2}}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    # accelerate sets ACCELERATE_USE_FSDP=true for good once it is given an FSDP plugin: undone after each test
    for name in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED"):
        monkeypatch.delenv(name, raising=False)


def warnings_of(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "lze_trl.common.engines" and r.levelno == logging.WARNING
    ]


def test_fsdp_from_accelerate_launch_on_cpu_warns_once_naming_both(tmp_path, caplog, monkeypatch):
    # `fsdp=...` in one process is rejected by transformers itself; two processes: tests/distributed/test_engines.py
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what `accelerate launch` sets for an FSDP config
    with caplog.at_level(logging.WARNING, logger="lze_trl.common.engines"):
        trainer = make_trainer(tmp_path)
    assert not trainer.is_fsdp_enabled  # accelerate dropped FSDP: the model is not sharded
    messages = warnings_of(caplog)
    assert len(messages) == 1
    assert messages[0].startswith("FSDP was requested but this run is not sharded: it runs one process without")


def test_no_warning_without_a_request(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="lze_trl.common.engines"):
        make_trainer(tmp_path)
    assert warnings_of(caplog) == []


def test_requested_engine_reads_args_and_launcher_environment(tmp_path, monkeypatch):
    from testing_utils import lze_args

    assert requested_engine(lze_args(tmp_path)) is None
    assert requested_engine(lze_args(tmp_path, **FSDP)) == "FSDP"
    monkeypatch.delenv("ACCELERATE_USE_FSDP", raising=False)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert requested_engine(lze_args(tmp_path)) == "FSDP"
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    assert requested_engine(lze_args(tmp_path)) == "DeepSpeed"


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.engines
def test_fsdp_recipe_launched_without_gpus_warns(tmp_path):
    """`accelerate launch` with recipes/accelerate/fsdp.yaml without GPUs runs DDP: one warning says so."""
    root = Path(__file__).parents[2]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", "recipes/accelerate/fsdp.yaml"]
    launch += ["--num_processes", "2", "--mixed_precision", "no", "--main_process_port", port]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(root), *map(str, TEST_PATHS)])}
    env.pop("ACCELERATE_USE_FSDP", None)
    script = str(root / "tests" / "support" / "accelerate_fsdp_fallback.py")
    result = subprocess.run(
        [*launch, script, str(tmp_path)], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("RUNNING")) == [
        "RUNNING 0 2 MULTI_CPU",
        "RUNNING 1 2 MULTI_CPU",
    ]
    output = result.stdout + result.stderr
    assert output.count("FSDP was requested but this run is not sharded: it runs DDP over 2 processes") == 1


@pytest.mark.parametrize("name", ["ddp.yaml", "fsdp.yaml", "zero3.yaml", "multinode-zero3.yaml"])
def test_distributed_accelerate_configs_say_how_to_launch_them(name):
    path = Path(__file__).parents[2] / "recipes" / "accelerate" / name
    header = "\n".join(line for line in path.read_text().splitlines() if line.startswith("#"))
    assert f"accelerate launch --config_file recipes/accelerate/{name}" in header
    assert "`--cpu` disables this file" in header


@pytest.mark.parametrize("bf16_instructions", [False, True])
def test_bf16_on_a_cpu_without_bf16_instructions_warns_with_the_fix(tmp_path, caplog, monkeypatch, bf16_instructions):
    import torch

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: bf16_instructions)
    with caplog.at_level(logging.WARNING, logger="lze_trl.common.engines"):
        make_trainer(tmp_path / "bf16", bf16=True)
        make_trainer(tmp_path / "fp32", bf16=False)
    slow = [m for m in warnings_of(caplog) if m.startswith("bf16=True on a CPU without bfloat16")]
    assert len(slow) == (0 if bf16_instructions else 1) and all("Set bf16=False" in m for m in slow)
