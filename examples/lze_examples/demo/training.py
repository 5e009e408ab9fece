"""One run of a comparison: the warm start and the splits, the starting policy, and one method trained from the warm
start with accuracy evaluations, token/FLOP metering and a progress bar."""

from __future__ import annotations

import contextlib
import copy
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from lze_trl.method.errors import LZEWarning

from ..tasks import get_task
from ..tasks.arithmetic import arithmetic_reward
from .accounting import MeteredLZEGRPOTrainer, count_parameters
from .accuracy import AccuracyCallback, greedy_accuracy, pass_rate_histogram, sampled_pass_rates
from .config import DemoConfig, MethodSpec, lze_config
from .warmstart import load_warm_start


def prepare(config: DemoConfig) -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    """Loads (or trains and caches) the warm start and builds the splits. Returns `model, tokenizer, splits, meta`."""
    if config.warm_start.task != config.task:
        raise ValueError(
            f"DemoConfig.task={config.task!r} but its warm start was trained on task={config.warm_start.task!r}: "
            f"set warm_start=default_warm_start({config.task!r}) (on the command line, --demo task=... does)."
        )
    torch.set_num_threads(config.torch_threads)
    model, tokenizer, meta = load_warm_start(config.warm_start, config.cache_dir, progress=config.progress)
    levels = {k: v for k, v in (("train_levels", config.train_levels), ("test_levels", config.test_levels)) if v}
    if levels and config.task != "carries":
        raise ValueError(f"train_levels and test_levels are options of the carries task, not of {config.task!r}.")
    splits = get_task(config.task).make_splits(
        config.n_train, config.n_test, config.resolved_n_ood(), seed=config.data_seed, **levels
    )
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
    state["test_size"], state["ood_size"] = len(splits["test"]), len(splits["ood"])
    for name, key in (("test", "test"), ("ood", "ood"), ("train", "train_eval")):
        acc = greedy_accuracy(model, tokenizer, splits[key], max_new_tokens=config.max_completion_length)
        state[f"{name}_accuracy"] = acc["accuracy"]
        state[f"{name}_accuracy_by_level"] = acc.get("per_level", {})
    return state


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
    """Every `lze/` metric of each logged training step (whatever the run's mode logs), and TRL's lengths, tokens and
    times."""
    keys = ("completions/mean_length", "num_tokens", "step_time")
    return [
        {"step": e["step"], **{k: v for k, v in e.items() if k.startswith("lze/") or k in keys}}
        for e in log_history
        if "lze/generated_rollouts" in e
    ]


@contextlib.contextmanager
def recorded_lze_warnings() -> Iterator[list[str]]:
    """
    Collects the distinct [`~lze_trl.method.guards.LZEWarning`] messages raised inside (in order) into the yielded
    list, whatever the warning filters say, so that a run's results keep what its guards said even where a command
    silences warnings; every warning caught is then re-issued under the caller's filters.
    """
    messages: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LZEWarning)
        try:
            yield messages
        finally:
            messages.extend(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, LZEWarning)))
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


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
        `lze/*` metrics), `warnings` (what the run's guards said, [`recorded_lze_warnings`]),
        `final_accuracy_by_level` (per split), `prompt_table`, `selection_log` (pandas frames, not
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
    with recorded_lze_warnings() as said:
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
        "warnings": said,
        "final_accuracy_by_level": {
            name: greedy_accuracy(policy, tokenizer, data, max_new_tokens=config.max_completion_length)["per_level"]
            for name, data in eval_splits.items()
        },
        "prompt_table": trainer.prompt_table(),
        "selection_log": trainer.selection_log.to_pandas(),
    }
