"""Side-by-side training runs on the embedded arithmetic task: plain GRPO, LZE and LZE with forward pruning.

Every method starts from the same cached warm start, with the same seed, data, generation batch and number of
optimizer steps (so the same rollout budget, except where forward pruning skips rollouts), and is evaluated by greedy
decoding at the same steps.
"""

from __future__ import annotations

import copy
import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from ..config import LZEGRPOConfig
from ..tasks import get_task
from ..tasks.arithmetic import arithmetic_reward
from .accounting import GENERATION_FLOPS_PER_TOKEN, UPDATE_FLOPS_PER_TOKEN, MeteredLZEGRPOTrainer, count_parameters
from .evaluation import AccuracyCallback, greedy_accuracy, pass_rate_histogram, sampled_pass_rates
from .warmstart import CARRIES_WARM_START, WarmStartConfig, load_warm_start


EVAL_SPLITS = ("test", "ood", "train")
"""Evaluated splits: the in-domain held-out test, the out-of-distribution split and a fixed sample of the RL training
prompts themselves."""
SPLIT_LABELS = {"test": "in-domain test", "ood": "OOD", "train": "train prompts"}


@dataclass
class MethodSpec:
    r"""
    One training run of the comparison.

    Parameters:
        name (`str`):
            Label in tables and figures, e.g. `"grpo"`.
        overrides (`dict[str, Any]`):
            [`LZEGRPOConfig`] fields set for this run only, e.g. `{"selector": "none"}`.
        trainer_cls (`type`, *optional*):
            A subclass of [`MeteredLZEGRPOTrainer`] to train this run with (experiments); defaults to that class.
    """

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    trainer_cls: type | None = None


def default_methods() -> list[MethodSpec]:
    """Plain GRPO (`selector="none"`), LZE, and LZE with forward pruning."""
    return [
        MethodSpec("grpo", {"selector": "none"}),
        MethodSpec("lze", {"selector": "lze"}),
        MethodSpec("lze+prune", {"selector": "lze", "prune_solved": True}),
    ]


def default_warm_start(task: str = "carries") -> WarmStartConfig:
    """
    The demo's warm start for an embedded task.

    - `"carries"`: the shipped warm start (see [`~lze_trl.demo.warmstart.SHIPPED`]), each carry forgotten with
      probability `CARRIES_SLIP_PROB` in its supervision.
    - `"arithmetic"`: the first demo's, `WarmStartConfig(hidden_size=128, num_layers=2, carry_drop_prob=0.6)`.
    """
    get_task(task)
    if task == "arithmetic":
        return WarmStartConfig(hidden_size=128, num_layers=2, carry_drop_prob=0.6)
    return WarmStartConfig(**CARRIES_WARM_START)


