"""The benchmark harness (`python benchmarks/bench.py`, `benchmarks/harness/`): override and selector parsing,
aggregation over seeds, the selection micro-benchmark, the command line, the sweep report."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

import numpy as np
import pytest

from benchmarks.harness.selection import bench_selection
from benchmarks.harness.specs import parse_method, parse_overrides
from benchmarks.harness.stats import aggregate
from lze_examples.demo import DemoConfig, MethodSpec, lze_config
from lze_examples.demo.warmstart import WARMSTART_FORMAT
from lze_examples.tasks import CHARSET
from lze_trl.method.selectors import SELECTORS


def test_overrides_are_typed_like_the_config_fields():
    parsed = parse_overrides(
        [
            "selection_ratio=0.2",
            "prune_solved=true",
            "learning_rate=1",
            'energy_terms=["anchor", "uncertainty"]',
            "selector=uniform",
            "prune_solved_after=3",
            "energy_momentum_mode=improve",
        ]
    )
    assert parsed == {
        "selection_ratio": 0.2,
        "prune_solved": True,
        "learning_rate": 1.0,
        "energy_terms": ["anchor", "uncertainty"],
        "selector": "uniform",
        "prune_solved_after": 3,
        "energy_momentum_mode": "improve",
    }
    assert isinstance(parsed["learning_rate"], float)
    with pytest.raises(ValueError, match="not an LZEGRPOConfig field"):
        parse_overrides(["selection_rate=0.2"])
    with pytest.raises(ValueError, match="key=value"):
        parse_overrides(["selection_ratio"])
    with pytest.raises(ValueError, match="true or false"):
        parse_overrides(["prune_solved=maybe"])
    # Parsed like `lze-trl grpo --key value` (transformers' HfArgumentParser over the config): typed by the field,
    # choices checked, the key named in the error.
    assert parse_overrides(["energy_terms=uncertainty,momentum", "hub_model_id=null", "prune_solved=no"]) == {
        "energy_terms": ["uncertainty", "momentum"],
        "hub_model_id": None,
        "prune_solved": False,
    }
    assert parse_overrides(['model_init_kwargs={"dtype": "float32"}']) == {"model_init_kwargs": {"dtype": "float32"}}
    with pytest.raises(ValueError, match="learning_rate='x': invalid float value"):
        parse_overrides(["learning_rate=x"])
    with pytest.raises(ValueError, match="energy_momentum_mode='bogus': invalid choice"):
        parse_overrides(["energy_momentum_mode=bogus"])


def test_any_registered_selector_is_a_method():
    for name in SELECTORS:
        assert parse_method(name).overrides["selector"] == name
    assert parse_method("grpo").overrides == {"selector": "none"}
    assert parse_method("lze+prune").overrides == {"selector": "lze", "prune_solved": True}
    spec = parse_method("lze:selection_ratio=0.3,energy_momentum_mode=improve")
    assert spec.name == "lze:selection_ratio=0.3,energy_momentum_mode=improve"
    assert spec.overrides == {"selector": "lze", "selection_ratio": 0.3, "energy_momentum_mode": "improve"}
    with pytest.raises(ValueError, match="Unknown selector"):
        parse_method("magic")


def test_a_low_selection_ratio_alone_is_valid(tmp_path):
    config = DemoConfig.tiny(overrides={"selection_ratio": 0.2})
    args = lze_config(config, MethodSpec("lze", {"selector": "lze"}), str(tmp_path))
    assert args.selection_ratio == 0.2
    # The demo's shared settings reach the trainer's config.
    assert args.per_device_train_batch_size == config.prompts_per_step * config.num_generations
    assert args.max_steps == config.steps and args.gradient_checkpointing is False and args.use_cpu


def _seed_result(value: float, ratio: float | None) -> dict:
    summary = {"final_train_accuracy": value, "train_seconds": 10 * value, "reach_train_seconds": None}
    return {
        "methods": {
            "none": {"summary": summary, "ratios": {"train_seconds": 1.0}},
            "lze": {"summary": summary, "ratios": {"train_seconds": ratio}},
        },
    }


def test_aggregate_gives_mean_and_spread_over_seeds():
    agg = aggregate([_seed_result(0.5, 0.5), _seed_result(0.7, 0.7), _seed_result(0.6, None)])
    stat = agg["lze"]["summary"]["final_train_accuracy"]
    assert stat["mean"] == pytest.approx(0.6) and stat["std"] == pytest.approx(0.1)
    assert (stat["min"], stat["max"], stat["n"]) == (0.5, 0.7, 3)
    ratio = agg["lze"]["ratios"]["train_seconds"]
    assert ratio["mean"] == pytest.approx(0.6) and ratio["n"] == 2 and ratio["values"] == [0.5, 0.7, None]
    assert agg["lze"]["summary"]["reach_train_seconds"]["mean"] is None


def test_selection_micro_benchmark_reports_time_and_memory():
    rows = bench_selection([1_000, 3_000], groups=64, repeats=3)
    assert [r["pool_size"] for r in rows] == [1_000, 3_000]
    for row in rows:
        assert row["groups"] == 64 and row["repeats"] == 3
        for timing in (row["score_select_ms"], row["with_record_selection_ms"]):
            assert 0 < timing["median"] <= timing["p90"] + 1e-9
        # Each repeat's timing with `record_selection` spans its score + select timing (same start, later end), so
        # every statistic of the first is at least the same statistic of the second, whatever the machine's load.
        for stat in ("median", "p90", "mean"):
            assert row["with_record_selection_ms"][stat] >= row["score_select_ms"][stat] - 1e-9
        # ~40 bytes of state per prompt, up to twice that while the arrays have room to grow.
        assert 30 <= row["bytes_per_prompt"] <= 100
        assert row["capacity"] >= row["pool_size"]


@pytest.mark.slow
def test_bench_command_end_to_end(tmp_path):
    from benchmarks.harness.cli import main

    out = tmp_path / "bench"
    argv = ["all", "--tiny", "--seeds", "0", "1", "--selectors", "none", "lze", "uniform:selection_ratio=0.5"]
    argv += ["--set", "learning_rate=1e-3", "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0
    train = json.loads((out / "bench_train.json").read_text())
    assert train["seeds"] == [0, 1] and train["baseline"] == "none"
    assert list(train["aggregate"]) == ["none", "lze", "uniform:selection_ratio=0.5"]
    assert train["config"]["overrides"] == {"learning_rate": 1e-3}
    stat = train["aggregate"]["lze"]["ratios"]["update_tokens_per_step"]
    assert stat["n"] == 2 and stat["std"] is not None
    assert len(train["runs"]) == 2 and (out / "seed_1" / "demo_results.json").is_file()
    markdown = (out / "bench_train.md").read_text()
    assert "`uniform:selection_ratio=0.5`" in markdown and "±" in markdown
    selection = json.loads((out / "bench_selection.json").read_text())
    assert [row["pool_size"] for row in selection["pools"]] == [1_000, 5_000]
    assert selection["step"]["seconds_per_step"] > 0
    assert "bytes / prompt" in (out / "bench_selection.md").read_text()


def test_bench_command_rejects_unknown_selectors(tmp_path, capsys):
    from benchmarks.harness.cli import main

    assert main(["train", "--tiny", "--selectors", "magic", "--output-dir", str(tmp_path)]) == 2
    assert "Unknown selector" in capsys.readouterr().err
    assert main(["train", "--tiny", "--set", "nope=1", "--output-dir", str(tmp_path)]) == 2


def test_bench_command_sets_demo_and_warm_start_fields():
    from benchmarks.harness.cli import build_config, parse_args

    args = parse_args(["train", "--demo", "n_train=4096", "--demo", "learning_rate=1e-4", "--warm", "hidden_size=64"])
    config = build_config(args)
    assert (config.n_train, config.learning_rate, config.warm_start.hidden_size) == (4096, 1e-4, 64)
    assert config.steps == 240  # the benchmark's longer default
    with pytest.raises(ValueError, match="--demo override"):
        build_config(parse_args(["train", "--demo", "methods=[]"]))
    with pytest.raises(ValueError, match="--warm override"):
        build_config(parse_args(["train", "--warm", "width=3"]))
    # values typed by the field, like --set
    args = parse_args(["train", "--demo", "progress=false", "--demo", "cache_dir=null", "--warm", "levels=0+1"])
    config = build_config(args)
    assert config.progress is False and config.cache_dir is None and config.warm_start.levels == [0, 1]
    with pytest.raises(ValueError, match="--demo override 'n_train=many': n_train='many': invalid int value"):
        build_config(parse_args(["train", "--demo", "n_train=many"]))


def test_the_task_flag_picks_the_task_and_its_warm_start():
    from benchmarks.harness.cli import build_config, parse_args
    from lze_examples.commands.demo import build_config as demo_config
    from lze_examples.commands.demo import parse_args as demo_args
    from lze_examples.demo import default_warm_start
    from lze_examples.demo.training import prepare

    assert build_config(parse_args(["train"])).task == "carries"
    old = build_config(parse_args(["train", "--demo", "task=arithmetic", "--warm", "steps=500"]))
    assert old.task == "arithmetic" and old.warm_start.task == "arithmetic"
    assert old.warm_start.carry_drop_prob == 0.6 and old.warm_start.steps == 500  # --warm applies after the switch
    # the first task's cache key has no `task` field: caches made before the field existed stay valid
    legacy = {k: v for k, v in dataclasses.asdict(default_warm_start("arithmetic")).items() if k != "task"}
    payload = {"config": legacy, "charset": CHARSET, "format": WARMSTART_FORMAT}
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    assert default_warm_start("arithmetic").cache_key() == digest != default_warm_start("carries").cache_key()
    with pytest.raises(ValueError, match="task='sums' is not an embedded task"):
        build_config(parse_args(["train", "--demo", "task=sums"]))
    demo = demo_config(demo_args(["--task", "arithmetic"]))
    assert demo.task == "arithmetic" and demo.warm_start == default_warm_start("arithmetic")
    mismatched = DemoConfig.tiny()
    mismatched.task = "arithmetic"
    with pytest.raises(ValueError, match="warm start was trained on task='carries'"):
        prepare(mismatched)


@pytest.mark.slow
def test_bench_report_merges_folders_into_the_sweep_table_and_figure(tmp_path, capsys):
    from benchmarks.harness.cli import main
    from benchmarks.harness.sweep_plot import classify

    common = ["--tiny", "--seeds", "0", "1", "--cache-dir", str(tmp_path / "cache")]
    first, second = tmp_path / "selectors", tmp_path / "ablations"
    assert main(["train", *common, "--selectors", "none", "lze", "uniform", "--output-dir", str(first)]) == 0
    ablations = ["none", "lze:selection_ratio=0.5", "lze:energy_terms=uncertainty+momentum"]
    assert main(["train", *common, "--selectors", *ablations, "--output-dir", str(second)]) == 0
    out = tmp_path / "report"
    assert main(["report", str(first), str(second), "--output-dir", str(out), "--window", "2"]) == 0
    report = json.loads((out / "sweep.json").read_text())
    rows = {row["name"]: row for row in report["rows"]}
    assert list(rows) == ["none", "lze", "uniform", "lze:selection_ratio=0.5", "lze:energy_terms=uncertainty+momentum"]
    assert report["baseline"] == "none"
    for key in ("update_tokens_ratio", "total_flops_ratio", "cpu_seconds_ratio"):
        assert rows["none"][key] == {"mean": 1.0, "std": 0.0, "n": 2}
    # The late accuracy is the mean of each seed's last two evaluations, then averaged over seeds.
    late = []
    for seed in (0, 1):
        curve = json.loads((first / f"seed_{seed}" / "demo_results.json").read_text())["methods"]["lze"]["curve"]
        late.append(np.mean([row["test_accuracy"] for row in curve[-2:]]))
    assert rows["lze"]["late_test_accuracy"]["mean"] == pytest.approx(np.mean(late))
    assert classify(rows["lze"]) == ("ratio", 0.4)
    assert classify(rows["lze:selection_ratio=0.5"]) == ("ratio", 0.5)
    assert classify(rows["lze:energy_terms=uncertainty+momentum"]) == ("ablation", (0.4, ("anchor",)))
    assert classify(rows["uniform"]) == ("selector", "uniform")
    assert (out / "sweep.png").stat().st_size > 10_000
    assert "`lze:selection_ratio=0.5`" in (out / "sweep.md").read_text()
    # the columns that tell selectors apart: OOD gain, groups kept, dead groups, rollouts to the baseline's final
    for seed_stat in ("ood_gain", "kept_share", "dead_share", "rollouts_to_base_test", "rollouts_to_base_ood"):
        assert seed_stat in rows["lze"]
    assert rows["none"]["kept_share"]["mean"] == 1.0  # the baseline keeps every group
    assert rows["none"]["rollouts_to_base_test"]["n"] == 2  # it reaches its own final accuracy
    assert rows["lze"]["kept_share"]["mean"] <= 0.5
    assert "OOD gain" in (out / "sweep.md").read_text()
    # the per-level table: the start, then every run's final accuracy per in-domain and OOD level, over seeds
    levels = {row["name"]: row["levels"] for row in report["levels"]}
    assert list(levels)[:2] == ["start", "none"] and set(levels["lze"]) == set(levels["start"])
    assert {column.split(":")[0] for column in levels["start"]} == {"test", "ood"}
    finals = [
        json.loads((first / f"seed_{seed}" / "demo_results.json").read_text())["methods"]["lze"] for seed in (0, 1)
    ]
    assert levels["lze"]["test:0"]["mean"] == pytest.approx(
        np.mean([f["final_accuracy_by_level"]["test"]["0"] for f in finals])
    )
    assert "Final greedy accuracy per level" in (out / "sweep.md").read_text()
    assert re.search(r"\| L\d \(OOD\) +\|", (out / "sweep.md").read_text())  # a column per OOD level
    capsys.readouterr()
    assert main(["report", str(tmp_path / "nowhere"), "--output-dir", str(out)]) == 2
    assert "bench_train.json not found" in capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["--output_dir", "--output-dir"])
def test_every_command_takes_both_spellings_of_its_flags(spelling, tmp_path):
    from benchmarks.harness import cli as bench
    from lze_examples.commands import demo, eval
    from lze_trl.commands import grpo

    out = str(tmp_path / "out")
    assert demo.parse_args([spelling, out]).output_dir == out
    assert demo.parse_args(["--eval_steps", "5", "--no-progress"]).eval_steps == 5
    for what in ("train", "selection", "all"):
        assert bench.parse_args([what, spelling, out]).output_dir == out
    assert bench.parse_args(["report", "folder", spelling, out]).output_dir == out
    argv = ["all", "--cache_dir", "c", "--pool-sizes", "10", "--step_steps", "3", "--eval-steps", "2"]
    args = bench.parse_args(argv)
    assert (args.cache_dir, args.pool_sizes, args.step_steps, args.eval_steps) == ("c", [10], 3, 2)
    # TRL's parsers (lze-trl eval and grpo) take both spellings of every field.
    (eval_args,) = eval.make_parser().parse_args_and_config(["--model", "m", spelling, out])
    assert eval_args.output_dir == out
    argv = ["--dataset_name", "gsm8k", "--use_cpu", "--bf16", "false", spelling, out]
    script, training, *_ = grpo.make_parser().parse_args_and_config(argv)
    assert training.output_dir == out


def test_sweep_report_counts_the_seeds_of_every_folder(tmp_path):
    # one folder per seed (as the sweep in BENCHMARKS.md runs them): the report must say all seeds, not the first's
    import json

    from benchmarks.harness.sweep import load_runs

    folders = []
    for seed in (2, 0, 1):
        folder = tmp_path / f"seed{seed}"
        (folder / f"seed_{seed}").mkdir(parents=True)
        (folder / "bench_train.json").write_text(json.dumps({"baseline": "grpo", "seeds": [seed], "config": {}}))
        (folder / f"seed_{seed}" / "demo_results.json").write_text(json.dumps({"methods": {"grpo": {"s": seed}}}))
        folders.append(folder)
    loaded = load_runs(folders)
    assert loaded["seeds"] == [0, 1, 2]
    assert loaded["runs"] == {"grpo": {2: {"s": 2}, 0: {"s": 0}, 1: {"s": 1}}}


def test_the_bench_command_left_the_package(capsys):
    # the wheel is the library: `lze-trl bench` is `python benchmarks/bench.py`, and the package never imports it
    import ast
    from pathlib import Path

    from lze_trl.cli import COMMANDS, added_commands
    from lze_trl.cli import main as lze_trl_main

    assert set(COMMANDS) == {"grpo", "env", "advise"} and set(added_commands()) == {"demo", "eval"}
    assert lze_trl_main(["bench", "train"]) == 2
    assert "unknown command 'bench'" in capsys.readouterr().err
    package = Path(__file__).resolve().parents[2] / "lze_trl"
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(name.split(".")[0] == "benchmarks" for name in names), path


def test_the_bench_script_runs_from_any_folder(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench.py"
    result = subprocess.run(
        [sys.executable, str(script), "train", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--selectors" in result.stdout and "prefilter" in result.stdout
