"""Plots and tables of what LZE selects, from a run's prompt table and selection log.

Every plotting function takes the two tables the [`LZEGRPOTrainer`] writes (`trainer.prompt_table()` /
`lze_prompts.parquet`, and `trainer.selection_log.to_pandas()` / `lze_selection_log.parquet`; see [`load_run`]),
returns a new `matplotlib.figure.Figure` and, given `save_path`, also writes it as a PNG. Figures are built without
`pyplot` and rendered with the Agg canvas: nothing needs a display, no global figure state is kept (a training
callback can draw thousands of them), and in Jupyter `display(fig)` shows them inline.

A prompt group is *in the learning zone* when its pass rate is strictly between 0 and 1: only those groups have a
non-zero energy and can be selected.

Modules: `tables` (loading a run and the tables derived from its selection log), `base` (colours, figure helpers),
`zones` (learning-zone figures), `trajectories` (per-prompt figures, run comparisons, `plot_run`). Everything public is
importable from `lze_trl.plotting`.

Example:

```python
from lze_trl.plotting import load_run, plot_run

prompts, log = load_run("outputs/my-run")  # output_dir or a checkpoint folder
figures = plot_run(prompts, log, by="difficulty", output_dir="outputs/my-run/plots")
```
"""

from ..method.checkpoint import PROMPTS_PARQUET, SELECTION_LOG_PARQUET
from ..method.prompt_state import prompt_table
from ..method.selection import in_learning_zone
from .base import OTHER_COLOR, SELECTED_COLOR, ZONE_COLORS, PathLike, figure_to_png, new_figure, save_figure
from .tables import (
    exploration_events,
    learning_zone_events,
    learning_zone_summary,
    load_run,
    selection_histograms,
    zone_state,
)
from .trajectories import STANDARD_PLOTS, compare_runs, pass_rate_trajectories, plot_run, selection_raster
from .zones import (
    learning_zone_flow,
    learning_zone_histogram,
    pass_rate_energy_scatter,
    selected_fraction_by,
    zone_bin_labels,
    zone_bin_row,
)


__all__ = [
    "PROMPTS_PARQUET",
    "SELECTION_LOG_PARQUET",
    "OTHER_COLOR",
    "PathLike",
    "SELECTED_COLOR",
    "STANDARD_PLOTS",
    "ZONE_COLORS",
    "compare_runs",
    "figure_to_png",
    "in_learning_zone",
    "learning_zone_events",
    "learning_zone_flow",
    "learning_zone_histogram",
    "learning_zone_summary",
    "load_run",
    "new_figure",
    "pass_rate_energy_scatter",
    "pass_rate_trajectories",
    "plot_run",
    "prompt_table",
    "exploration_events",
    "save_figure",
    "selected_fraction_by",
    "selection_histograms",
    "selection_raster",
    "zone_bin_labels",
    "zone_bin_row",
    "zone_state",
]
