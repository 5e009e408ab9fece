"""Moved to [`lze_trl.experiments.warmstart`]. The old names resolve here with a `DeprecationWarning`."""

from ._moved import moved_names


__getattr__ = moved_names(__name__, ["lze_trl.experiments.warmstart"])
