"""Experiment trackers: `LZEPlotCallback` logic with stand-in trackers, and real offline wandb / local trackio runs."""

from __future__ import annotations

import contextvars
import json
import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lze_trl.method.selection_log import SelectionLog
from lze_trl.plotting.callback import LZEPlotCallback, add_plot_callback, wants_lze_plots


ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TRAINER_LZE_METRICS = (
    "lze/pass_rate_mean",
    "lze/energy_mean",
    "lze/dead_frac",
    "lze/selected_frac",
    "lze/update_rows",
    "lze/update_tokens",
    "lze/update_tokens_saved_frac",
)
PLOTS = ("pass_rate_vs_energy", "learning_zone", "selected_by")


# --------------------------------------------------------------------------------------------- stand-in trackers
class FakeTracker(types.ModuleType):
    """A module with the part of the wandb / trackio API the callback uses, recording what is logged."""

    def __init__(self, name: str, active: bool = True) -> None:
        super().__init__(name)
        self.logged: list[dict] = []
        self.run = object() if active else None
        if name == "trackio":
            var = contextvars.ContextVar("current_run", default=self.run)
            self.context_vars = types.SimpleNamespace(current_run=var)

        class Histogram:
            def __init__(self, sequence=None, np_histogram=None, num_bins=64):
                self.counts, self.edges = np_histogram

        class Image:
            def __init__(self, data, caption=None):
                self.data, self.caption = data, caption

        self.Histogram, self.Image = Histogram, Image

    def log(self, data, step=None):
        self.logged.append(data)


class FakeTrainer:
    """What the callback reads from an `LZEGRPOTrainer`: the selection log and the prompt table."""

    def __init__(self) -> None:
        self.selection_log = SelectionLog()
        self.generation = 0

    def select(self, step: int, pass_rates: list[float]) -> None:
        n = len(pass_rates)
        p = np.asarray(pass_rates)
        energy = 4 * p * (1 - p)
        weight = (energy >= np.sort(energy)[-2]) & (energy > 0)
        live = (p > 0) & (p < 1)
        self.selection_log.append(step, self.generation, np.arange(n) + 10 * self.generation, p, energy, weight, live)
        self.generation += 1

    def prompt_table(self, include_prompts: bool = True) -> pd.DataFrame:
        log = self.selection_log.to_pandas()
        table = log.groupby("prompt_key").agg(
            num_observations=("step", "size"), num_selected=("selected", "sum"), last_pass_rate=("pass_rate", "last")
        )
        table = table.reset_index()
        table["difficulty"] = table["prompt_key"] % 3
        return table


def state(step: int, main: bool = True):
    return types.SimpleNamespace(global_step=step, is_world_process_zero=main)


def args(report_to):
    return types.SimpleNamespace(report_to=report_to, logging_steps=1)


def kinds(entry: dict, tracker: FakeTracker) -> dict[str, str]:
    out = {}
    for key, value in entry.items():
        if isinstance(value, tracker.Histogram):
            out[key] = "histogram"
        elif isinstance(value, tracker.Image):
            out[key] = "image"
    return out


@pytest.fixture
def fake_wandb(monkeypatch):
    tracker = FakeTracker("wandb")
    monkeypatch.setitem(sys.modules, "wandb", tracker)
    return tracker


def test_wants_lze_plots():
    assert wants_lze_plots(args(["wandb"])) and wants_lze_plots(args(["tensorboard", "trackio"]))
    assert wants_lze_plots(args("all"))
    assert not wants_lze_plots(args([])) and not wants_lze_plots(args("none")) and not wants_lze_plots(args(None))


