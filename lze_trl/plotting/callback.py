"""A trainer callback that shows what LZE selects in experiment trackers (wandb, trackio) while training runs.

[`LZEGRPOTrainer`] adds it (importing this module) only when `report_to` names wandb or trackio.
"""

from __future__ import annotations

import importlib
import inspect
import io
import os
import sys
import warnings
from typing import Any, Protocol, runtime_checkable

from transformers import TrainerCallback

from ..extras import require
from ..method.checkpoint import PROMPTS_PARQUET, SELECTION_LOG_PARQUET
from ..method.errors import LZEStateError


PLOT_REPORTERS = ("wandb", "trackio")
# The Trainer's end-of-training log (train_runtime, train_loss, ...): the last chance to log before the trackers
# are closed (TrackioCallback.on_train_end finishes its run before later callbacks run).
FINAL_LOG_KEY = "train_runtime"


def _report_to(report_to: str | list[str] | None) -> list[str]:
    if report_to is None or report_to == "none":
        return []
    if isinstance(report_to, str):
        report_to = [report_to]
    if "all" in report_to:
        return [*report_to, *PLOT_REPORTERS]
    return list(report_to)


def wants_lze_plots(args: Any) -> bool:
    """Whether the training arguments report to a tracker that [`LZEPlotCallback`] logs to (wandb or trackio)."""
    return any(r in PLOT_REPORTERS for r in _report_to(getattr(args, "report_to", None)))


