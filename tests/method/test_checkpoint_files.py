"""The LZE state on disk is never lost, half-written or mapped onto other prompts without an error."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest
import torch
from testing_utils import make_trainer, mixed_reward, prompt_dataset

from lze_trl.method import checkpoint as lze_state
from lze_trl.method.errors import LZEStateError
from lze_trl.method.guards import LZEWarning


# ----------------------------------------------------------------------------------------------- the state file
def test_state_round_trip_and_a_file_without_counters(tmp_path):
    arrays = {"prompts.ema_pass_rate": np.linspace(0, 1, 5), "pruner.explored_keys": np.array([3, 9])}
    counters = {"generation": 3, "step": 12, "dataset": {"size": 5, "hash": "ab"}}
    lze_state.save_state(str(tmp_path), arrays, counters)
    loaded, loaded_counters = lze_state.load_state(str(tmp_path))
    assert loaded_counters == counters and set(loaded) == set(arrays)
    np.testing.assert_array_equal(loaded["prompts.ema_pass_rate"], arrays["prompts.ema_pass_rate"])
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]  # no temporary file left behind

    bare = tmp_path / "bare"
    bare.mkdir()
    np.savez(bare / "lze_state.npz", **arrays)  # arrays alone: a state file not written by save_state
    with pytest.raises(LZEStateError, match="LZE counters in .* are missing or corrupt"):
        lze_state.load_state(str(bare))


def test_missing_and_corrupt_state_files_are_named(tmp_path):
    with pytest.raises(LZEStateError, match="no LZE state file 'lze_state.npz'"):
        lze_state.load_state(str(tmp_path))
    lze_state.save_state(str(tmp_path), {"a": np.arange(3)}, {"step": 1})
    path = tmp_path / "lze_state.npz"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a torn file
    with pytest.raises(LZEStateError, match="lze_state.npz.*corrupt"):
        lze_state.load_state(str(tmp_path))
    with zipfile.ZipFile(path, "w") as z:  # a readable archive whose counters are garbage
        with z.open("__counters__.npy", "w") as f:
            np.lib.format.write_array(f, np.frombuffer(b"{not json", dtype=np.uint8))
    with pytest.raises(LZEStateError, match="counters.*corrupt"):
        lze_state.load_state(str(tmp_path))


SAVE_LOOP = textwrap.dedent(
    """
    import sys
    import numpy as np
    from lze_trl.method import checkpoint as state

    folder = sys.argv[1]
    version = 0
    print("ready", flush=True)
    while True:
        version += 1
        rng = np.random.default_rng(version)
        arrays = {f"prompts.a{i}": rng.random(20_000) for i in range(8)}
        state.save_state(folder, arrays, {"version": version, "dataset": None})
    """
)


def expected_arrays(version: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(version)
    return {f"prompts.a{i}": rng.random(20_000) for i in range(8)}


@pytest.mark.slow
def test_sigkill_during_saves_leaves_a_complete_state_or_a_loud_refusal(tmp_path):
    """A process killed with SIGKILL at random instants of its save loop, 24 times: each resume is exact or refused."""
    script = tmp_path / "save_loop.py"
    script.write_text(SAVE_LOOP)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}
    rng = random.Random(0)
    outcomes = {"exact": 0, "refused": 0}
    held_a_state = set()
    for kill in range(24):
        folder = tmp_path / f"ckpt-{kill % 3}"  # reuse folders: a kill can hit an overwrite of a complete state
        folder.mkdir(exist_ok=True)
        proc = subprocess.Popen([sys.executable, str(script), str(folder)], env=env, stdout=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        try:
            arrays, counters = lze_state.load_state(str(folder))
        except LZEStateError as error:
            # Refused loudly, naming the file: allowed only while the folder never held a complete state. Once it
            # did, an interrupted overwrite must leave the old state whole.
            assert "lze_state.npz" in str(error)
            assert folder not in held_a_state, f"kill {kill} destroyed the complete state in {folder.name}: {error}"
            outcomes["refused"] += 1
            continue
        held_a_state.add(folder)
        expected = expected_arrays(counters["version"])
        assert set(arrays) == set(expected)
        for key, value in expected.items():
            np.testing.assert_array_equal(arrays[key], value)
        outcomes["exact"] += 1
    assert outcomes["exact"] > 0  # the kills did land between complete saves
    assert sum(outcomes.values()) == 24


# ----------------------------------------------------------------------------------------------- resume, for real
def saving_trainer(out_dir, dataset=None, **overrides):
    """8 steps on 16 prompts with checkpoints at steps 4 and 8."""
    values = dict(max_steps=8, save_strategy="steps", save_steps=4, learning_rate=1e-2)
    values.update(overrides)
    return make_trainer(out_dir, dataset=prompt_dataset(16) if dataset is None else dataset, **values)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """An uninterrupted 8-step LZE run with checkpoints at steps 4 and 8."""
    out = tmp_path_factory.mktemp("full")
    trainer = saving_trainer(out)
    trainer.train()
    return trainer, out / "out"


@pytest.mark.slow
def test_selection_log_survives_resume(full_run, tmp_path):
    full, out = full_run
    resumed = saving_trainer(tmp_path)
    resumed.train(resume_from_checkpoint=str(out / "checkpoint-4"))
    expected = full.selection_log.to_pandas()
    assert len(expected) == 8 * 2  # 2 groups per step, 8 steps
    assert resumed.selection_log.to_pandas().equals(expected)
    import pandas as pd

    final = pd.read_parquet(tmp_path / "out" / "lze_selection_log.parquet")
    assert final.equals(expected.drop(columns=[]).reset_index(drop=True))


def test_resume_from_the_last_checkpoint_needs_one(tmp_path):
    # `resume_from_checkpoint=True` means the last checkpoint of output_dir (LZEStateOwner.resume_lze, both trainers)
    trainer = saving_trainer(tmp_path)
    with pytest.raises(ValueError, match="No checkpoint found in output_dir="):
        trainer.train(resume_from_checkpoint=True)
    assert trainer.state.global_step == 0


@pytest.mark.slow
def test_resume_from_true_is_the_last_checkpoint(full_run, tmp_path):
    import shutil

    full, out = full_run
    shutil.copytree(out / "checkpoint-4", tmp_path / "out" / "checkpoint-4")
    resumed = saving_trainer(tmp_path)
    resumed.train(resume_from_checkpoint=True)
    assert resumed.selection_log.to_pandas().equals(full.selection_log.to_pandas())


@pytest.mark.slow
def test_resume_refuses_a_checkpoint_whose_lze_state_is_gone(full_run, tmp_path):
    import shutil

    _, out = full_run
    checkpoint = tmp_path / "checkpoint-4"
    shutil.copytree(out / "checkpoint-4", checkpoint)
    os.remove(checkpoint / "lze_state.npz")
    with pytest.raises(LZEStateError, match="no LZE state file 'lze_state.npz'.*resume_lze_state='fresh'"):
        saving_trainer(tmp_path / "a").train(resume_from_checkpoint=str(checkpoint))
    # The documented opt-out: resume model and optimizer with a fresh LZE state, after a warning.
    trainer = saving_trainer(tmp_path / "b", resume_lze_state="fresh")
    with pytest.warns(LZEWarning, match="fresh LZE state"):
        trainer.train(resume_from_checkpoint=str(checkpoint))
    assert trainer.state.global_step == 8
    assert trainer.lze.prompts.table()["num_observations"].sum() == 4 * 2  # only the 4 steps after the checkpoint
    # Plain GRPO's state decides nothing: a missing one only warns.
    trainer = saving_trainer(tmp_path / "c", selector="none")
    with pytest.warns(LZEWarning, match="fresh LZE state"):
        trainer.train(resume_from_checkpoint=str(checkpoint))


@pytest.mark.slow
def test_resume_refuses_a_corrupt_state_or_selection_log(full_run, tmp_path):
    import shutil

    _, out = full_run
    checkpoint = tmp_path / "checkpoint-4"
    shutil.copytree(out / "checkpoint-4", checkpoint)
    (checkpoint / "lze_selection_log.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(LZEStateError, match="lze_selection_log.parquet.*corrupt"):
        saving_trainer(tmp_path / "a").train(resume_from_checkpoint=str(checkpoint))
    shutil.copy(out / "checkpoint-4" / "lze_selection_log.parquet", checkpoint)
    data = (checkpoint / "lze_state.npz").read_bytes()
    (checkpoint / "lze_state.npz").write_bytes(data[: len(data) // 3])
    with pytest.raises(LZEStateError, match="lze_state.npz.*corrupt"):
        saving_trainer(tmp_path / "b").train(resume_from_checkpoint=str(checkpoint))


@pytest.mark.slow
def test_resume_refuses_another_train_dataset(full_run, tmp_path):
    _, out = full_run
    checkpoint = str(out / "checkpoint-4")
    with pytest.raises(LZEStateError, match="16 prompts.*has 12"):
        saving_trainer(tmp_path / "a", dataset=prompt_dataset(12)).train(resume_from_checkpoint=checkpoint)
    shuffled = prompt_dataset(16).select(list(reversed(range(16))))
    with pytest.raises(LZEStateError, match="content differs"):
        saving_trainer(tmp_path / "b", dataset=shuffled).train(resume_from_checkpoint=checkpoint)
    # A row's identity is its whole content: a new column makes other tasks of the same prompts, refused too.
    with pytest.raises(LZEStateError, match="content differs"):
        saving_trainer(tmp_path / "c", dataset=prompt_dataset(16).add_column("level", [0] * 16)).train(
            resume_from_checkpoint=checkpoint
        )
    trainer = saving_trainer(tmp_path / "c2", dataset=prompt_dataset(16))  # the same rows: the state fits
    trainer.train(resume_from_checkpoint=checkpoint)
    assert trainer.state.global_step == 8
    # Opt-out: a fresh state on purpose.
    trainer = saving_trainer(tmp_path / "d", dataset=prompt_dataset(12), resume_lze_state="fresh")
    with pytest.warns(LZEWarning, match="12"):
        trainer.train(resume_from_checkpoint=checkpoint)


# ----------------------------------------------------------------------------------------------- bad input, early
@pytest.mark.parametrize(
    "schedule", [dict(max_steps=3), dict(max_steps=-1, num_train_epochs=2)], ids=["steps", "epochs"]
)
def test_a_dataset_too_small_for_one_generation_batch_is_refused(tmp_path, schedule):
    # per_device_train_batch_size=8, num_generations=4: one generation batch needs 2 prompts.
    with pytest.raises(ValueError, match="train dataset has 1 prompts, but one generation batch needs 2"):
        make_trainer(tmp_path, dataset=prompt_dataset(1), **schedule)


@pytest.mark.slow
@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda completions, **kw: ["1.0"] * len(completions), "returned a str value"),
        (lambda completions, **kw: [[1.0]] * len(completions), "returned a list value"),
        (lambda completions, **kw: 1.0, "returned a float; it must return a list"),
        (lambda completions, **kw: [1.0], "returned 1 rewards for 8 completions"),
    ],
    ids=["strings", "lists", "scalar", "short"],
)
def test_a_reward_function_returning_non_numbers_is_named(tmp_path, bad, match):
    def my_reward(completions, **kwargs):
        return bad(completions, **kwargs)

    trainer = make_trainer(tmp_path, reward=[mixed_reward, my_reward], max_steps=1)
    with pytest.raises(TypeError, match=f"Reward function 'my_reward' {match}"):
        trainer.train()


def test_valid_reward_values_pass_the_check():
    from lze_trl.method.guards import check_reward_values

    check_reward_values("r", [1, 0.5, True, None, float("nan"), np.float32(1), torch.tensor(0.5), np.array(1.0)], 8)
    check_reward_values("r", np.array([0.0, 1.0]), 2)