@dataclass
class DemoConfig:
    r"""
    Everything a demo or benchmark comparison depends on.

    Parameters:
        task (`str`, *optional*, defaults to `"carries"`):
            Embedded task (see [`~lze_trl.tasks.get_task`]): `"carries"` (column addition graded by the number of
            carries, the default) or `"arithmetic"` (the first demo task, kept to reproduce older measurements).
            Set the matching warm start with [`default_warm_start`] (the command line does).
        warm_start ([`WarmStartConfig`], *optional*):
            The supervised warm start every method starts from; defaults to [`default_warm_start`]`("carries")`,
            whose supervision forgets each carry with probability `carry_drop_prob`, so the starting policy has
            learned the right procedure and a common slip side by side and solves a prompt less often the more carries
            it has: RL has something general to learn, which carries over to held-out and OOD prompts.
        n_train (`int`, *optional*, defaults to `2048`):
            Training prompts (the task's training levels).
        n_test (`int`, *optional*, defaults to `600`):
            In-domain held-out prompts (the training levels, disjoint from training prompts).
        n_ood (`int`, *optional*, defaults to `200`):
            Out-of-distribution prompts (the task's OOD levels).
        n_train_eval (`int`, *optional*, defaults to `256`):
            Training prompts evaluated by greedy decoding (the first ones of the training set).
        data_seed (`int`, *optional*, defaults to `0`):
            Seed of the three splits.
        seed (`int`, *optional*, defaults to `0`):
            Training seed (sampling, data order, selection noise).
        steps (`int`, *optional*, defaults to `120`):
            Optimizer steps per method; one generation batch per step.
        prompts_per_step (`int`, *optional*, defaults to `64`):
            Prompt groups per generation batch (the pool LZE selects from).
        num_generations (`int`, *optional*, defaults to `8`):
            Rollouts per prompt.
        learning_rate (`float`, *optional*, defaults to `1e-4`):
            AdamW learning rate (constant after `warmup_steps`).
        warmup_steps (`int`, *optional*, defaults to `5`):
            Linear warm-up steps of the RL learning rate.
        max_completion_length (`int`, *optional*, defaults to `8`):
            Longest completion (answers have at most 8 characters with the end-of-sequence token).
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of the rollouts.
        eval_steps (`int`, *optional*, defaults to `10`):
            Evaluate every this many optimizer steps (and before the first, after the last).
        target_window (`int`, *optional*, defaults to `3`):
            Smoothing of the time-to-target figures: the target is the baseline's mean accuracy over its last
            `target_window` evaluations, and a run reaches it at the first evaluation where its own mean over the
            last `target_window` evaluations (fewer at the start) is at or above it. One evaluation alone moves by
            a few prompts from one evaluation to the next.
        torch_threads (`int`, *optional*, defaults to `1`):
            Intra-op threads. The tiny model's products are too small to gain from more, and one thread per process
            is far less sensitive to other processes on a shared machine.
        methods (`list[MethodSpec]`, *optional*):
            Runs to compare; defaults to [`default_methods`].
        baseline (`str`, *optional*, defaults to `"grpo"`):
            Name of the run that sets the target accuracy and the denominators of the ratios.
        overrides (`dict[str, Any]`, *optional*):
            [`LZEGRPOConfig`] fields set for every run (before each method's own overrides).
        cache_dir (`str`, *optional*):
            Root of the warm-start cache (see [`load_warm_start`]).
        progress (`bool`, *optional*, defaults to `True`):
            Show tqdm progress bars.
    """

    task: str = "carries"
    warm_start: WarmStartConfig = field(default_factory=lambda: default_warm_start("carries"))
    n_train: int = 2048
    n_test: int = 600
    n_ood: int = 200
    n_train_eval: int = 256
    data_seed: int = 0
    seed: int = 0
    steps: int = 120
    prompts_per_step: int = 64
    num_generations: int = 8
    learning_rate: float = 1e-4
    warmup_steps: int = 5
    max_completion_length: int = 8
    temperature: float = 1.0
    eval_steps: int = 10
    target_window: int = 3
    torch_threads: int = 1
    methods: list[MethodSpec] = field(default_factory=default_methods)
    baseline: str = "grpo"
    overrides: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    progress: bool = True

    @classmethod
    def tiny(cls, **kwargs: Any) -> DemoConfig:
        """A seconds-long configuration for tests and smoke runs (a few steps of a very small model)."""
        task = kwargs.get("task", "carries")
        values: dict[str, Any] = dict(
            warm_start=WarmStartConfig(
                hidden_size=16,
                num_layers=1,
                num_heads=2,
                num_examples=256,
                steps=20,
                carry_drop_prob=0.6,
                levels=list(get_task(task).WARM_START_LEVELS),
                task=task,
            ),
            n_train=32,
            n_test=16,
            n_ood=8,
            n_train_eval=16,
            steps=2,
            prompts_per_step=4,
            num_generations=4,
            eval_steps=1,
            progress=False,
        )
        values.update(kwargs)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def machine_info() -> dict[str, Any]:
    """The machine and software a measurement ran on, and the load at the time."""
    import transformers
    import trl

    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }
    try:
        info["load_average"] = list(os.getloadavg())
    except OSError:  # not available on every platform
        info["load_average"] = None
    return info


def lze_config(config: DemoConfig, method: MethodSpec, output_dir: str) -> LZEGRPOConfig:
    """
    The [`LZEGRPOConfig`] of one method: the demo's shared settings, `config.overrides`, then the method's.
    """
    values: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations,
        gradient_accumulation_steps=1,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        max_steps=config.steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=config.warmup_steps,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=config.seed,
        data_seed=config.seed,
        disable_tqdm=True,
    )
    values.update(config.overrides)
    values.update(method.overrides)
    return LZEGRPOConfig(**values)


class ProgressBarCallback(TrainerCallback):
    """
    One tqdm bar per run, showing the latest accuracies and the fraction of groups kept for the update.

    Args:
        name (`str`):
            The run's label.
        total (`int`):
            Optimizer steps of the run.
        accuracy ([`AccuracyCallback`]):
            Where the latest accuracies are read.
        disable (`bool`, *optional*, defaults to `False`):
            Show nothing.
    """

    def __init__(self, name: str, total: int, accuracy: AccuracyCallback, disable: bool = False) -> None:
        self.name, self.total, self.accuracy, self.disable = name, total, accuracy, disable
        self.bar = None

    def on_train_begin(self, args, state, control, **kwargs):
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=self.total, desc=f"{self.name:>10}", disable=self.disable, unit="step", leave=True, mininterval=1.0
        )

    def on_step_end(self, args, state, control, **kwargs):
        self.bar.update(state.global_step - self.bar.n)
        postfix = {}
        if self.accuracy.records:
            last = self.accuracy.records[-1]
            postfix = {k[: -len("_accuracy")]: f"{v:.3f}" for k, v in last.items() if k.endswith("_accuracy")}
        logs = [e for e in state.log_history[-3:] if "lze/selected_frac" in e]
        if logs:
            postfix["kept"] = f"{logs[-1]['lze/selected_frac']:.2f}"
        self.bar.set_postfix(postfix, refresh=False)

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()


