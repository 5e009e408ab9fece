"""Pytest plugin: run TRL's own GRPO tests against `LZEGRPOTrainer` instead of `trl.GRPOTrainer`.

The mode comes from `LZE_TRL_SUITE_MODE`:

- `stock`: TRL's `GRPOTrainer` and `GRPOConfig`, untouched;
- `none`: `LZEGRPOTrainer` with `selector="none"` (every group kept, as GRPO);
- `lze`: `LZEGRPOTrainer` with its default LZE selector.

In the LZE modes, `trl.GRPOTrainer` and `trl.GRPOConfig` are replaced when the plugin loads (before the test modules
import them), by subclasses of `LZEGRPOTrainer` and `LZEGRPOConfig` named like TRL's, the config's `selector` default
set to the mode's. After collection, every collected test module must hold the mode's classes, or the run stops.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import trl


MODES = ("stock", "none", "lze")
MODE = os.environ.get("LZE_TRL_SUITE_MODE", "stock")
if MODE not in MODES:
    raise pytest.UsageError(f"LZE_TRL_SUITE_MODE={MODE!r} is invalid: use one of {MODES}.")

if MODE == "stock":
    GRPOTrainer, GRPOConfig = trl.GRPOTrainer, trl.GRPOConfig
else:
    from lze_trl import LZEGRPOConfig, LZEGRPOTrainer

    @dataclasses.dataclass
    class GRPOConfig(LZEGRPOConfig):
        """`LZEGRPOConfig` whose `selector` defaults to the suite's mode."""

        selector: str = "lze" if MODE == "lze" else "none"

    class GRPOTrainer(LZEGRPOTrainer):
        """`LZEGRPOTrainer` under TRL's name, for TRL's tests."""

    trl.GRPOTrainer, trl.GRPOConfig = GRPOTrainer, GRPOConfig


def pytest_report_header(config):
    return f"lze-trl suite mode: {MODE} (GRPOTrainer = {GRPOTrainer.__module__}.{GRPOTrainer.__qualname__})"


def pytest_collection_modifyitems(session, config, items):
    for module in {item.module for item in items if getattr(item, "module", None) is not None}:
        for name, expected in (("GRPOTrainer", GRPOTrainer), ("GRPOConfig", GRPOConfig)):
            if getattr(module, name, expected) is not expected:
                raise pytest.UsageError(f"{module.__name__}.{name} is not the {MODE!r} mode's class: swap failed.")
