"""The regimes of BENCHMARKS.md sections 1-4 (and 14's dead-mass regime), as demo configurations (`run.sh` passes the
same settings to `benchmarks/bench.py` on the command line), and what the one-(regime, seed) runners of their extra
arms share (`benchmarks/cgrpo/run.py`, `benchmarks/agentic/run.py`)."""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lze_examples.demo import DemoConfig, default_warm_start, run_comparison


REGIMES: dict[str, dict[str, Any]] = {
    "dead": dict(train_levels=[0, 0, 1, 2, 6, 6], test_levels=[1, 2]),  # the dead-mass regime
    "carries": {},
    "arithmetic": dict(task="arithmetic"),
    "solved": dict(train_levels=[0, 0, 3, 3, 1, 2], test_levels=[1, 2]),  # most prompts soon solved (section 10)
}


def demo_config(regime: str, **settings: Any) -> DemoConfig:
    """The demo's configuration of `regime` (its task's warm start) with `settings` (seed, steps, methods, ...)."""
    values = dict(REGIMES[regime])
    if "task" in values:
        values["warm_start"] = default_warm_start(values["task"])
    return DemoConfig(**values, **settings)


def run_parser(description: str, regimes: Sequence[str] = tuple(REGIMES), steps: int = 240) -> argparse.ArgumentParser:
    """The command line of a one-(regime, seed) runner: `REGIME SEED OUT [--steps N]`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("regime", choices=list(regimes))
    parser.add_argument("seed", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=steps)
    return parser


def run_and_keep(config: DemoConfig, out: Path) -> dict[str, Any]:
    """Runs the comparison of `config` into `out` and keeps only its results, gzipped (`demo_results.json.gz`, the
    committed raw result): the runs' folders (prompt tables, selection logs) are removed."""
    results = run_comparison(config, out, figures=False)
    with gzip.open(out / "demo_results.json.gz", "wt") as f:
        json.dump(results, f)
    (out / "demo_results.json").unlink()
    shutil.rmtree(out / "runs", ignore_errors=True)
    return results
