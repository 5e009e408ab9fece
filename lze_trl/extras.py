"""The optional dependency of the library's periphery, named by the extra that installs it.

The base install (`pip install lze-trl`) is the trainers, their config, the method and the CLI; the figures need
matplotlib (`lze-trl[plot]`). The examples (examples/, `lze_examples`) depend on their libraries themselves.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, what: str, extra: str) -> ModuleType:
    """
    Imports `module` (`"matplotlib.figure"`, `"tabulate"`), or says which extra installs it.

    Args:
        module (`str`):
            The module to import.
        what (`str`):
            What needs it, for the message (`"lze_trl.plotting"`).
        extra (`str`):
            The extra of lze-trl that installs it (`"plot"`).

    Raises:
        `ImportError`: when the package is not installed, with the `pip install` line that installs it.
    """
    package = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{what} needs {package}, which the base install of lze-trl leaves out: pip install 'lze-trl[{extra}]'"
        ) from error
