"""The figures of a comparison: one run's summary row against the baseline (accuracies, tokens, FLOPs, times, time
and FLOPs to the baseline's target), ratios, dead shares and the machine-readable headline summary of
`demo_results.json`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .projection import load_profile, projected_step_seconds


EVAL_SPLITS = ("test", "ood", "train")
"""Evaluated splits: the in-domain held-out test, the out-of-distribution split and a fixed sample of the RL training
prompts themselves."""


def first_reaching(curve: list[dict[str, Any]], key: str, target: float, window: int = 1) -> dict[str, Any] | None:
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
    Share of the generated groups that were dead (scorable and not live,
    [`~lze_trl.method.selection.live_groups`]), over the run and over its last quarter of optimizer steps, from a
    selection log (`None` values without one).
    """
    if log is None or len(log) == 0:
        return {"dead_share": None, "dead_share_last_quarter": None, "generated_groups": None}
    rates = log["pass_rate"].to_numpy(dtype=float)
    steps = log["step"].to_numpy()
    scored = ~np.isnan(rates)
    dead = scored & ~log["live"].to_numpy(dtype=bool)
    last = steps >= steps.min() + 0.75 * (steps.max() - steps.min() + 1)
    return {
        "dead_share": float(dead.sum() / max(scored.sum(), 1)),
        "dead_share_last_quarter": float(dead[last].sum() / max((scored & last).sum(), 1)),
        "generated_groups": int(len(rates)),
    }


def projected_vllm_step_seconds(totals: dict[str, Any], batches: int) -> float | None:
    """The run's step projected under vLLM from its tokens per step ([`lze_examples.demo.projection`]; `None` without a
    profile)."""
    profile = load_profile()
    if profile is None:
        return None
    per_step = [totals[key] / batches for key in ("rollout_completion_tokens", "rollouts", "update_processed_tokens")]
    return projected_step_seconds(profile, *per_step)


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
        # update tokens = loss (completion) tokens of the updated rows, as the trainer's `lze/update_tokens`
        "update_tokens": totals["update_completion_tokens"],
        "update_tokens_per_step": totals["update_completion_tokens"] / batches,
        "update_completion_tokens": totals["update_completion_tokens"],
        "update_processed_tokens": totals["update_processed_tokens"],
        "update_forward_rows": totals["update_forward_rows"],
        "generation_flops": totals["generation_flops"],
        "update_flops": totals["update_flops"],
        "total_flops": totals["total_flops"],
        "seconds_per_step": totals["train_seconds"] / steps,
        # Share of the generated completion tokens that went through an update's forward/backward.
        "utilisation": totals["update_completion_tokens"] / max(totals["rollout_completion_tokens"], 1),
        **dead_shares(run.get("selection_log")),
        "projected_vllm_step_seconds": projected_vllm_step_seconds(totals, batches),
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
            reached = first_reaching(curve, key, target, target_window)
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
            reached90 = first_reaching(curve, key, target90, target_window) if target > start else None
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


def headline_summary(results: dict[str, Any]) -> dict[str, Any]:
    """
    The machine-readable `summary` of a comparison (written into `demo_results.json`): the starting state and, per
    method, its final accuracies and its costs relative to the baseline.

    Returns:
        `dict[str, Any]`: `start` (`learning_zone_share`: share of the training groups with a sampled pass rate in
        (0, 1) at the start; `test_accuracy`, `ood_accuracy`: greedy; `test_size`, `ood_size`: prompts evaluated) and
        `methods.<name>` (`test_accuracy`, `ood_accuracy`: final greedy; `update_tokens_ratio`,
        `generated_rollouts_ratio` (rollouts generated), `total_flops_ratio`: to the baseline's totals; `dead_share`:
        share of the generated groups that were dead (scorable and not live); `utilisation`: share of the generated
        completion tokens that reached a backward pass; `projected_vllm_step_ratio`: the step projected under vLLM
        ([`lze_examples.demo.projection`]), to the baseline's; `rollouts_to_grpo_final`, `flops_to_grpo_final`:
        rollouts and FLOPs spent until the run first reached the baseline's final in-domain test accuracy, as ratios to
        the baseline's totals, `None` when never reached; `rollouts_to_grpo_final_ood`, `flops_to_grpo_final_ood`: the
        same on OOD).
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
            "test_size": start.get("test_size", config["n_test"]),
            "ood_size": start.get("ood_size", config["n_ood"]),
        },
        "methods": {},
    }
    for name, method in results["methods"].items():
        row = method["summary"]
        out["methods"][name] = {
            "test_accuracy": row["final_test_accuracy"],
            "ood_accuracy": row["final_ood_accuracy"],
            "update_tokens_ratio": _ratio(row["update_tokens"], base["update_tokens"]),
            "generated_rollouts_ratio": _ratio(row["rollouts"], base["rollouts"]),
            "projected_vllm_step_ratio": _ratio(
                row.get("projected_vllm_step_seconds"), base.get("projected_vllm_step_seconds")
            ),
            "total_flops_ratio": _ratio(row["total_flops"], base["total_flops"]),
            "dead_share": row.get("dead_share"),
            "utilisation": row.get("utilisation"),
            "rollouts_to_grpo_final": _ratio(row.get("reach_test_rollouts"), base["rollouts"]),
            "flops_to_grpo_final": _ratio(row.get("reach_test_flops"), base["total_flops"]),
            "rollouts_to_grpo_final_ood": _ratio(row.get("reach_ood_rollouts"), base["rollouts"]),
            "flops_to_grpo_final_ood": _ratio(row.get("reach_ood_flops"), base["total_flops"]),
        }
    return out
