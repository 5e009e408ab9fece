"""Moved to [`lze_trl.experiments.sweep`] (its table to `lze_trl.experiments.tables`). The old names resolve here
with a `DeprecationWarning`."""

from ._moved import moved_names


__getattr__ = moved_names(__name__, ["lze_trl.experiments.sweep", "lze_trl.experiments.tables"])
