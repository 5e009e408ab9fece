"""`lze-trl advise OUTPUT_DIR`: what LZE would save on a run, read from its `trainer_state.json`.

```bash
lze-trl advise outputs/my-run                  # a stock GRPOTrainer run, a shadow run (shadow=True) or an LZE run
lze-trl advise outputs/my-run --generation_share 0.8   # a share to assume where the run has no step timing
```

It prints the run's dead share (`lze/dead_frac`, or TRL's `frac_reward_zero_std` for a stock run), its generation share
of the step (`lze/generation_seconds / lze/step_seconds`), the step LZE's selection would take there and what forward
pruning would skip, each with its arithmetic, which settings to try, and what it cannot project (accuracy). A signal
the run lacks is said to be missing, with the run that would measure it. Plain Python over the log: it imports neither
torch nor TRL.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass

from ..method.pruning import SIDES
from . import UsageError, option


LZE_STEP_WORTH = 0.9
"""LZE's selection is worth trying where its projected step is at most this share of GRPO's: below it, the equal-time
gains of BENCHMARKS.md sections 1-4 and 13 (LZE's steps at 0.35-0.5 of GRPO's, level at equal steps)."""
PRUNE_SHARE = 0.2
"""Forward pruning is worth trying where a shadow run's history would skip at least this share of the generated
groups, with a precision above a random choice's (the run's dead share): the revisit study's GRPO runs (BENCHMARKS.md
section 13) skipped 0.29 when replayed on their logs, and on the addition task of section 14 pruning both sides,
whose explored prompts were dead again 0.677 of the time against GRPO's dead share of 0.406, ended above GRPO at equal
generated rollouts while the unsolved side alone did not."""
PRUNE_SETTINGS = 'prune_solved=True, prune_unsolved=True, prune_exploration="adaptive"'
"""The configuration section 14 tested: both sides together (the gain needed the solved side, whatever its
precision)."""


def read_history(path: str) -> list[dict]:
    """The `log_history` of a run: `path` is `trainer_state.json`, or a run's `output_dir` (its own
    `trainer_state.json`, else its last checkpoint's)."""
    candidates = [path] if path.endswith(".json") else [os.path.join(path, "trainer_state.json")]
    if not path.endswith(".json") and os.path.isdir(path):
        checkpoints = [d for d in os.listdir(path) if d.startswith("checkpoint-") and d.split("-")[-1].isdigit()]
        for name in sorted(checkpoints, key=lambda d: int(d.split("-")[-1]), reverse=True):
            candidates.append(os.path.join(path, name, "trainer_state.json"))
    for candidate in candidates:
        if os.path.isfile(candidate):
            with open(candidate) as f:
                return json.load(f)["log_history"]
    raise UsageError(
        f"lze-trl advise: no trainer_state.json in {path!r} nor in a checkpoint-* folder of it. Point it at a run's "
        "output_dir after training (save a checkpoint, or call trainer.save_state()), or at a trainer_state.json."
    )


def _total(history: list[dict], key: str) -> float | None:
    """The sum of `key` over the logged steps (`None` when no step logged it)."""
    values = [e[key] for e in history if key in e]
    return float(sum(values)) if values else None


def _mean(history: list[dict], key: str) -> float | None:
    values = [e[key] for e in history if key in e]
    return float(sum(values) / len(values)) if values else None


@dataclass
class Signals:
    """What a run's log says: the dead share, the generation share, LZE's update share, and forward pruning's."""

    steps: int
    dead_share: float | None
    dead_source: str
    generation_share: float | None
    generation_source: str
    update_share: float | None
    update_source: str
    prunable: dict[str, tuple[float, float]]  # side: (prunable groups, live among them), from a shadow run
    prunable_share: float | None  # the share of the generated groups forward pruning would have skipped (shadow)

    @classmethod
    def of(cls, history: list[dict], assumed_generation_share: float | None = None) -> Signals:
        steps = [e for e in history if "loss" in e or "lze/step_seconds" in e]
        if not steps:
            raise UsageError("lze-trl advise: the run's log has no training step: train a few steps first.")
        dead, dead_source = _mean(steps, "lze/dead_frac"), "lze/dead_frac"
        if dead is None:
            dead, dead_source = _mean(steps, "frac_reward_zero_std"), "TRL's frac_reward_zero_std"
        seconds, generation = _total(steps, "lze/step_seconds"), _total(steps, "lze/generation_seconds")
        if seconds:
            g, g_source = generation / seconds, "measured: lze/generation_seconds / lze/step_seconds"
        elif assumed_generation_share is not None:
            g, g_source = assumed_generation_share, "assumed (--generation_share)"
        else:
            g, g_source = None, ""
        grpo_tokens = _total(steps, "lze/grpo_update_tokens")
        shadow_tokens, lze_tokens = _total(steps, "lze/shadow_update_tokens"), _total(steps, "lze/update_tokens")
        selected = _mean(steps, "lze/selected_frac")
        if grpo_tokens and shadow_tokens is not None:
            u, u_source = (
                shadow_tokens / grpo_tokens,
                "measured (shadow): lze/shadow_update_tokens / lze/grpo_update_tokens",
            )
        elif grpo_tokens and lze_tokens is not None and selected is not None and selected < 1:
            u = lze_tokens / grpo_tokens
            u_source = "measured (LZE run): lze/update_tokens / lze/grpo_update_tokens"
        elif dead is not None:
            u, u_source = min(0.4, 1 - dead), "estimated: min(0.4, 1 - dead share), the 0.4 quota of live groups"
        else:
            u, u_source = None, ""
        prunable = {
            side: (_total(steps, f"lze/shadow_prunable_{side}"), _total(steps, f"lze/shadow_prunable_live_{side}"))
            for side in SIDES
            if _total(steps, f"lze/shadow_prunable_{side}") is not None
        }
        share = _mean(steps, "lze/shadow_prunable_frac")
        return cls(len(steps), dead, dead_source, g, g_source, u, u_source, prunable, share)