def test_histograms_every_log_plots_every_plot_steps_and_at_the_end(fake_wandb):
    trainer = FakeTrainer()
    callback = LZEPlotCallback(trainer, plot_steps=2)
    a = args(["wandb"])

    trainer.select(0, [0.0, 0.25, 0.5, 1.0])
    callback.on_log(a, state(1), None, logs={"loss": 0.1})
    trainer.select(1, [0.5, 0.5, 0.75])
    callback.on_log(a, state(2), None, logs={"loss": 0.1})
    callback.on_log(a, state(2), None, logs={"train_runtime": 1.0})  # end of training, nothing new since step 2
    trainer.select(2, [0.0, 1.0])
    callback.on_log(a, state(3), None, logs={"loss": 0.1})

    logged = fake_wandb.logged
    assert [entry["train/global_step"] for entry in logged] == [1, 2, 3]
    first, second, third = (kinds(entry, fake_wandb) for entry in logged)
    hist_keys = {f"train/lze/hist/{name}" for name in ("pass_rate", "selected_pass_rate", "energy")}
    assert first == dict.fromkeys(hist_keys, "histogram")  # no plot before plot_steps
    assert second == {**dict.fromkeys(hist_keys, "histogram"), **{f"train/lze/plots/{n}": "image" for n in PLOTS}}
    assert third == {"train/lze/hist/pass_rate": "histogram", "train/lze/hist/energy": "histogram"}  # none selected
    # Each histogram counts the groups of the generation batches since the previous log, and only those.
    assert logged[0]["train/lze/hist/pass_rate"].counts.sum() == 4
    assert logged[1]["train/lze/hist/pass_rate"].counts.sum() == 3
    assert logged[1]["train/lze/hist/selected_pass_rate"].counts.sum() == 2  # the two top energies
    assert logged[2]["train/lze/hist/pass_rate"].counts.sum() == 2
    image = logged[1]["train/lze/plots/learning_zone"]
    assert image.caption == "learning_zone, step 2" and image.data.size[0] > 100
    assert callback.num_plot_logs == 1


def test_final_log_plots_when_the_interval_was_not_reached(fake_wandb):
    trainer = FakeTrainer()
    callback = LZEPlotCallback(trainer, plot_steps=None)
    trainer.select(0, [0.25, 0.5])
    callback.on_log(args(["wandb"]), state(1), None, logs={"loss": 0.0})
    callback.on_log(args(["wandb"]), state(1), None, logs={"train_runtime": 1.0})
    assert [set(kinds(e, fake_wandb).values()) for e in fake_wandb.logged] == [{"histogram"}, {"image"}]


def test_nothing_is_logged_without_an_active_tracker_or_off_the_main_process(monkeypatch, fake_wandb):
    trainer = FakeTrainer()
    trainer.select(0, [0.25, 0.5])
    LZEPlotCallback(trainer).on_log(args(["wandb"]), state(1, main=False), None, logs={"train_runtime": 1.0})
    LZEPlotCallback(trainer).on_log(args([]), state(1), None, logs={"train_runtime": 1.0})
    LZEPlotCallback(trainer, report_to="tensorboard").on_log(args(["wandb"]), state(1), None, logs={})
    assert fake_wandb.logged == []
    monkeypatch.setitem(sys.modules, "wandb", FakeTracker("wandb", active=False))  # imported, no wandb.init yet
    LZEPlotCallback(trainer).on_log(args(["wandb"]), state(1), None, logs={"train_runtime": 1.0})
    assert sys.modules["wandb"].logged == []


def test_trackio_branch_and_missing_trackio(monkeypatch, fake_wandb, tmp_path):
    trainer = FakeTrainer()
    trainer.select(0, [0.25, 0.5, 0.0])
    trackio = FakeTracker("trackio")
    monkeypatch.setitem(sys.modules, "trackio", trackio)
    callback = LZEPlotCallback(trainer, plot_steps=1)
    callback.on_log(args(["wandb", "trackio"]), state(1), None, logs={})
    assert len(trackio.logged) == len(fake_wandb.logged) == 1
    assert kinds(trackio.logged[0], trackio) == {
        **{f"train/lze/hist/{n}": "histogram" for n in ("pass_rate", "selected_pass_rate", "energy")},
        **{f"train/lze/plots/{n}": "image" for n in PLOTS},
    }

    monkeypatch.setitem(sys.modules, "trackio", None)  # not installed: `import trackio` fails
    callback = LZEPlotCallback(trainer, report_to=["trackio"], save_dir=str(tmp_path))
    with pytest.warns(UserWarning, match="trackio is not installed"):
        callback.on_log(args(["trackio"]), state(1), None, logs={"train_runtime": 1.0})
    assert sorted(os.listdir(tmp_path / "step-1")) == sorted(f"{n}.png" for n in PLOTS)  # PNGs still written


def test_add_plot_callback_once_and_only_with_a_tracker():
    class Handler:
        def __init__(self):
            self.callbacks = []

    trainer = types.SimpleNamespace(args=args(["wandb"]), callback_handler=Handler())
    trainer.add_callback = trainer.callback_handler.callbacks.append
    callback = add_plot_callback(trainer, plot_steps=5)
    assert isinstance(callback, LZEPlotCallback) and callback.tables is trainer and callback.plot_steps == 5
    assert add_plot_callback(trainer) is callback and len(trainer.callback_handler.callbacks) == 1
    assert add_plot_callback(trainer, by="source") is callback and callback.by == "source"  # settings applied
    with pytest.raises(TypeError, match="plot_every"):
        add_plot_callback(trainer, plot_every=3)
    quiet = types.SimpleNamespace(args=args([]), callback_handler=Handler())
    quiet.add_callback = quiet.callback_handler.callbacks.append
    assert add_plot_callback(quiet) is None and quiet.callback_handler.callbacks == []


