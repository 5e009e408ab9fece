"""The regimes of BENCHMARKS.md sections 12 and 13, as demo configurations (`run.sh` passes the same settings to
`benchmarks/bench.py` on the command line)."""

from __future__ import annotations

from typing import Any

from lze_trl.demo import DemoConfig, default_warm_start


REGIMES: dict[str, dict[str, Any]] = {
    "dead": dict(train_levels=[0, 0, 1, 2, 6, 6], test_levels=[1, 2]),  # the dead-mass regime
    "carries": {},
    "arithmetic": dict(task="arithmetic"),
}


def demo_config(regime: str, **settings: Any) -> DemoConfig:
    """The demo's configuration of `regime` (its task's warm start) with `settings` (seed, steps, methods, ...)."""
    values = dict(REGIMES[regime])
    if "task" in values:
        values["warm_start"] = default_warm_start(values["task"])
    return DemoConfig(**values, **settings)
