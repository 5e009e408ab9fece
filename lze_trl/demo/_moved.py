"""Old import paths of the experiment harness, which moved from `lze_trl.demo` to [`lze_trl.experiments`]."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any


def moved_names(old: str, new: Sequence[str]) -> Callable[[str], Any]:
    """
    A module `__getattr__` that resolves names of the old module `old` in the modules `new` (the first that has it),
    with a `DeprecationWarning` naming the new place.

    Args:
        old (`str`):
            The old module's name, e.g. `"lze_trl.demo.runner"`.
        new (`Sequence[str]`):
            The modules the old one's names moved to, searched in order.

    Returns:
        `Callable[[str], Any]`: the `__getattr__` of the old module.
    """

    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):
            for module_name in new:
                module = importlib.import_module(module_name)
                if hasattr(module, name):
                    value = getattr(module, name)
                    # Name the module that defines a function or class, not one that imports it.
                    home = getattr(value, "__module__", None)
                    home = home if isinstance(home, str) and home.startswith("lze_trl.") else module_name
                    warnings.warn(
                        f"`{old}.{name}` moved to `{home}.{name}`: import it from there (the old path will be "
                        "removed in a future version).",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    # Once per name: `from package import name` looks the name up twice.
                    sys.modules[old].__dict__[name] = value
                    return value
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return __getattr__
