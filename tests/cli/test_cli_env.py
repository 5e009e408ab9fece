"""Tests of `lze-trl env`: TRL's environment block (`trl env`) with lze-trl's lines in the same block."""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version

import pytest

import lze_trl
from lze_trl.cli import main as cli_main
from lze_trl.common.coupling import SUPPORTED
from lze_trl.common.engines import thread_policy


def installed(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


def test_env_prints_trl_block_and_lze_lines(capsys):
    assert cli_main(["env"]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert out.count("Copy-paste the following information") == 1
    items = dict(line[2:].split(": ", 1) for line in lines if line.startswith("- ") and ": " in line)
    # TRL's own lines (trl.scripts.env.print_env), DeepSpeed and vLLM among them
    assert items["TRL version"].startswith(version("trl"))
    assert {"PyTorch version", "Transformers version", "DeepSpeed version", "vLLM version"} <= items.keys()
    # lze-trl's lines, after TRL's in one block
    assert items["lze-trl version"].split("+")[0] == lze_trl.__version__
    assert items["math-verify version"] == installed("math-verify")
    assert items["wandb version"] == installed("wandb")
    threads, why = thread_policy()
    assert items["torch threads lze-trl runs on"] == f"{threads} ({why})"  # what training and evaluation use
    assert items["CPUs (os.cpu_count())"] == str(os.cpu_count())
    # the tested ranges, and that the installed TRL and transformers lie in them (CI runs inside them)
    assert items["trl versions lze-trl is tested with"] == f"{SUPPORTED['trl']} (installed: tested)"
    assert items["transformers versions lze-trl is tested with"] == f"{SUPPORTED['transformers']} (installed: tested)"
    assert lines[-1].startswith("- CPUs") and list(items).index("vLLM version") < list(items).index("lze-trl version")


def test_env_says_when_the_installed_trl_is_untested(capsys, monkeypatch):
    import trl

    monkeypatch.setattr(trl, "__version__", "1.19.0")
    assert cli_main(["env"]) == 0
    line = f"- trl versions lze-trl is tested with: {SUPPORTED['trl']} (installed: NOT tested)"
    assert line in capsys.readouterr().out


def test_env_is_listed_and_takes_no_options(capsys):
    assert cli_main(["--help"]) == 0
    assert "  env " in capsys.readouterr().out
    with pytest.raises(SystemExit) as error:
        cli_main(["env", "--verbose"])
    assert error.value.code == 2
