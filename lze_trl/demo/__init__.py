"""The one-command CPU demo (`lze-trl demo`): plain GRPO, LZE and LZE with forward pruning side by side.

[`run_demo`] runs the comparison (see [`lze_trl.experiments`], the harness it shares with `lze-trl bench`) and writes
`demo_results.json` and the PNG figures. The harness's other names (accuracy, accounting, training) are still found
here and in the old modules (`lze_trl.demo.runner`, `.bench`, `.sweep`, `.evaluation`, `.accounting`, `.warmstart`,
`.plots`), with a `DeprecationWarning` naming their place in [`lze_trl.experiments`].
"""

from __future__ import annotations

import os
from typing import Any

from ..experiments.comparison import run_comparison
from ..experiments.config import DemoConfig, MethodSpec, default_methods, default_warm_start
from ..experiments.warmstart import WarmStartConfig, load_warm_start
from ._moved import moved_names


def run_demo(
    config: DemoConfig | None = None, output_dir: str | os.PathLike = "outputs/demo", figures: bool = True
) -> dict[str, Any]:
    """
    Runs the demo's comparison (every method of `config` side by side) and writes `demo_results.json` (and the PNG
    figures) into `output_dir`: what `lze-trl demo` runs before printing its tables.

    Args:
        config ([`DemoConfig`], *optional*):
            The comparison; defaults to `DemoConfig()` (plain GRPO, LZE and LZE with forward pruning on the `carries`
            task).
        output_dir (`str` or `os.PathLike`, *optional*, defaults to `"outputs/demo"`):
            Where the results, figures and each run's prompt table / selection log go.
        figures (`bool`, *optional*, defaults to `True`):
            Also write the PNG figures.

    Returns:
        `dict[str, Any]`: the JSON-serialisable results (also written to `demo_results.json`).
    """
    return run_comparison(DemoConfig() if config is None else config, output_dir, figures=figures)


__getattr__ = moved_names(
    __name__,
    [
        "lze_trl.experiments.accuracy",
        "lze_trl.experiments.accounting",
        "lze_trl.experiments.training",
        "lze_trl.experiments.warmstart",
    ],
)

__all__ = [
    "DemoConfig",
    "MethodSpec",
    "WarmStartConfig",
    "default_methods",
    "default_warm_start",
    "load_warm_start",
    "run_demo",
]
