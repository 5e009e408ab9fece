"""The rounds layer through its port alone: serial and fused rounds driven by a fake `TRLPort` (no TRL, no model), so
that the one seam between the rounds and TRL is one a test plugs into. Rollouts and rewards are a function of the
prompt and the rollout's index, so serial and fused rounds meet the same outcomes and must take the same choices."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from lze_trl.method.run import LZERun
from lze_trl.method.settings import LZESettings
from lze_trl.rounds.fused import RoundPipeline, train_fused
from lze_trl.rounds.port import RoundsContext
from lze_trl.rounds.rollouts import GeneratedRows, Rollouts
from lze_trl.rounds.serial import train_on_generation_batch


G, PROMPTS = 4, 4  # rollouts of a complete group; prompts a generation batch


@dataclass
class Settings(LZESettings):
    seed: int = 0  # TRL's setting, which the method reads


def passes(prompt: int, rollout: int) -> float:
    """Prompt p passes on its rollouts j with (p + j) % 3 == 0: the pass rates differ by prompt."""
    return float((prompt * 7 + rollout) % 3 == 0)


class FakePort:
    """A `TRLPort` without TRL: rows are dicts naming their prompt and rollout; update rows are tensors."""

    def __init__(self) -> None:
        self.calls: list[int] = []  # the rows of each generation call
        self.rollout_of: dict[int, int] = {}  # next rollout index of each prompt within its group

    def generate_rollouts(self, inputs, num_rollouts, stale=None):
        self.calls.append(len(inputs))
        keys, rewards, generated = [], [], []
        for row in inputs:
            j = row["_j"]  # the rollout's index in its group
            keys.append(row["prompt"])
            rewards.append([passes(row["prompt"], j)])
            generated.append(j)
        rows = GeneratedRows(list(inputs), [r["prompt"] for r in inputs], (generated, generated, *[None] * 6), {})
        return Rollouts(rows, np.array(keys), np.array(rewards))

    def update_rows(self, inputs, served=None, stale=None):
        n = len(inputs)
        batch = {
            "prompt_ids": torch.tensor([[r["prompt"]] for r in inputs]),
            "completion_mask": torch.ones(n, 2),
            "advantages": torch.ones(n),
            "num_items_in_batch": torch.tensor(2.0 * n),
        }
        return batch, None

    def gathered_prompt_keys(self, inputs):
        return np.array([row["prompt"] for row in inputs])

    def total_rewards(self, rewards):
        return rewards.sum(axis=-1)

    def log_lze(self, metrics):
        self.logged.append(metrics)

    logged: list


class Accelerator:
    num_processes, process_index, device = 1, 0, torch.device("cpu")

    def gather(self, tensor):
        return tensor


def inputs_of(batch: int) -> list[dict]:
    """A generation batch's rows: its prompts, each `G` times, each row naming its rollout index."""
    return [{"prompt": batch * PROMPTS + p, "_j": j} for p in range(PROMPTS) for j in range(G)]


class ListLookahead:
    """The batches a sampler would hand next: `batches[k + ahead]` while the one handed is `batches[k]`."""

    def __init__(self, batches, handed):
        self.batches, self.index = batches, batches.index(handed)

    def batch(self, ahead):
        k = self.index + ahead
        return [dict(r) for r in self.batches[k]] if k < len(self.batches) else None

    def same(self, drawn, handed):
        return [r["prompt"] for r in drawn] == [r["prompt"] for r in handed]


def run(fused: bool, steps: int, lookahead=ListLookahead):
    settings = Settings(generation_rounds=[2, G], round_policy="probe", selection_ratio=0.5, fuse_rounds=fused)
    lze = LZERun(settings, G, np.arange(steps * PROMPTS), ["correct"], 0)
    port, pipeline = FakePort(), RoundPipeline()
    port.logged = []
    batches = [inputs_of(b) for b in range(steps)]
    updates = []
    for step, handed in enumerate(batches):
        context = RoundsContext(lze, G, Accelerator(), 1, step)
        handed = [dict(r) for r in handed]
        if fused:
            rows = train_fused(port, context, pipeline, handed, lookahead(batches, batches[step]))
        else:
            rows = train_on_generation_batch(port, context, handed)
        kept = rows["completion_mask"].sum(dim=1) > 0
        updates.append(sorted(rows["prompt_ids"][kept, 0].tolist()))
    return lze, port, updates


def test_fused_rounds_take_the_serial_choices_and_train_each_handed_batch_in_its_step():
    serial, serial_port, serial_updates = run(False, 4)
    fused, fused_port, fused_updates = run(True, 4)
    assert fused_updates == serial_updates and all(serial_updates)
    for k, update in enumerate(fused_updates):  # each step trains on the batch it was handed
        assert {p // PROMPTS for p in update} == {k}
    columns = ["prompt_key", "pass_rate", "energy", "weight"]
    assert serial.selection_log.to_pandas()[columns].equals(fused.selection_log.to_pandas()[columns])
    # one generation call a step but the first (the staircase) and none drawn past the last batch
    assert [m["lze/generation_calls"] for m in fused_port.logged] == [2, 1, 1, 1]
    assert len(serial_port.calls) == 8 and len(fused_port.calls) == 5
    assert sum(fused_port.calls) == sum(serial_port.calls)  # the same rollouts, fused into fewer calls
    assert [m["lze/rollout_staleness"] for m in fused_port.logged] == [0.0, 0.5, 0.5, 0.5]


def test_a_batch_drawn_ahead_that_is_not_the_one_handed_is_dropped_with_a_warning():
    class Astray(ListLookahead):
        def batch(self, ahead):
            return super().batch(ahead + 1)

    with pytest.warns(UserWarning, match="not the one TRL's sampler handed: its rounds in flight are dropped"):
        fused, port, updates = run(True, 3, Astray)
    assert [m["lze/generation_calls"] for m in port.logged] == [2, 2, 2]  # every step starts anew
    assert [{p // PROMPTS for p in u} for u in updates] == [{0}, {1}, {2}]  # and still trains on its own batch


def test_the_fake_port_is_a_trl_port():
    from lze_trl.rounds.port import TRLPort

    names = {n for n in vars(TRLPort) if not n.startswith("_")}
    assert names == {"generate_rollouts", "update_rows", "gathered_prompt_keys", "total_rewards", "log_lze"}
    assert all(callable(getattr(FakePort(), n)) for n in names)  # the rounds need nothing else of a trainer