# --------------------------------------------------------------------------------------------- real trackers
def read_wandb_records(path: Path):
    """
    Yields the protobuf records of a `.wandb` transaction log (what an offline run writes).

    wandb 0.31 has no Python reader any more (its service is written in Go), so this follows the format: a 7-byte
    header (`:W&B`, magic 0xBEE1, version), then LevelDB-log blocks of 32 KiB in which each chunk has a 7-byte header
    (CRC32C, length, type: 1 full, 2 first, 3 middle, 4 last) and holds (part of) a serialised `Record`.
    """
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a .wandb transaction log"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left  # block trailer
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if kind == 0:
            pos += left  # zero padding to the end of the block
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def wait_for_exit_record(path: Path, timeout: float = 60.0) -> Path:
    """Waits until wandb's service has written the run's last record (`wandb.finish()` may return before)."""
    from google.protobuf.message import DecodeError

    deadline = time.monotonic() + timeout
    while True:
        try:
            if any(r.WhichOneof("record_type") == "exit" for r in read_wandb_records(path)):
                return path
        except DecodeError:
            pass  # read while the service was writing a record: its last chunk is still incomplete
        assert time.monotonic() < deadline, f"{path} has no complete exit record after {timeout}s"
        time.sleep(0.5)


def wandb_history(path: Path) -> list[dict]:
    """The run's history rows, with nested values (histograms, images) rebuilt as dicts."""
    rows = []
    for record in read_wandb_records(path):
        if record.WhichOneof("record_type") != "history":
            continue
        row: dict = {}
        for item in record.history.item:
            keys = list(item.nested_key) or [item.key]
            target = row
            for key in keys[:-1]:
                target = target.setdefault(key, {})
            target[keys[-1]] = json.loads(item.value_json)
        rows.append(row)
    return rows


@pytest.mark.slow
def test_offline_wandb_run_records_lze_metrics_histograms_and_plots(tmp_path, monkeypatch, tiny):
    import wandb
    from testing_utils import make_trainer, prompt_dataset

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_PROJECT", "lze-trl-tests")
    model, tokenizer = tiny
    trainer = make_trainer(
        tmp_path,
        dataset=prompt_dataset(32, difficulty=True),
        model=model,
        tokenizer=tokenizer,
        report_to="wandb",
        run_name="lze-offline",
    )
    callback = add_plot_callback(trainer, plot_steps=2)
    assert callback is not None
    try:
        trainer.train()
    finally:
        wandb.finish()

    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    rows = wandb_history(wait_for_exit_record(run_file))

    # The trainer's lze/* metrics, at every step, with the values of the Trainer's own log history.
    expected = {e["step"]: e for e in trainer.state.log_history if "lze/selected_frac" in e}
    logged = {row["train/global_step"]: row for row in rows if "train/lze/selected_frac" in row}
    assert sorted(logged) == sorted(expected) == [1, 2, 3, 4]
    for step, entry in expected.items():
        for name in TRAINER_LZE_METRICS:
            assert logged[step][f"train/{name}"] == pytest.approx(entry[name]), (step, name)

    # Histograms at every log: together they count every group of the selection log exactly once.
    hists = [row for row in rows if "train/lze/hist/pass_rate" in row]
    assert [row["train/global_step"] for row in hists] == [1, 2, 3, 4]
    for row in hists:
        assert row["train/lze/hist/pass_rate"]["_type"] == "histogram"
        assert len(row["train/lze/hist/pass_rate"]["bins"]) == len(row["train/lze/hist/pass_rate"]["values"]) + 1
    log = trainer.selection_log.to_pandas()
    assert sum(sum(row["train/lze/hist/pass_rate"]["values"]) for row in hists) == len(log)
    assert sum(sum(row["train/lze/hist/energy"]["values"]) for row in hists) == len(log)
    selected_counts = [sum(row.get("train/lze/hist/selected_pass_rate", {}).get("values", [])) for row in hists]
    assert sum(selected_counts) == log["selected"].sum() > 0

    # Plots as images at steps 2 and 4, stored as PNG files in the run's media folder.
    plots = [row for row in rows if any(key.startswith("train/lze/plots/") for key in row)]
    assert [row["train/global_step"] for row in plots] == [2, 4]
    files = run_file.parent / "files"
    for row in plots:
        for name in PLOTS:
            image = row[f"train/lze/plots/{name}"]
            assert image["_type"] == "image-file" and image["format"] == "png"
            data = (files / image["path"]).read_bytes()
            assert data[:8] == PNG_MAGIC and len(data) > 8_000, (name, len(data))
    assert callback.num_plot_logs == 2


