"""Shared pieces of the figures: colours, figure creation without pyplot, PNG export."""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING

import numpy as np

from ..extras import require


if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


SELECTED_COLOR = "tab:orange"
OTHER_COLOR = "tab:blue"
ZONE_COLORS = {"unsolved": "tab:red", "learning zone": "tab:green", "solved": "tab:gray"}
PathLike = str | os.PathLike


# ----------------------------------------------------------------------------------------------------------- figures
def new_figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (6.4, 4.2), **kwargs) -> Figure:
    """A `Figure` on an Agg canvas with a grid of axes (`fig.axes`), independent of `pyplot` (matplotlib: the `plot`
    extra)."""
    Figure = require("matplotlib.figure", "lze_trl.plotting", "plot").Figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig


def figure_to_png(fig: Figure, dpi: int = 100) -> bytes:
    """Renders `fig` to PNG bytes (Agg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def save_figure(fig: Figure, path: PathLike, dpi: int = 100) -> str:
    """
    Writes `fig` as a PNG file, creating its folder.

    Args:
        fig (`Figure`):
            The figure.
        path (`str` or `os.PathLike`):
            Target file.
        dpi (`int`, *optional*, defaults to `100`):
            Resolution.

    Returns:
        `str`: the path written.
    """
    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "wb") as f:
        f.write(figure_to_png(fig, dpi=dpi))
    return path


def _finish(fig: Figure, save_path: PathLike | None, dpi: int = 100) -> Figure:
    if save_path is not None:
        save_figure(fig, save_path, dpi=dpi)
    return fig


def _no_data(ax: Axes, message: str = "no data yet") -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="gray")


def _last_steps(log: pd.DataFrame, last_steps: int | None) -> pd.DataFrame:
    if last_steps is None or log.empty:
        return log
    steps = np.sort(log["step"].unique())[-last_steps:]
    return log[log["step"].isin(steps)]
