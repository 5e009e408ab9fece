r"""Rollout replay: a bounded buffer of informative groups that later updates take again, to generate less.

With `fresh_fraction < 1` each generation batch generates only that share of its prompts; the update then takes its
groups by energy from the fresh groups and from this buffer of recent live groups, each with the completions,
rewards, advantages (as computed in its own group) and per-token log-probabilities of the policy that generated it.
A replayed group is trained with TRL's clipped objective against those recorded log-probabilities (its
`old_per_token_logps`), so its importance ratio is `pi_theta / pi_behaviour`, clipped as TRL clips, and TRL's
truncated importance-sampling correction (vLLM) is kept as recorded.

Rules (all decided from gathered data, identically on every process):

- insert: every live fresh group of a generation batch, with its energy, pass rate and birth (generation index);
  a group selected for the update the batch it was generated counts one use;
- eligible: `age = generation - birth <= max_staleness` and `uses < max_uses`;
- evict: ineligible groups, then the oldest, beyond `capacity` groups.

A group's rows stay on the process that generated them (its `owner`); the metadata is the same everywhere. Plain
numpy and torch, no TRL import.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lze_trl.state import LZEStateError, atomic_write


META = ("key", "prompt_id", "owner", "birth", "uses", "pass_rate", "energy")


def trim_group(rows: dict[str, Any]) -> dict[str, Any]:
    """
    One group's rows without the padding columns none of its rows uses (prompts are left-padded, completions and
    the per-token tensors right-padded), on the CPU: what the buffer holds.
    """
    prompt_width = int(rows["prompt_mask"].sum(dim=1).max())
    full_width = rows["completion_ids"].shape[1]
    completion_width = max(int(rows["completion_mask"].sum(dim=1).max()), 1)
    out = {}
    for key, value in rows.items():
        if torch.is_tensor(value) and value.ndim == 2 and key.startswith("prompt"):
            value = value[:, value.shape[1] - prompt_width :]
        elif torch.is_tensor(value) and value.ndim == 2 and value.shape[1] == full_width:
            value = value[:, :completion_width]
        out[key] = value.detach().cpu() if torch.is_tensor(value) else value
    return out


class ReplayBuffer:
    """
    The buffer's metadata (identical on every process) and this process's rows of the groups it owns.

    Args:
        capacity (`int`):
            Most groups held.
        max_staleness (`int`):
            Most generation batches between a group's generation and an update that replays it.
        max_uses (`int`):
            Most updates a group takes part in (its first one included).
        process_index (`int`, *optional*, defaults to `0`):
            This process: it holds the rows of the groups whose `owner` it is.
    """

    def __init__(self, capacity: int, max_staleness: int, max_uses: int, process_index: int = 0) -> None:
        self.capacity, self.max_staleness, self.max_uses = capacity, max_staleness, max_uses
        self.process_index = process_index
        self.meta = {
            name: np.zeros(0, dtype=np.float64 if name in ("pass_rate", "energy") else np.int64) for name in META
        }
        self.rows: dict[int, dict[str, Any]] = {}  # key -> this process's rows of the group
        self.stats = dict.fromkeys(("inserted", "replayed", "evicted_stale", "evicted_used", "evicted_full"), 0)

    def __len__(self) -> int:
        return len(self.meta["key"])

    def eligible(self, generation: int) -> np.ndarray:
        """Mask of the groups an update at `generation` may take."""
        return (generation - self.meta["birth"] <= self.max_staleness) & (self.meta["uses"] < self.max_uses)

    def insert(self, keys, prompt_ids, owners, generation, pass_rates, energies, uses, rows: list | None) -> None:
        """
        Adds groups (metadata of all of them; `rows[i]` is this process's rows of group `i`, or `None` when another
        process owns it), then evicts: groups no longer eligible, then the oldest beyond `capacity`.
        """
        n = len(keys)
        new = {
            "key": keys,
            "prompt_id": prompt_ids,
            "owner": owners,
            "birth": np.full(n, generation),
            "uses": uses,
            "pass_rate": pass_rates,
            "energy": energies,
        }
        for name in META:
            self.meta[name] = np.concatenate([self.meta[name], np.asarray(new[name], dtype=self.meta[name].dtype)])
        for key, group_rows in zip(np.asarray(keys).tolist(), rows or [None] * n):
            if group_rows is not None:
                self.rows[int(key)] = trim_group(group_rows)
        self.stats["inserted"] += n
        self.evict(generation)

    def evict(self, generation: int) -> None:
        """Drops the groups no longer eligible at `generation`, then the oldest beyond `capacity`."""
        stale = generation - self.meta["birth"] > self.max_staleness
        used = self.meta["uses"] >= self.max_uses
        keep = ~stale & ~used
        order = np.argsort(-self.meta["birth"], kind="stable")  # newest first
        full = np.zeros(len(self), dtype=bool)
        full[order[np.cumsum(keep[order]) > self.capacity]] = True
        keep &= ~full
        self.stats["evicted_stale"] += int(stale.sum())
        self.stats["evicted_used"] += int((used & ~stale).sum())
        self.stats["evicted_full"] += int((full & ~stale & ~used).sum())
        for key in self.meta["key"][~keep].tolist():
            self.rows.pop(int(key), None)
        for name in META:
            self.meta[name] = self.meta[name][keep]

    def take(self, index: np.ndarray) -> list[dict[str, Any]]:
        """Counts one use of the groups at `index` (into the metadata) and returns this process's rows of those it
        owns, in order."""
        self.meta["uses"][index] += 1
        self.stats["replayed"] += len(index)
        mine = index[self.meta["owner"][index] == self.process_index]
        return [self.rows[int(key)] for key in self.meta["key"][mine].tolist()]

    def nbytes(self) -> int:
        """Bytes of this process's stored rows and of the metadata."""
        tensors = sum(
            v.element_size() * v.nelement() for g in self.rows.values() for v in g.values() if torch.is_tensor(v)
        )
        return int(tensors + sum(a.nbytes for a in self.meta.values()))

    # ----------------------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, np.ndarray]:
        """The metadata and counters (the same on every process); rows are saved per process ([`rows_state`])."""
        return {
            **{f"meta.{k}": v.copy() for k, v in self.meta.items()},
            "stats": np.asarray(list(self.stats.values())),
        }

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name in META:
            self.meta[name] = np.asarray(state[f"meta.{name}"], dtype=self.meta[name].dtype).copy()
        self.stats = dict(zip(self.stats, np.asarray(state["stats"]).tolist()))

    def rows_state(self) -> dict[int, dict[str, Any]]:
        """This process's rows, to save beside the checkpoint (one file per process)."""
        return self.rows

    def load_rows_state(self, rows: dict[int, dict[str, Any]]) -> None:
        """Restores this process's rows; fails when they do not match the metadata's groups it owns."""
        mine = set(self.meta["key"][self.meta["owner"] == self.process_index].tolist())
        if set(rows) != mine:
            raise LZEStateError(
                f"The replay buffer's saved rows of process {self.process_index} hold {len(rows)} groups where its "
                f"metadata names {len(mine)}: resume with the same number of processes and a complete checkpoint."
            )
        self.rows = dict(rows)