def _f(x: float) -> str:
    return f"{x:.2f}"


def pruning_line(prunable: dict[str, tuple[float, float]], share: float, dead_share: float | None) -> str:
    """What forward pruning would skip, and whether it is worth trying: the history's precision (the predicted-dead
    groups that were dead) against a random choice's, which is the run's `dead_share`, and the skipped `share` against
    `PRUNE_SHARE`. Each side's precision is printed, not judged: on the addition task of BENCHMARKS.md section 14 the
    solved side's was below a random choice's, and pruning it with the unsolved side still gained where the unsolved
    side alone did not, so the advice is the configuration that study tested, both sides."""
    total = sum(n for n, _ in prunable.values())
    live = sum(v for _, v in prunable.values())
    precision = 1 - live / total if total else None
    counts = ", ".join(f"{side} {int(n)} ({int(v)} live, precision {_f(1 - v / n) if n else 'n/a'})"
                       for side, (n, v) in prunable.items())  # fmt: skip
    random = (
        f"a random choice's {_f(dead_share)}, the dead share" if dead_share is not None else "no dead share logged"
    )
    if precision is not None and dead_share is not None and precision > dead_share and share >= PRUNE_SHARE:
        verdict = f"worth trying ({PRUNE_SETTINGS})"
    else:
        verdict = (f"little to gain (worth trying where it would skip >= {PRUNE_SHARE} of the groups at a precision "
                   "above a random choice's)")  # fmt: skip
    return (
        f"Forward pruning: history predicted {int(total)} generated groups dead before generation ({counts}): "
        f"s = {_f(share)} of the groups; precision 1 - {int(live)}/{int(total)} = "
        f"{_f(precision) if precision is not None else 'n/a'} ({random}). Each epoch would generate 1 - s = "
        f"{_f(1 - share)} of GRPO's rollouts, or as many with more live groups a step (the step refilled): {verdict}."
    )


def advice(signals: Signals) -> list[str]:
    """The lines `lze-trl advise` prints for a run's [`Signals`]."""
    s = signals
    lines = [f"Read {s.steps} logged steps."]
    if s.dead_share is not None:
        lines.append(
            f"Dead share: {_f(s.dead_share)} of the groups had no reward spread ({s.dead_source}): GRPO learns "
            "nothing from them."
        )
    else:
        lines.append("Dead share: missing (the log has neither lze/dead_frac nor frac_reward_zero_std).")
    g, u = s.generation_share, s.update_share
    if g is None:
        lines.append(
            "Generation share: missing. A stock GRPOTrainer logs its generation time only to wandb, mlflow or trackio "
            "(profiling/Time taken: ...generate); run a few steps of LZEGRPOTrainer with shadow=True (it trains as "
            "GRPOTrainer) to measure it, or pass --generation_share to assume one."
        )
    else:
        lines.append(f"Generation share: g = {_f(g)} of the step ({s.generation_source}).")
    if g is not None and u is not None:
        step = g + (1 - g) * u
        verdict = (
            "worth trying (selector='lze', the default)"
            if step <= LZE_STEP_WORTH
            else f"little to gain here: generation dominates (worth it below {LZE_STEP_WORTH} of GRPO's step)"
        )
        lines.append(
            f"LZE selection: the update keeps u = {_f(u)} of GRPO's loss tokens ({s.update_source}); a step takes "
            f"g + (1 - g) x u = {_f(g)} + {_f(1 - g)} x {_f(u)} = {_f(step)} of GRPO's: {verdict}."
        )
    if s.prunable:
        lines.append(pruning_line(s.prunable, s.prunable_share or 0.0, s.dead_share))
    else:
        lines.append(
            "Forward pruning: not measured on this run (it needs each prompt's history over revisits: a shadow run, "
            "shadow=True, over more than one epoch). At most the dead share of the groups could be skipped."
        )
    lines.append(
        "Not projected: accuracy. LZE was level with GRPO at equal steps on SmolLM2 (BENCHMARKS.md section 13); "
        "pruning both sides ended above GRPO at equal generated rollouts on the addition task, not shown on SmolLM2 "
        "(section 14). Compare on your task."
    )
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lze-trl advise", description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", help="A run's output_dir (its trainer_state.json or last checkpoint's).")
    help_share = "The generation share of the step to assume where the run has no step timing."
    parser.add_argument(*option("generation_share"), type=float, default=None, help=help_share)
    args = parser.parse_args(argv)
    try:
        if args.generation_share is not None and not 0 <= args.generation_share <= 1:
            raise UsageError(f"--generation_share={args.generation_share} is invalid: use a share in [0, 1].")
        lines = advice(Signals.of(read_history(args.output_dir), args.generation_share))
    except UsageError as error:
        print(error)
        return 2
    print("\n".join(lines))
    return 0
