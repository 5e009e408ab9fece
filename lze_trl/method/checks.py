"""The checks the settings are validated with, and the registry type of the selectors: the bottom of
the method layer (it imports nothing of the package)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar


T = TypeVar("T", bound=type)


def check_setting(condition: bool, setting: str, value: object, requirement: str) -> None:
    """Raises a `ValueError` `"<setting>=<value> is invalid: <requirement>"` unless `condition` holds."""
    if not condition:
        raise ValueError(f"{setting}={value!r} is invalid: {requirement}")


def is_finite_number(x: object) -> bool:
    """Whether `x` is a finite `int` or `float` (not a `bool`)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_integer_at_least(x: object, low: int) -> bool:
    """Whether `x` is an `int` (not a `bool`) `>= low`."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= low


def within(low: float, high: float, closed_low: bool = True, closed_high: bool = True) -> Callable[[Any], bool]:
    """The check that a value is a finite number between `low` and `high` (each end closed or open)."""

    def valid(x: Any) -> bool:
        if not is_finite_number(x):  # before comparing: a string would raise a TypeError naming no setting
            return False
        return (low <= x if closed_low else low < x) and (x <= high if closed_high else x < high)

    return valid


class Registry(dict[str, T]):
    """
    Classes registered by their `name` (a `ClassVar`), which a setting of the config names: the selectors
    (`selector`). A registered class may validate its own settings with a
    classmethod `check_args(args)`.

    Args:
        setting (`str`):
            The config setting that names one of them.
    """

    def __init__(self, setting: str) -> None:
        super().__init__()
        self.setting = setting

    def register(self, cls: T) -> T:
        """Class decorator adding `cls` under `cls.name`."""
        if not cls.name:
            raise ValueError(f"{cls.__name__} must set a `name` to be registered.")
        self[cls.name] = cls
        return cls

    def lookup(self, name: str) -> T:
        """The class registered as `name`; a `ValueError` naming the setting and the registered names otherwise."""
        check_setting(name in self, self.setting, name, f"use one of {sorted(self)}.")
        return self[name]

    def check(self, args: Any) -> None:
        """Validates the config `args`: the setting names a registered class, and every registered class's own
        settings pass its `check_args`."""
        self.lookup(getattr(args, self.setting))
        for cls in self.values():
            cls.check_args(args)