class ReplayGuard:
    """The loud side of replay: conditions under which it degenerates, each said once."""

    def __init__(self, max_staleness: int) -> None:
        self.max_staleness = max_staleness
        self.alarms: dict[str, int] = {}

    def __call__(self, generation: int, metrics: dict[str, float], warn: Callable[[str], None]) -> None:
        """
        Says loudly, once each, when replay degenerates: updates starved of groups (an empty or stale buffer), most
        replayed tokens clipped (the policy moved away from the buffer), or the same groups replayed again and again
        as most of the update. Each condition must hold for 3 generation batches in a row, after the buffer's first
        `replay_max_staleness` batches.
        """
        if generation <= self.max_staleness:
            return
        conditions = {
            "starved": metrics["lze/replay_eligible_groups"] == 0,
            "clipped": metrics["lze/replay_clipped_share"] > 0.5,
            "repeated": metrics["lze/replayed_share"] > 0.75,
        }
        messages = {
            "starved": "rollout replay: no buffered group was eligible for 3 generation batches, so the updates held "
            f"only fresh groups; the buffer holds {metrics['lze/replay_buffer_groups']} groups. Raise "
            "replay_max_staleness, replay_max_uses or fresh_fraction.",
            "clipped": "rollout replay: more than half the replayed tokens were outside TRL's clip range "
            f"({metrics['lze/replay_clipped_share']:.0%}; mean ratio {metrics['lze/replay_ratio_mean']:.2f}) for 3 "
            "generation batches: they give no gradient, the policy has moved away from the buffer. Lower "
            "replay_max_staleness or raise fresh_fraction.",
            "repeated": "rollout replay: replayed groups were more than 75% of the update for 3 generation batches "
            f"({metrics['lze/replayed_share']:.0%}): the run trains mostly on old rollouts. Raise fresh_fraction or "
            "lower replay_max_uses.",
        }
        for name, holds in conditions.items():
            count = self.alarms.get(name, 0)
            if count >= 0:  # -1: said once already
                self.alarms[name] = count + 1 if holds else 0
                if self.alarms[name] >= 3:
                    warn(messages[name])
                    self.alarms[name] = -1


# ----------------------------------------------------------------------------------------------- rows on disk
def rows_file(folder: str, process_index: int) -> str:
    """The file of one process's replay-buffer rows in a checkpoint folder."""
    return os.path.join(folder, f"lze_replay_rows_rank{process_index}.pt")


def save_rows(folder: str, process_index: int, rows: dict[int, dict[str, Any]]) -> str:
    """Writes one process's replay-buffer rows (a dict of tensors per group) atomically; returns the path."""
    os.makedirs(folder, exist_ok=True)
    path = rows_file(folder, process_index)
    atomic_write(path, lambda f: torch.save(rows, f))
    return path


def load_rows(folder: str, process_index: int) -> dict[int, dict[str, Any]]:
    """Reads one process's replay-buffer rows; raises [`LZEStateError`] naming the file when missing or corrupt."""
    path = rows_file(folder, process_index)
    if not os.path.isfile(path):
        raise LZEStateError(
            f"The checkpoint {folder!r} has no replay rows {os.path.basename(path)!r} for this process."
        )
    try:
        return torch.load(path, weights_only=True)
    except Exception as error:
        raise LZEStateError(f"The replay rows {path!r} are corrupt ({type(error).__name__}).") from error
