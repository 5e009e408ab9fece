"""The rollout-side selection figure, from a run's `trainer_state.json` log history."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lze_trl.plotting.base import PathLike, _finish, _no_data, new_figure


if TYPE_CHECKING:
    from matplotlib.figure import Figure


# ------------------------------------------------------------------------------------------ rollout-side selection
ROLLOUT_FILTER_PREFIX = "lze/rollout_filter/"


def load_log_history(run_dir: PathLike) -> list[dict[str, Any]]:
    """
    The Trainer's log history of a run: `trainer_state.json` of `run_dir`, or of its latest `checkpoint-*` folder.

    Returns:
        `list[dict]`: the logged rows (`[]` when no `trainer_state.json` is found).
    """
    import json

    folder = os.fspath(run_dir)
    if not os.path.isfile(os.path.join(folder, "trainer_state.json")):
        checkpoints = [d for d in os.listdir(folder) if d.startswith("checkpoint-") and d.split("-")[-1].isdigit()]
        if not checkpoints:
            return []
        folder = os.path.join(folder, max(checkpoints, key=lambda d: int(d.split("-")[-1])))
        if not os.path.isfile(os.path.join(folder, "trainer_state.json")):
            return []
    with open(os.path.join(folder, "trainer_state.json")) as f:
        return json.load(f).get("log_history", [])


def rollout_filter_figure(log_history: Sequence[Mapping[str, Any]], save_path: PathLike | None = None) -> Figure:
    """
    How well rollout-side selection (`rollout_filter`) predicted dead groups, step by step.

    Top: the share of each generation batch's groups predicted dead (before generation) against the share observed
    dead. Middle: the Brier score of the prediction, per batch and over the run. Bottom: cumulative skipped prompts,
    audited skips, and audited skips that came back alive (wrong skips).

    Args:
        log_history (`Sequence[Mapping]`):
            The Trainer's log rows (`trainer.state.log_history` or [`load_log_history`]).
        save_path (`str` or `os.PathLike`, *optional*):
            Also write the figure as a PNG there.
    """
    p = ROLLOUT_FILTER_PREFIX
    rows = [r for r in log_history if f"{p}brier" in r]
    fig = new_figure(3, 1, figsize=(7.0, 7.0), sharex=True)
    ax_dead, ax_brier, ax_skips = fig.axes
    ax_skips.set_xlabel("step")
    ax_dead.set_ylabel("share of groups")
    ax_brier.set_ylabel("Brier score")
    ax_skips.set_ylabel("prompts (cumulative)")
    if not rows:
        for ax in fig.axes:
            _no_data(ax)
        return _finish(fig, save_path)
    steps = [r["step"] for r in rows]
    ax_dead.plot(steps, [r[f"{p}predicted_dead_frac"] for r in rows], label="predicted dead", color="tab:blue")
    ax_dead.plot(steps, [r[f"{p}observed_dead_frac"] for r in rows], label="observed dead", color="tab:red")
    ax_dead.set_ylim(-0.02, 1.02)
    ax_dead.legend(fontsize=8)
    ax_dead.set_title("Rollout-side selection: predicted vs observed dead groups", fontsize=10)
    ax_brier.plot(steps, [r[f"{p}brier"] for r in rows], label="per batch", color="tab:purple")
    ax_brier.plot(steps, [r[f"{p}brier_total"] for r in rows], label="over the run", color="black", ls="--")
    ax_brier.legend(fontsize=8)
    for key, label, color in (
        ("skipped_total", "skipped", "tab:gray"),
        ("audited_total", "audited skips", "tab:orange"),
        ("audited_alive_total", "wrong skips (audited, alive)", "tab:red"),
    ):
        ax_skips.plot(steps, [r[f"{p}{key}"] for r in rows], label=label, color=color)
    ax_skips.legend(fontsize=8)
    return _finish(fig, save_path)
