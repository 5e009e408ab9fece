"""Moved to [`lze_trl.experiments`] (`config`, `training`, `statistics`, `tables`, `comparison`); `run_demo` is
[`lze_trl.demo.run_demo`]. The old names resolve here with a `DeprecationWarning`."""

from ._moved import moved_names


__getattr__ = moved_names(
    __name__,
    [
        "lze_trl.experiments.config",
        "lze_trl.experiments.training",
        "lze_trl.experiments.statistics",
        "lze_trl.experiments.tables",
        "lze_trl.experiments.comparison",
        "lze_trl.demo",
    ],
)
