"""The checkpoint file of a process's generation batches in flight (the async window's): written by
[`save_in_flight`] into `lze_in_flight_<process>.pt` of each checkpoint, atomically, and taken back by
[`load_in_flight`] with the one set of refusals (the file missing, or written by another number of processes)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from ..method.checkpoint import atomic_write
from ..method.errors import LZEStateError


IN_FLIGHT_FILE = "lze_in_flight_{process}.pt"
"""The batches in flight of one process, in a checkpoint folder."""


def save_in_flight(
    folder: str, process: int, num_processes: int, batches: tuple[dict[str, np.ndarray], dict[str, Any]]
) -> None:
    """Writes `batches`, what `process` keeps of its generation batches in flight as arrays and other values (the
    async window's [`~lze_trl.async_grpo.window.GroupWindow.state_dict`]), into the checkpoint `folder`, atomically,
    with the number of processes that keep them."""
    payload = {"batches": batches, "num_processes": num_processes}
    atomic_write(os.path.join(folder, IN_FLIGHT_FILE.format(process=process)), lambda f: torch.save(payload, f))


def load_in_flight(
    folder: str, process: int, num_processes: int, needed_by: str
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """What [`save_in_flight`] wrote for `process` in the checkpoint `folder`; raises an
    [`~lze_trl.method.checkpoint.LZEStateError`] when the file is missing (`needed_by` names the run that needs it) or
    was written by another number of processes."""
    path = os.path.join(folder, IN_FLIGHT_FILE.format(process=process))
    if not os.path.exists(path):
        raise LZEStateError(
            f"{path!r} is missing: the checkpoint holds no batches in flight for process {process}, which {needed_by} "
            "needs (a checkpoint of another kind of run, or an incomplete one)."
        )
    payload = torch.load(path, weights_only=False)  # the run's own rows (any object TRL generated), not only tensors
    if payload["num_processes"] != num_processes:
        raise LZEStateError(
            f"The batches in flight in {folder!r} were kept by {payload['num_processes']} processes, not "
            f"{num_processes}: each process keeps its own; resume with the same number of processes."
        )
    return payload["batches"]
