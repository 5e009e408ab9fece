"""Moved to [`lze_trl.experiments`] (`bench`, `overrides`, `statistics`, `tables`). The old names resolve here with a
`DeprecationWarning`."""

from ._moved import moved_names


__getattr__ = moved_names(
    __name__,
    [
        "lze_trl.experiments.overrides",
        "lze_trl.experiments.statistics",
        "lze_trl.experiments.tables",
        "lze_trl.experiments.bench",
        "lze_trl.experiments.comparison",
        "lze_trl.experiments.config",
        "lze_trl.experiments.training",
    ],
)
