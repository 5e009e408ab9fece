"""The trainer warns once when FSDP or DeepSpeed was asked for but the run is not sharded (one process, CPU)."""

import logging

import pytest
from conftest import make_trainer

from lze_trl.engines import requested_engine


FSDP = {"fsdp": "full_shard auto_wrap", "fsdp_config": {"version": 2}}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    # accelerate sets ACCELERATE_USE_FSDP=true for good once it is given an FSDP plugin: undone after each test
    for name in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED"):
        monkeypatch.delenv(name, raising=False)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lze_trl.engines" and r.levelno == logging.WARNING]


def test_fsdp_from_accelerate_launch_on_cpu_warns_once_naming_both(tmp_path, caplog, monkeypatch):
    # `fsdp=...` in one process is rejected by transformers itself; two processes: tests/test_engines.py
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what `accelerate launch` sets for an FSDP config
    with caplog.at_level(logging.WARNING, logger="lze_trl.engines"):
        trainer = make_trainer(tmp_path)
    assert not trainer.is_fsdp_enabled  # accelerate dropped FSDP: the model is not sharded
    messages = warnings_of(caplog)
    assert len(messages) == 1
    assert messages[0].startswith("FSDP was requested but this run is not sharded: it runs one process without")


def test_no_warning_without_a_request(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="lze_trl.engines"):
        make_trainer(tmp_path)
    assert warnings_of(caplog) == []


def test_requested_engine_reads_args_and_launcher_environment(tmp_path, monkeypatch):
    from conftest import lze_args

    assert requested_engine(lze_args(tmp_path)) is None
    assert requested_engine(lze_args(tmp_path, **FSDP)) == "FSDP"
    monkeypatch.delenv("ACCELERATE_USE_FSDP", raising=False)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert requested_engine(lze_args(tmp_path)) == "FSDP"
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    assert requested_engine(lze_args(tmp_path)) == "DeepSpeed"