def _evaluator(tokenizer: Any, splits: dict[str, Any], max_new_tokens: int):
    def evaluate(model: Any) -> dict[str, float]:
        return {
            name: greedy_accuracy(model, tokenizer, data, max_new_tokens=max_new_tokens)["accuracy"]
            for name, data in splits.items()
        }

    return evaluate


def _step_metrics(log_history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = (
        "lze/pass_rate_mean",
        "lze/dead_frac",
        "lze/selected_frac",
        "lze/update_tokens",
        "lze/update_tokens_saved_frac",
        "lze/pruned_prompts",
        "lze/rollouts_skipped",
        "lze/rollout_filter/predicted_dead_frac",
        "lze/rollout_filter/observed_dead_frac",
        "lze/rollout_filter/brier",
        "lze/rollout_filter/epoch_skipped",
        "lze/rollout_filter/audited_total",
        "lze/rollout_filter/audited_alive_total",
        "completions/mean_length",
        "num_tokens",
        "step_time",
    )
    return [{"step": e["step"], **{k: e[k] for k in keys if k in e}} for e in log_history if "lze/selected_frac" in e]


def run_method(
    config: DemoConfig,
    method: MethodSpec,
    model: Any,
    tokenizer: Any,
    splits: dict[str, Any],
    output_dir: str,
) -> dict[str, Any]:
    """
    Trains one method from a copy of `model` and returns its measurements.

    Args:
        config ([`DemoConfig`]):
            The comparison's settings.
        method ([`MethodSpec`]):
            The run.
        model (`PreTrainedModel`):
            The warm-started model (not modified: the run trains a deep copy).
        tokenizer (`PreTrainedTokenizerFast`):
            Its tokenizer.
        splits (`dict[str, Dataset]`):
            `"train"` (RL prompts) and the evaluated splits (`"test"`, `"ood"`, `"train_eval"`).
        output_dir (`str`):
            The run's folder (the trainer writes its prompt table and selection log there).

    Returns:
        `dict[str, Any]`: `curve` (one record per evaluation), `totals` (tokens, FLOPs, times), `steps` (per-step
        `lze/*` metrics), `final_accuracy_by_level` (per split), `prompt_table`, `selection_log` (pandas frames, not
        JSON-serialisable) and `num_params`.
    """
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    torch.set_num_threads(config.torch_threads)
    policy = copy.deepcopy(model)
    policy.train()
    num_params = count_parameters(policy)
    args = lze_config(config, method, output_dir)
    trainer_cls = method.trainer_cls or MeteredLZEGRPOTrainer
    trainer = trainer_cls(
        model=policy,
        reward_funcs=arithmetic_reward,
        args=args,
        train_dataset=splits["train"],
        processing_class=tokenizer,
    )
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    eval_splits = {"test": splits["test"], "ood": splits["ood"], "train": splits["train_eval"]}
    accuracy = AccuracyCallback(
        _evaluator(tokenizer, eval_splits, config.max_completion_length),
        config.eval_steps,
        counters=lambda: trainer.meter.snapshot(num_params),
    )
    trainer.add_callback(accuracy)
    trainer.add_callback(ProgressBarCallback(method.name, config.steps, accuracy, disable=not config.progress))
    start = time.perf_counter()
    trainer.train()
    elapsed = time.perf_counter() - start
    totals = {
        **trainer.meter.snapshot(num_params),
        "train_seconds": accuracy.records[-1]["train_seconds"],
        "train_cpu_seconds": accuracy.records[-1]["train_cpu_seconds"],
        "eval_seconds": accuracy.eval_seconds,
        "run_seconds": elapsed,
        "optimizer_steps": trainer.state.global_step,
    }
    return {
        "name": method.name,
        "overrides": dict(method.overrides),
        "num_params": num_params,
        "eval_sizes": {name: len(data) for name, data in eval_splits.items()},
        "curve": accuracy.records,
        "totals": totals,
        "steps": _step_metrics(trainer.state.log_history),
        "final_accuracy_by_level": {
            name: greedy_accuracy(policy, tokenizer, data, max_new_tokens=config.max_completion_length)["per_level"]
            for name, data in eval_splits.items()
        },
        "prompt_table": trainer.prompt_table(),
        "selection_log": trainer.selection_log.to_pandas(),
    }


def _first_reaching(curve: list[dict[str, Any]], key: str, target: float, window: int = 1) -> dict[str, Any] | None:
    """The first record whose trailing mean over up to `window` evaluations (itself included) reaches `target`."""
    for i, row in enumerate(curve):
        tail = curve[max(0, i - window + 1) : i + 1]
        if sum(r[key] for r in tail) / len(tail) >= target - 1e-9:
            return row
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def dead_shares(log: Any) -> dict[str, float | None]:
    """
    Share of the generated groups (every generation round, refills included) that were dead (pass rate 0 or 1), over
    the run and over its last quarter of optimizer steps, from a selection log (`None` values without one).
    """
    if log is None or len(log) == 0:
        return {"dead_share": None, "dead_share_last_quarter": None, "generated_groups": None}
    rates = log["pass_rate"].to_numpy(dtype=float)
    steps = log["step"].to_numpy()
    scored = ~np.isnan(rates)
    dead = scored & ((rates <= 0.0) | (rates >= 1.0))
    last = steps >= steps.min() + 0.75 * (steps.max() - steps.min() + 1)
    return {
        "dead_share": float(dead.sum() / max(scored.sum(), 1)),
        "dead_share_last_quarter": float(dead[last].sum() / max((scored & last).sum(), 1)),
        "generated_groups": int(len(rates)),
    }


def headline_summary(results: dict[str, Any]) -> dict[str, Any]:
    """
    The machine-readable `summary` of a comparison (written into `demo_results.json`): the starting state and, per
    method, its final accuracies and its costs relative to the baseline.

    Returns:
        `dict[str, Any]`: `start` (`learning_zone_share`: share of the training groups with a sampled pass rate in
        (0, 1) at the start; `test_accuracy`, `ood_accuracy`: greedy; `test_size`, `ood_size`: prompts evaluated) and
        `methods.<name>` (`test_accuracy`, `ood_accuracy`: final greedy; `update_tokens_ratio`, `rollouts_ratio`,
        `total_flops_ratio`: to the baseline's totals; `dead_share`: share of the generated groups that were
        all-correct or all-wrong; `rollouts_to_grpo_final`, `flops_to_grpo_final`: rollouts and FLOPs spent until
        the run first reached the baseline's final in-domain test accuracy, as ratios to the baseline's totals,
        `None` when never reached; `rollouts_to_grpo_final_ood`, `flops_to_grpo_final_ood`: the same on OOD).
    """
    start, config = results["start"], results["config"]
    base = results["methods"][results["baseline"]]["summary"]
    out: dict[str, Any] = {
        "baseline": results["baseline"],
        "task": config.get("task"),
        "start": {
            "learning_zone_share": start["train_pass_rate_histogram"]["learning_zone_frac"],
            "test_accuracy": start["test_accuracy"],
            "ood_accuracy": start["ood_accuracy"],
            "test_size": config["n_test"],
            "ood_size": config["n_ood"],
        },
        "methods": {},
    }
    for name, method in results["methods"].items():
        row = method["summary"]
        out["methods"][name] = {
            "test_accuracy": row["final_test_accuracy"],
            "ood_accuracy": row["final_ood_accuracy"],
            "update_tokens_ratio": _ratio(row["update_tokens"], base["update_tokens"]),
            "rollouts_ratio": _ratio(row["rollouts"], base["rollouts"]),
            "total_flops_ratio": _ratio(row["total_flops"], base["total_flops"]),
            "dead_share": row.get("dead_share"),
            "rollouts_to_grpo_final": _ratio(row.get("reach_test_rollouts"), base["rollouts"]),
            "flops_to_grpo_final": _ratio(row.get("reach_test_flops"), base["total_flops"]),
            "rollouts_to_grpo_final_ood": _ratio(row.get("reach_ood_rollouts"), base["rollouts"]),
            "flops_to_grpo_final_ood": _ratio(row.get("reach_ood_flops"), base["total_flops"]),
        }
    return out


def _reach(value: float | None) -> str:
    return "not reached" if value is None else _fmt(value, "ratio")


def format_headline(summary: dict[str, Any]) -> str:
    """The headline table of a `summary` (see [`headline_summary`]): one row per method."""
    start = summary["start"]
    base = summary["baseline"]
    lines = [
        f"Start: {start['learning_zone_share']:.0%} of the training groups in the learning zone; greedy accuracy "
        f"in-domain {start['test_accuracy']:.3f} ({start['test_size']} prompts), OOD {start['ood_accuracy']:.3f} "
        f"({start['ood_size']} prompts).",
    ]
    header = [
        "method",
        "in-domain",
        "OOD",
        "update tokens",
        "rollouts",
        "total FLOPs",
        "dead groups",
        "rollouts to target",
        "FLOPs to target",
    ]
    rows = []
    for name, m in summary["methods"].items():
        rows.append(
            [
                name,
                _fmt(m["test_accuracy"], "acc"),
                _fmt(m["ood_accuracy"], "acc"),
                _fmt(m["update_tokens_ratio"], "ratio"),
                _fmt(m["rollouts_ratio"], "ratio"),
                _fmt(m["total_flops_ratio"], "ratio"),
                "n/a" if m["dead_share"] is None else f"{m['dead_share']:.0%}",
                _reach(m["rollouts_to_grpo_final"]),
                _reach(m["flops_to_grpo_final"]),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    lines += [line(header), "  ".join("-" * w for w in widths), *[line(r) for r in rows]]
    lines.append(
        f"Ratios are to {base}'s totals; 'to target' counts what a run spent until it first reached {base}'s final "
        "in-domain accuracy (mean of its last evaluations)."
    )
    return "\n".join(lines)


def summarize(run: dict[str, Any], baseline: dict[str, Any] | None, target_window: int = 1) -> dict[str, Any]:
    """
    The figures of one run's table row: accuracies, tokens, FLOPs, times, and time/FLOPs to reach the baseline's
    final accuracy on each evaluated split.

    Args:
        run (`dict`):
            A [`run_method`] result.
        baseline (`dict`, *optional*):
            The baseline's [`run_method`] result (sets the targets); `None` gives no target figures.
        target_window (`int`, *optional*, defaults to `1`):
            Evaluations averaged into the target (the end of the baseline's curve) and into each point of the run's
            curve when checking whether it reached the target.

    Returns:
        `dict[str, Any]`: flat JSON-serialisable figures.
    """
    curve, totals = run["curve"], run["totals"]
    first, last = curve[0], curve[-1]
    steps = max(totals["optimizer_steps"], 1)
    batches = max(totals["generation_batches"], 1)
    row: dict[str, Any] = {
        "num_params": run["num_params"],
        "optimizer_steps": totals["optimizer_steps"],
        "train_seconds": totals["train_seconds"],
        "train_cpu_seconds": totals["train_cpu_seconds"],
        "eval_seconds": totals["eval_seconds"],
        "rollout_seconds": totals["rollout_seconds"],
        "update_seconds": totals["step_seconds"] - totals["rollout_seconds"],
        "selection_seconds": totals["selection_seconds"],
        "selection_share_of_step": totals["selection_seconds"] / max(totals["step_seconds"], 1e-12),
        "rollouts": totals["rollouts"],
        "rollout_tokens": totals["rollout_completion_tokens"],
        "rollout_prompt_tokens": totals["rollout_prompt_tokens"],
        "update_tokens": totals["update_tokens"],
        "update_tokens_per_step": totals["update_tokens"] / batches,
        "update_completion_tokens": totals["update_completion_tokens"],
        "update_rows": totals["update_rows"],
        "generation_flops": totals["generation_flops"],
        "update_flops": totals["update_flops"],
        "total_flops": totals["total_flops"],
        "seconds_per_step": totals["train_seconds"] / steps,
        # Share of the generated completion tokens that went through an update's forward/backward.
        "utilisation": totals["update_completion_tokens"] / max(totals["rollout_completion_tokens"], 1),
        **dead_shares(run.get("selection_log")),
    }
    for split in EVAL_SPLITS:
        row[f"start_{split}_accuracy"] = first[f"{split}_accuracy"]
        row[f"final_{split}_accuracy"] = last[f"{split}_accuracy"]
        row[f"best_{split}_accuracy"] = max(r[f"{split}_accuracy"] for r in curve)
    if baseline is not None:
        base_curve = baseline["curve"]
        for split in EVAL_SPLITS:
            key = f"{split}_accuracy"
            tail = base_curve[-max(target_window, 1) :]
            target = sum(r[key] for r in tail) / len(tail)
            reached = _first_reaching(curve, key, target, target_window)
            row[f"target_{split}_accuracy"] = target
            # A target is informative only when the baseline gained more than the evaluation's own noise: two
            # binomial standard errors of its starting accuracy on that split's prompts (any gain when unknown).
            n = baseline.get("eval_sizes", {}).get(split, 0)
            p0 = base_curve[0][key]
            noise = 2.0 * math.sqrt(p0 * (1.0 - p0) / n) if n else 0.0
            row[f"target_{split}_informative"] = bool(target - p0 > noise)
            row[f"reach_{split}_step"] = reached["step"] if reached else None
            row[f"reach_{split}_seconds"] = reached["train_seconds"] if reached else None
            row[f"reach_{split}_flops"] = reached["total_flops"] if reached else None
            row[f"reach_{split}_rollouts"] = reached.get("rollouts") if reached else None
            row[f"reach_{split}_rollout_tokens"] = reached.get("rollout_completion_tokens") if reached else None
            # A target that a plateau one prompt lower never reaches is fragile: also the time to 90% of the
            # baseline's gain (start + 0.9 * (target - start)), meaningful only when the baseline gained.
            start = base_curve[0][key]
            target90 = start + 0.9 * (target - start)
            reached90 = _first_reaching(curve, key, target90, target_window) if target > start else None
            row[f"target90_{split}_accuracy"] = target90
            row[f"reach90_{split}_step"] = reached90["step"] if reached90 else None
            row[f"reach90_{split}_seconds"] = reached90["train_seconds"] if reached90 else None
            row[f"reach90_{split}_flops"] = reached90["total_flops"] if reached90 else None
    return row


RATIO_KEYS = (
    "final_test_accuracy",
    "final_ood_accuracy",
    "final_train_accuracy",
    "train_seconds",
    "train_cpu_seconds",
    "rollouts",
    "rollout_tokens",
    "update_tokens",
    "update_tokens_per_step",
    "update_flops",
    "total_flops",
    "reach_test_rollout_tokens",
    "reach_test_seconds",
    "reach_test_flops",
    "reach_test_rollouts",
    "reach_ood_flops",
    "reach_ood_rollouts",
    "reach_train_seconds",
    "reach_train_flops",
    "reach90_train_seconds",
    "reach90_train_flops",
)


def ratios(row: dict[str, Any], base: dict[str, Any]) -> dict[str, float | None]:
    """Each figure of `RATIO_KEYS` of `row` divided by the baseline's (`None` where undefined)."""
    return {key: _ratio(row.get(key), base.get(key)) for key in RATIO_KEYS}


def _fmt(value: Any, kind: str = "") -> str:
    if value is None:
        return "n/a"
    if kind == "acc":
        return f"{value:.3f}"
    if kind == "s":
        return f"{value:.1f}s"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "flops":
        return f"{value:.3g}"
    return str(value)


TABLE_ROWS = (
    ("in-domain test acc (final)", "final_test_accuracy", "acc"),
    ("OOD acc (final)", "final_ood_accuracy", "acc"),
    ("train-prompt acc (final)", "final_train_accuracy", "acc"),
    ("wall-clock, training", "train_seconds", "s"),
    ("CPU time, training", "train_cpu_seconds", "s"),
    ("rollout tokens (completions)", "rollout_tokens", "int"),
    ("update tokens", "update_tokens", "int"),
    ("update tokens / step", "update_tokens_per_step", "int"),
    ("update FLOPs (6N/token)", "update_flops", "flops"),
    ("total FLOPs (+2N/rollout token)", "total_flops", "flops"),
    ("time to target test acc", "reach_test_seconds", "s"),
    ("FLOPs to target test acc", "reach_test_flops", "flops"),
    ("time to target train acc", "reach_train_seconds", "s"),
    ("FLOPs to target train acc", "reach_train_flops", "flops"),
    ("time to 90% of gain, train acc", "reach90_train_seconds", "s"),
    ("FLOPs to 90% of gain, train acc", "reach90_train_flops", "flops"),
    ("selection share of step", "selection_share_of_step", "pct"),
)


def format_table(results: dict[str, Any]) -> str:
    """The demo's comparison table (one column per method, then one ratio column per non-baseline method)."""
    names = list(results["methods"])
    base = results["baseline"]
    others = [n for n in names if n != base]
    header = ["metric", *names, *[f"{n} / {base}" for n in others]]
    lines = []
    for label, key, kind in TABLE_ROWS:
        cells = [label]
        split = key.split("_")[1] if key.startswith(("reach_", "reach90_")) else None
        base_summary = results["methods"][base]["summary"]
        for name in names:
            value = results["methods"][name]["summary"].get(key)
            if split is not None and not base_summary.get(f"target_{split}_informative", True):
                cells.append("no gain")  # the baseline did not gain beyond the evaluation's noise
                continue
            cells.append(f"{100 * value:.2f}%" if kind == "pct" and value is not None else _fmt(value, kind))
        for name in others:
            cells.append(_fmt(results["methods"][name]["ratios"].get(key), "ratio") if key in RATIO_KEYS else "")
        lines.append(cells)
    widths = [max(len(str(row[i])) for row in [header, *lines]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *[line(row) for row in lines]])


def _verdict(results: dict[str, Any], method: str, split: str = "test") -> dict[str, Any]:
    """
    Checks the issue's target for `method` against the baseline, as measured in this run: reach the baseline's final
    accuracy on `split` in at most 0.6x its wall-clock and FLOPs, with at most 0.45x its update tokens per step,
    equal or better OOD accuracy, and selection under 1% of a step. `met` also needs the target to be informative
    (the baseline gained more than two binomial standard errors of its starting accuracy on `split`).
    """
    row = results["methods"][method]["summary"]
    r = results["methods"][method]["ratios"]
    base = results["methods"][results["baseline"]]["summary"]
    informative = bool(row.get(f"target_{split}_informative", False))
    seconds, flops, tokens = r[f"reach_{split}_seconds"], r[f"reach_{split}_flops"], r["update_tokens_per_step"]
    checks: dict[str, Any] = {
        "split": split,
        "target_informative": informative,
        "reach_seconds_ratio_le_0.6": None if seconds is None else seconds <= 0.6,
        "reach_flops_ratio_le_0.6": None if flops is None else flops <= 0.6,
        "update_tokens_per_step_ratio_le_0.45": None if tokens is None else tokens <= 0.45,
        "ood_equal_or_better": row["final_ood_accuracy"] >= base["final_ood_accuracy"],
        "selection_share_lt_1pct": row["selection_share_of_step"] < 0.01,
    }
    conditions = [v for k, v in checks.items() if k not in ("split", "target_informative")]
    checks["met"] = bool(informative and all(v is True for v in conditions))
    return checks


def to_jsonable(obj: Any) -> Any:
    """Converts numpy scalars/arrays and nested containers to plain JSON types (NaN becomes `None`)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    return obj


def prepare(config: DemoConfig) -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    """Loads (or trains and caches) the warm start and builds the splits. Returns `model, tokenizer, splits, meta`."""
    if config.warm_start.task != config.task:
        raise ValueError(
            f"DemoConfig.task={config.task!r} but its warm start was trained on task={config.warm_start.task!r}: "
            f"set warm_start=default_warm_start({config.task!r}) (on the command line, --demo task=... does)."
        )
    torch.set_num_threads(config.torch_threads)
    model, tokenizer, meta = load_warm_start(config.warm_start, config.cache_dir, progress=config.progress)
    splits = get_task(config.task).make_splits(config.n_train, config.n_test, config.n_ood, seed=config.data_seed)
    splits["train_eval"] = splits["train"].select(range(min(config.n_train_eval, config.n_train)))
    return model, tokenizer, splits, meta


def start_state(config: DemoConfig, model: Any, tokenizer: Any, splits: dict[str, Any]) -> dict[str, Any]:
    """The starting policy: sampled pass-rate histogram on the training prompts and greedy accuracies."""
    G = config.num_generations
    rates = sampled_pass_rates(
        model,
        tokenizer,
        splits["train"],
        num_samples=G,
        temperature=config.temperature,
        max_new_tokens=config.max_completion_length,
        seed=config.seed,
    )
    levels = np.asarray(list(splits["train"]["difficulty"]))
    state: dict[str, Any] = {
        "train_pass_rate_histogram": pass_rate_histogram(rates, G),
        "train_pass_rate_by_level": {int(lv): float(rates[levels == lv].mean()) for lv in np.unique(levels)},
        "train_pass_rates": rates.tolist(),
    }
    for name, key in (("test", "test"), ("ood", "ood"), ("train", "train_eval")):
        acc = greedy_accuracy(model, tokenizer, splits[key], max_new_tokens=config.max_completion_length)
        state[f"{name}_accuracy"] = acc["accuracy"]
        state[f"{name}_accuracy_by_level"] = acc.get("per_level", {})
    return state


def format_histogram(hist: dict[str, Any]) -> str:
    total = max(sum(hist["counts"]), 1)
    lines = []
    for b, c in zip(hist["bins"], hist["counts"]):
        lines.append(f"  p={b:5.3f} {c:5d} {'#' * int(round(40 * c / total))}")
    lines.append(
        f"  never solved {hist['never_solved_frac']:.1%}, always solved {hist['always_solved_frac']:.1%}, "
        f"in the learning zone {hist['learning_zone_frac']:.1%}, mean pass rate {hist['mean']:.3f}"
    )
    return "\n".join(lines)


def run_demo(config: DemoConfig, output_dir: str | os.PathLike, figures: bool = True) -> dict[str, Any]:
    """
    Runs every method of `config` side by side and writes `demo_results.json` (and the PNG figures) into
    `output_dir`.

    Args:
        config ([`DemoConfig`]):
            The comparison.
        output_dir (`str` or `os.PathLike`):
            Where the results, figures and each run's prompt table / selection log go.
        figures (`bool`, *optional*, defaults to `True`):
            Also write the PNG figures.

    Returns:
        `dict[str, Any]`: the JSON-serialisable results (also written to `demo_results.json`).
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    names = [m.name for m in config.methods]
    if config.baseline not in names:
        raise ValueError(f"baseline={config.baseline!r} is not among the methods {names}.")
    if len(set(names)) != len(names):
        raise ValueError(f"Method names must be unique, got {names}.")
    wall_start = time.perf_counter()
    machine_start = machine_info()
    model, tokenizer, splits, warm_meta = prepare(config)
    warm_meta = {k: v for k, v in warm_meta.items() if k != "config"}
    start = start_state(config, model, tokenizer, splits)

    runs: dict[str, dict[str, Any]] = {}
    # The baseline first, so that the targets exist when the others are summarised.
    ordered = sorted(config.methods, key=lambda m: m.name != config.baseline)
    for method in ordered:
        run_dir = output_dir / "runs" / method.name.replace("/", "_")
        runs[method.name] = run_method(config, method, model, tokenizer, splits, str(run_dir))

    baseline = runs[config.baseline]
    methods: dict[str, Any] = {}
    base_summary = summarize(baseline, baseline, config.target_window)
    for method in config.methods:
        run = runs[method.name]
        summary = base_summary if method.name == config.baseline else summarize(run, baseline, config.target_window)
        methods[method.name] = {
            "overrides": run["overrides"],
            "summary": summary,
            "ratios": ratios(summary, base_summary),
            "curve": run["curve"],
            "steps": run["steps"],
            "final_prompt_state": _prompt_state(run["prompt_table"]),
            "final_accuracy_by_level": run["final_accuracy_by_level"],
        }
    results: dict[str, Any] = {
        "config": config.to_dict(),
        "flop_model": {
            "N": "all parameters (tied embedding/LM head counted once)",
            "num_params": baseline["num_params"],
            "num_params_non_embedding": count_parameters(model, non_embedding=True),
            "generation_flops_per_token": f"{GENERATION_FLOPS_PER_TOKEN}N (prompt + completion tokens, every rollout)",
            "update_flops_per_token": f"{UPDATE_FLOPS_PER_TOKEN}N (prompt + completion tokens of every updated row)",
            "rollout_tokens": "completion tokens generated (prompt tokens: rollout_prompt_tokens)",
        },
        "warm_start": warm_meta,
        "start": start,
        "baseline": config.baseline,
        "methods": methods,
        "machine": {"start": machine_start, "end": machine_info()},
    }
    # The target is on the in-domain held-out test split; the same checks on the training prompts say whether
    # the method learns what it is trained on as fast (the figure that moves at this scale, see BENCHMARKS.md).
    results["target"] = {m: _verdict(results, m, "test") for m in names if m != config.baseline}
    results["target_train_prompts"] = {m: _verdict(results, m, "train") for m in names if m != config.baseline}
    results["summary"] = headline_summary(results)
    results["total_seconds"] = time.perf_counter() - wall_start
    results = to_jsonable(results)
    with open(output_dir / "demo_results.json", "w") as f:
        json.dump(results, f, indent=2)
    if figures:  # optional dependency (the `dev` extra has it)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            figures = False
            results["figures"] = {"skipped": "matplotlib is not installed: pip install matplotlib"}
    if figures:
        from .plots import plot_all

        results["figures"] = plot_all(results, runs, output_dir)
    if "figures" in results:
        with open(output_dir / "demo_results.json", "w") as f:
            json.dump(results, f, indent=2)
    return results


def _prompt_state(table: Any) -> dict[str, Any]:
    """Compact per-prompt end state: pass-rate and energy distributions over the prompts observed."""
    if len(table) == 0:
        return {"num_prompts": 0}
    out: dict[str, Any] = {"num_prompts": len(table)}
    for col in ("initial_pass_rate", "last_pass_rate", "last_energy"):
        values = table[col].to_numpy(dtype=np.float64)
        out[col] = {
            "mean": float(np.nanmean(values)),
            "zero_frac": float(np.mean(values == 0)),
            "one_frac": float(np.mean(values == 1)),
        }
    out["num_selected_mean"] = float(table["num_selected"].mean())
    if "pruned" in table:
        out["pruned"] = int(table["pruned"].sum())
    if "difficulty" in table:
        by_level = table.groupby("difficulty")
        out["last_pass_rate_by_level"] = {int(k): float(v) for k, v in by_level["last_pass_rate"].mean().items()}
        out["selected_per_prompt_by_level"] = {int(k): float(v) for k, v in by_level["num_selected"].mean().items()}
    return out


def config_fields() -> set[str]:
    """Names of the [`LZEGRPOConfig`] fields (for validating overrides)."""
    return {f.name for f in fields(LZEGRPOConfig)}