TRACKIO_SCRIPT = textwrap.dedent(
    """
    import json
    import pathlib
    import sys

    from testing_utils import make_trainer, prompt_dataset
    from trackio.sqlite_storage import SQLiteStorage

    from lze_trl.plotting.callback import add_plot_callback

    out = pathlib.Path(sys.argv[1])
    trainer = make_trainer(
        out,
        dataset=prompt_dataset(32, difficulty=True),
        report_to="trackio",
        run_name="lze-trackio",
        project="lze-trl-tests",
    )
    add_plot_callback(trainer, plot_steps=2)
    trainer.train()
    (out / "logs.json").write_text(json.dumps(SQLiteStorage.get_logs("lze-trl-tests", "lze-trackio"), default=str))
    """
)


@pytest.mark.slow
def test_local_trackio_run_records_histograms_and_plots(tmp_path):
    pytest.importorskip("trackio")
    script = tmp_path / "run_trackio.py"
    script.write_text(TRACKIO_SCRIPT)
    env = {
        **os.environ,
        "TRACKIO_DIR": str(tmp_path / "trackio"),  # read when trackio is imported: hence a separate process
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    logs = json.loads((tmp_path / "logs.json").read_text())
    metrics = [e for e in logs if "train/lze/selected_frac" in e]
    assert [e["train/global_step"] for e in metrics] == [1, 2, 3, 4]
    hists = [e for e in logs if "train/lze/hist/pass_rate" in e]
    assert [e["train/global_step"] for e in hists] == [1, 2, 3, 4]
    assert sum(sum(e["train/lze/hist/pass_rate"]["values"]) for e in hists) == 8  # 4 steps x 2 groups
    assert all(e["train/lze/hist/pass_rate"]["_type"] == "trackio.histogram" for e in hists)
    plots = [e for e in logs if "train/lze/plots/learning_zone" in e]
    assert [e["train/global_step"] for e in plots] == [2, 4]
    for entry in plots:
        for name in PLOTS:
            image = entry[f"train/lze/plots/{name}"]
            assert image["_type"] == "trackio.image"
            data = (tmp_path / "trackio" / "media" / image["file_path"]).read_bytes()
            assert data[:8] == PNG_MAGIC and len(data) > 8_000


def test_the_callback_plots_a_saved_run_without_any_trainer(tmp_path):
    # A finished run's (or a checkpoint's) files are enough: the callback reads RunTables, never the trainer.
    from lze_trl.method.checkpoint import PROMPTS_PARQUET, SELECTION_LOG_PARQUET, save_table
    from lze_trl.method.errors import LZEStateError
    from lze_trl.plotting.callback import RunTables, SavedRunTables

    live = FakeTrainer()
    live.select(0, [0.0, 0.25, 0.5, 1.0])
    live.select(1, [0.5, 0.75])
    run = tmp_path / "run"
    run.mkdir()
    save_table(live.prompt_table(), str(run / PROMPTS_PARQUET))
    save_table(live.selection_log.to_pandas(), str(run / SELECTION_LOG_PARQUET))
    saved = SavedRunTables(str(run))
    assert isinstance(saved, RunTables) and isinstance(live, RunTables)
    pd.testing.assert_frame_equal(saved.selection_log.to_pandas(), live.selection_log.to_pandas())
    pd.testing.assert_frame_equal(saved.prompt_table(), live.prompt_table())
    assert "difficulty" not in saved.prompt_table(include_prompts=False)  # state columns only
    for tables, folder in ((live, tmp_path / "from_live"), (saved, tmp_path / "from_saved")):
        callback = LZEPlotCallback(tables, report_to=[], save_dir=str(folder), plot_steps=1)
        callback.on_log(args([]), state(1), None, logs={"train_runtime": 1.0})
    live_pngs = sorted(os.listdir(tmp_path / "from_live" / "step-1"))
    assert live_pngs == sorted(f"{n}.png" for n in PLOTS)
    assert sorted(os.listdir(tmp_path / "from_saved" / "step-1")) == live_pngs
    with pytest.raises(LZEStateError, match="no lze_prompts.parquet or lze_selection_log.parquet"):
        SavedRunTables(str(tmp_path / "empty"))