class LZEPlotCallback(TrainerCallback):
    """
    Logs what LZE selects to wandb and trackio: histograms at every log, plots as images at an interval.

    At each Trainer log (every `logging_steps`), the prompt groups scored since the previous log are summarised as
    histograms: `<prefix>hist/pass_rate`, `<prefix>hist/selected_pass_rate` and `<prefix>hist/energy`. Every
    `plot_steps` optimizer steps, and at the end of training, the figures of [`lze_trl.plotting.plot_run`] (pass rate
    vs energy, learning zone over time, selected fraction by difficulty) are logged as images under `<prefix>plots/`.

    Logs go to wandb when `"wandb"` is a reporter and `wandb.run` exists (the Trainer's `WandbCallback` creates it),
    and to trackio when `"trackio"` is a reporter, trackio is installed and has a current run (the Trainer's
    `TrackioCallback` creates it); each entry carries `train/global_step`, the step metric both integrations use.
    Only the main process logs. With `save_dir`, the figures are also written there as PNGs
    (`<save_dir>/step-<N>/<name>.png`), with or without a tracker.

    Add it to a trainer with `trainer.add_callback(LZEPlotCallback(trainer))` or [`add_plot_callback`].

    Args:
        tables ([`RunTables`], *optional*):
            Where the prompt table and the selection log are read: a live [`LZEGRPOTrainer`] (it is one) or a
            [`SavedRunTables`] of a run's folder. The callback never needs the trainer itself; can be
            set later with [`~LZEPlotCallback.bind`].
        plot_steps (`int`, *optional*, defaults to `100`):
            Log the figures every `plot_steps` optimizer steps (at the first log at or after it); `None` or 0 logs
            them only at the end of training.
        histogram_steps (`int`, *optional*):
            Log the histograms at most every `histogram_steps` optimizer steps; by default at every log.
        by (`str`, *optional*, defaults to `"difficulty"`):
            Prompt-table column (a train dataset column) of the selected-fraction plot; skipped when absent.
        report_to (`str` or `list[str]`, *optional*):
            Trackers to log to; defaults to the training arguments' `report_to`.
        prefix (`str`, *optional*, defaults to `"train/lze/"`):
            Prefix of the logged keys (the Trainer's metrics appear in wandb and trackio as `train/lze/...`).
        save_dir (`str`, *optional*):
            Also write the figures as PNG files under this folder.
        dpi (`int`, *optional*, defaults to `80`):
            Resolution of the logged images.
        bins (`int`, *optional*, defaults to `20`):
            Bins of the histograms.
    """

    def __init__(
        self,
        tables: RunTables | None = None,
        plot_steps: int | None = 100,
        histogram_steps: int | None = None,
        by: str | None = "difficulty",
        report_to: str | list[str] | None = None,
        prefix: str = "train/lze/",
        save_dir: str | None = None,
        dpi: int = 80,
        bins: int = 20,
    ) -> None:
        self.tables = tables
        self.plot_steps = plot_steps
        self.histogram_steps = histogram_steps
        self.by = by
        self.report_to = report_to
        self.prefix = prefix
        self.save_dir = save_dir
        self.dpi = dpi
        self.bins = bins
        self.last_batch = -1  # generation batches up to this one are already in a logged histogram
        self.last_histogram_step: int | None = None
        self.last_plot_step: int | None = None
        self.num_plot_logs = 0
        self._warned: set[str] = set()

    def bind(self, tables: RunTables) -> LZEPlotCallback:
        """Sets where the plotted tables are read (see [`RunTables`]); returns the callback."""
        self.tables = tables
        return self

    # ------------------------------------------------------------------------------------------------- trackers
    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, stacklevel=3)

    def active_trackers(self, args: Any) -> dict[str, Any]:
        """The tracker modules to log to now, by name: those reported to that have a current run."""
        report_to = _report_to(self.report_to if self.report_to is not None else getattr(args, "report_to", None))
        trackers = {}
        if "wandb" in report_to:
            wandb = sys.modules.get("wandb") or _try_import("wandb")
            if wandb is not None and getattr(wandb, "run", None) is not None:
                trackers["wandb"] = wandb
        if "trackio" in report_to:
            trackio = sys.modules.get("trackio") or _try_import("trackio")
            if trackio is None:
                self._warn_once("trackio", "report_to includes 'trackio' but trackio is not installed: no LZE plots.")
            elif _trackio_run(trackio) is not None:
                trackers["trackio"] = trackio
        return trackers

    # ------------------------------------------------------------------------------------------------- events
    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.tables is None or not state.is_world_process_zero:
            return
        trackers = self.active_trackers(args)
        if not trackers and self.save_dir is None:
            return
        final = bool(logs) and FINAL_LOG_KEY in logs
        step = state.global_step
        entries: dict[str, Any] = {}
        if trackers and (final or _due(step, self.last_histogram_step, self.histogram_steps)):
            entries.update(self._histograms())
            self.last_histogram_step = step
        if (final and self.last_plot_step != step) or _due(step, self.last_plot_step, self.plot_steps, False):
            entries.update(self._plots(trackers, step))
            self.last_plot_step = step
        if entries:
            for name, entry in self._by_tracker(entries, trackers).items():
                trackers[name].log({**entry, "train/global_step": step})
            if any(key.startswith(f"{self.prefix}plots/") for key in entries):
                self.num_plot_logs += 1

    # ------------------------------------------------------------------------------------------------- content
    def _histograms(self) -> dict[str, tuple[str, Any]]:
        import pandas as pd

        from . import selection_histograms

        columns = self.tables.selection_log.columns()
        new = columns["batch"] > self.last_batch
        if not new.any():
            return {}
        self.last_batch = int(columns["batch"][new].max())
        recent = pd.DataFrame({name: values[new] for name, values in columns.items()})
        histograms = selection_histograms(recent, bins=self.bins)
        return {f"{self.prefix}hist/{name}": ("histogram", value) for name, value in histograms.items()}

    def _plots(self, trackers: dict[str, Any], step: int) -> dict[str, tuple[str, Any]]:
        from . import figure_to_png, plot_run

        log = self.tables.selection_log.to_pandas()
        if log.empty:
            return {}
        prompts = self.tables.prompt_table(include_prompts=self.by is not None)
        figures = plot_run(prompts, log, by=self.by)
        entries = {}
        for name, fig in figures.items():
            png = figure_to_png(fig, dpi=self.dpi)
            if self.save_dir is not None:
                folder = os.path.join(self.save_dir, f"step-{step}")
                os.makedirs(folder, exist_ok=True)
                with open(os.path.join(folder, f"{name}.png"), "wb") as f:
                    f.write(png)
            if trackers:
                entries[f"{self.prefix}plots/{name}"] = ("image", (png, f"{name}, step {step}"))
        return entries

    @staticmethod
    def _by_tracker(entries: dict[str, tuple[str, Any]], trackers: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Wraps each entry in the tracker's own media type."""
        out: dict[str, dict[str, Any]] = {}
        for name, module in trackers.items():
            wrapped = {}
            for key, (kind, value) in entries.items():
                if kind == "histogram":
                    wrapped[key] = module.Histogram(np_histogram=value)
                else:
                    png, caption = value
                    wrapped[key] = module.Image(_pil_image(png), caption=caption)
            out[name] = wrapped
        return out


def _due(step: int, last: int | None, every: int | None, default_first: bool = True) -> bool:
    """Whether an action repeated every `every` steps (None: at every call) is due at `step`."""
    if not every:
        return default_first
    if last is None:
        return step >= every
    return step - last >= every


def _try_import(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _trackio_run(trackio) -> Any:
    context_vars = getattr(trackio, "context_vars", None)
    current = getattr(context_vars, "current_run", None)
    return current.get() if current is not None else None


def _pil_image(png: bytes):
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    image.load()
    return image


def add_plot_callback(trainer: Any, **kwargs) -> LZEPlotCallback | None:
    """
    Adds an [`LZEPlotCallback`] to `trainer` when it reports to wandb or trackio; a trainer that already has one keeps
    it, with `kwargs` applied to it.

    Args:
        trainer ([`LZEGRPOTrainer`]):
            The trainer.
        **kwargs:
            Arguments of [`LZEPlotCallback`] (`plot_steps`, `by`, ...).

    Returns:
        [`LZEPlotCallback`] or `None`: the callback added (or already there), `None` when no tracker is reported to.

    Raises:
        `ImportError`: when a tracker is reported to but matplotlib is missing (`pip install "lze-trl[plot]"`).
    """
    unknown = set(kwargs) - set(inspect.signature(LZEPlotCallback).parameters) - {"tables"}
    if unknown:
        raise TypeError(f"add_plot_callback() got unknown LZEPlotCallback arguments: {sorted(unknown)}")
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, LZEPlotCallback):
            for name, value in kwargs.items():
                setattr(callback, name, value)
            return callback.bind(trainer) if callback.tables is None else callback
    if not wants_lze_plots(trainer.args) and not kwargs.get("report_to"):
        return None
    require("matplotlib.figure", "the learning-zone plots in wandb/trackio", "plot")
    callback = LZEPlotCallback(trainer, **kwargs)
    trainer.add_callback(callback)
    return callback


__all__ = ["LZEPlotCallback", "add_plot_callback", "wants_lze_plots"]


@runtime_checkable
class RunTables(Protocol):
    """
    What the plots and [`LZEPlotCallback`] read from a run: its selection log (an object with
    `columns()` and `to_pandas()`, a [`~lze_trl.method.selection_log.SelectionLog`]) and its per-prompt table. A live
    [`LZEGRPOTrainer`] is one; [`SavedRunTables`] reads a finished run's or a checkpoint's files.
    """

    selection_log: Any

    def prompt_table(self, include_prompts: bool = True) -> Any: ...


class SavedRunTables:
    """
    The [`RunTables`] of a folder written by a run (its `output_dir` or a checkpoint): `lze_prompts.parquet` and
    `lze_selection_log.parquet`, read once.

    Args:
        folder (`str`):
            The folder holding both files.

    Raises:
        [`LZEStateError`]: when either file is missing.
    """

    def __init__(self, folder: str) -> None:
        import pandas as pd

        from ..method.selection_log import SelectionLog

        paths = {name: os.path.join(folder, name) for name in (PROMPTS_PARQUET, SELECTION_LOG_PARQUET)}
        missing = [name for name, path in paths.items() if not os.path.isfile(path)]
        if missing:
            raise LZEStateError(f"{folder!r} has no {' or '.join(missing)}: pass a run's output_dir or a checkpoint.")
        self._prompts = pd.read_parquet(paths[PROMPTS_PARQUET])
        self.selection_log = SelectionLog(max_rows=10**12)  # every saved row
        self.selection_log.load_pandas(pd.read_parquet(paths[SELECTION_LOG_PARQUET]))

    def prompt_table(self, include_prompts: bool = True) -> Any:
        """The saved prompt table (with the dataset's columns that were saved with it when `include_prompts`)."""
        if include_prompts:
            return self._prompts.copy()
        from ..method.prompt_state import COLUMNS

        state_columns = ("prompt_key", *COLUMNS, "pruned")
        keep = [c for c in self._prompts.columns if c in state_columns]
        return self._prompts[keep].copy()
