"""`lze-trl advise OUTPUT_DIR`: what LZE would save on a run, read from its `trainer_state.json`.

```bash
lze-trl advise outputs/my-run                  # a stock GRPOTrainer run, a shadow run (shadow=True) or an LZE run
lze-trl advise outputs/my-run --generation_share 0.8   # a share to assume where the run has no step timing
```

It prints how many log entries it read (and that the figures are rough below `ROUGH_BELOW` of them), the run's dead
share (`lze/dead_frac`, or TRL's `frac_reward_zero_std` for a stock run), the generation share `g` of GRPO's step, the
step LZE's selection would take there and what forward pruning skips or would skip, each with its arithmetic, which
settings to try, and what it cannot project (accuracy). A signal the run lacks is said to be missing, with the run
that would measure it. Plain Python over the log: it imports neither torch nor TRL.

The model of a step: generation takes `g` of GRPO's step and the rest (rewards, scoring, the update's forward and
backward passes, the optimizer) scales with the update's loss tokens, so that LZE's step, whose update keeps `u` of
GRPO's loss tokens, takes `g + (1 - g) x u` of GRPO's. Each run gives GRPO's step its own way:

- a shadow run (`shadow=True`) or a run whose update took every group trains as GRPO: `g` is its own
  `lze/generation_seconds / lze/step_seconds`, and a shadow run's `u` is `lze/shadow_update_tokens /
  lze/grpo_update_tokens`;
- an LZE run's update took only its kept groups' tokens, so its own split would count the saving twice (generation a
  larger share of a cheaper step, then the update cut again). GRPO's step is rebuilt from the run's seconds before
  projecting: `generation + update x (lze/grpo_update_tokens / lze/update_tokens)`, the update scaled up to every
  group's tokens; `g` is the generation seconds over that, and `u = lze/update_tokens / lze/grpo_update_tokens`. The
  projection is then the run's own step over the rebuilt one, and a shadow run of the same setup gives the same figure
  (both overstate the saving alike where part of the update's seconds do not scale with its tokens);
- a stock `GRPOTrainer` logs no step timing: `--generation_share` assumes `g`, and `u` is estimated from the dead
  share (`min(0.4, 1 - dead share)`, the 0.4 quota of the live groups).

Each log entry is the mean of the `logging_steps` steps before it: the seconds are a logged step's means, and the
token and group counts are summed over the logged steps, each entry counted once a step it covers.
Forward pruning is read from a shadow run's `lze/shadow_prunable_*` (what the history would have skipped, and how many
of those groups were live), or, on a run that prunes, from its own counts: `lze/rollouts_skipped` (the rollouts its
epoch plans left out, each epoch's counted when it is planned) against the rollouts it generated
(`lze/grpo_update_rows` a step, one generation batch an optimizer step as TRL's default `steps_per_generation`), and
the explored pruned prompts that turned out live (`lze/explored_scored_<side>`, `lze/explored_live_<side>`).

Every printed arithmetic reproduces its printed result by hand: each result is computed from the terms as printed
(shares to 2 decimals, seconds and ratios to 3 significant digits, counts whole), and the next line goes on from it.
"""

from __future__ import annotations

import argparse
import math

from . import UsageError, option
from .run_log import Pruned, Signals, read_history


LZE_STEP_WORTH = 0.9
"""LZE's selection is worth trying where its projected step is at most this share of GRPO's: below it, the equal-time
gains of BENCHMARKS.md sections 1-4 and 13 (LZE's steps at 0.35-0.5 of GRPO's, level at equal steps)."""
PRUNE_SHARE = 0.2
"""Forward pruning is worth trying where a shadow run's history would skip at least this share of the generated
groups, with a precision above a random choice's (the run's dead share): the revisit study's GRPO runs (BENCHMARKS.md
section 13) skipped 0.29 when replayed on their logs, and on the addition task of section 14 pruning both sides,
whose explored prompts were dead again 0.677 of the time against GRPO's dead share of 0.406, ended above GRPO at equal
generated rollouts while the unsolved side alone did not."""
PRUNE_SETTINGS = (
    'prune_solved=True, prune_solved_after=1, prune_unsolved=True, prune_exploration="adaptive", '
    "prune_target_dead_frac=0.1"
)
"""The configuration section 14 tested, as its settings that differ from `LZEGRPOConfig`'s defaults (the `PRUNING` of
`benchmarks/smollm2_pruning/run.py`, which the addition and epoch-exploration studies ran; its
`prune_unsolved_after=1` is the default): both sides, a prompt pruned after one dead group, explored adaptively toward
a dead share of 0.1 (the gain needed the solved side, whatever its precision)."""
ROUGH_BELOW = 10
"""Below this many log entries the figures are said to be rough: too few to see how steady they are, the first
steps' warm-up weighing in."""
GRPO_CONFIG_LOGGING_STEPS = 10
"""TRL's `GRPOConfig` default `logging_steps`: a 20-step run logs 2 entries."""


def _r(x: float) -> float:
    """A share as printed: 2 decimals."""
    return round(x, 2)


def _f(x: float) -> str:
    return f"{x:.2f}"


def _sig(x: float) -> tuple[float, str]:
    """`x` to 3 significant digits (seconds, ratios) as printed: the value the arithmetic goes on from, its text."""
    digits = max(0, 2 - math.floor(math.log10(abs(x)))) if x else 2
    return round(x, digits), f"{round(x, digits):.{digits}f}"


def steps_lines(s: Signals) -> list[str]:
    """How much of the run was read, and, below `ROUGH_BELOW` log entries, that the figures are rough."""
    to = f", to step {s.last_step}" if s.last_step is not None else ""
    every = f": one every {s.logging_steps} steps, each their mean" if s.logging_steps else ""
    every = ": one every step" if s.logging_steps == 1 else every
    lines = [f"Read {s.entries} log entries{to}{every}."]
    if s.entries < ROUGH_BELOW:
        lines.append(
            f"Rough: fewer than {ROUGH_BELOW} log entries show neither how steady the figures below are nor how much "
            f"the first steps' warm-up weighs in them. Log more often (logging_steps=1; TRL's GRPOConfig logs every "
            f"{GRPO_CONFIG_LOGGING_STEPS} steps) and train more steps for a firmer figure."
        )
    return lines


def generation_line(s: Signals) -> tuple[float | None, str]:
    """The generation share `g` of GRPO's step, as printed, and its line: measured on a run that trains as GRPO,
    rebuilt on an LZE run (its update scaled up to every group's tokens), assumed, or missing."""
    if s.step_seconds and s.generation_seconds is not None:
        gen, gen_text = _sig(s.generation_seconds)
        if not s.selecting:
            step, step_text = _sig(s.step_seconds)
            g = _r(gen / step)
            waited = " (the async trainer's wait for rollouts: the generation its update did not overlap)"
            return g, (
                f"Generation share: g = {gen_text} s / {step_text} s = {_f(g)} of the step (measured: "
                f"{s.generation_source} / lze/step_seconds, a logged step's mean seconds)"
                + (waited if s.generation_source != "lze/generation_seconds" else "")
                + "."
            )
        if not s.kept_tokens:
            return None, (
                "Generation share: not rebuilt: this LZE run's update kept no token, so its seconds say nothing of "
                "GRPO's update. Run a few steps with shadow=True (it trains as GRPOTrainer) to measure it."
            )
        update, update_text = _sig(s.update_seconds)
        ratio, ratio_text = _sig(s.grpo_tokens / s.kept_tokens)
        grpo, grpo_text = _sig(gen + update * ratio)
        g = _r(gen / grpo)
        return g, (
            f"Generation share: g = {gen_text} s / {grpo_text} s = {_f(g)} of GRPO's step, rebuilt from this LZE run, "
            "whose update took only the kept groups' tokens: GRPO's step is generation + update x "
            f"(lze/grpo_update_tokens / lze/update_tokens) = {gen_text} + {update_text} x {ratio_text} = {grpo_text} "
            "s, the update scaled up to every group's tokens (a logged step's mean seconds)."
        )
    if s.assumed_generation_share is not None:
        g = _r(s.assumed_generation_share)
        return g, f"Generation share: g = {_f(g)} of the step (assumed (--generation_share))."
    return None, (
        "Generation share: missing. A stock GRPOTrainer logs its generation time only to wandb, mlflow or trackio "
        "(profiling/Time taken: ...generate); run a few steps of LZEGRPOTrainer with shadow=True (it trains as "
        "GRPOTrainer) to measure it, or pass --generation_share to assume one."
    )


def update_share(s: Signals) -> tuple[float | None, str]:
    """The share `u` of GRPO's loss tokens LZE's update keeps, and where it comes from."""
    if s.shadow and s.grpo_tokens:
        return s.shadow_tokens / s.grpo_tokens, "measured (shadow): lze/shadow_update_tokens / lze/grpo_update_tokens"
    if s.selecting:
        return s.kept_tokens / s.grpo_tokens, "measured (LZE run): lze/update_tokens / lze/grpo_update_tokens"
    if s.dead_share is not None:
        return min(0.4, 1 - s.dead_share), "estimated: min(0.4, 1 - dead share), the 0.4 quota of live groups"
    return None, ""


def selection_line(g: float, u: float, source: str) -> str:
    """LZE's projected step, `g + (1 - g) x u` of GRPO's, from the printed `g` and `u`."""
    u = _r(u)
    step = _r(g + _r(1 - g) * u)
    verdict = (
        "worth trying (selector='lze', the default)"
        if step <= LZE_STEP_WORTH
        else f"little to gain here: generation dominates (worth it below {LZE_STEP_WORTH} of GRPO's step)"
    )
    return (
        f"LZE selection: the update keeps u = {_f(u)} of GRPO's loss tokens ({source}); a step takes "
        f"g + (1 - g) x u = {_f(g)} + {_f(1 - g)} x {_f(u)} = {_f(step)} of GRPO's: {verdict}."
    )


def pruning_line(prunable: dict[str, tuple[float, float]], share: float, dead_share: float | None) -> str:
    """What forward pruning would skip on a shadow run, and whether it is worth trying: the history's precision (the
    predicted-dead groups that were dead) against a random choice's, which is the run's `dead_share`, and the skipped
    `share` against `PRUNE_SHARE`. Each side's precision is printed, not judged: on the addition task of BENCHMARKS.md
    section 14 the solved side's was below a random choice's, and pruning it with the unsolved side still gained where
    the unsolved side alone did not, so the advice is the configuration that study tested, both sides."""
    total = round(sum(n for n, _ in prunable.values()))
    live = round(sum(v for _, v in prunable.values()))
    precision = _r(1 - live / total) if total else None
    share = _r(share)
    sides = {side: (round(n), round(v)) for side, (n, v) in prunable.items()}
    counts = ", ".join(f"{side} {n} ({v} live, precision {_f(1 - v / n) if n else 'n/a'})"
                       for side, (n, v) in sides.items())  # fmt: skip
    random = (
        f"a random choice's {_f(dead_share)}, the dead share" if dead_share is not None else "no dead share logged"
    )
    if precision is not None and dead_share is not None and precision > dead_share and share >= PRUNE_SHARE:
        verdict = f"worth trying ({PRUNE_SETTINGS})"
    else:
        verdict = (f"little to gain (worth trying where it would skip >= {PRUNE_SHARE} of the groups at a precision "
                   "above a random choice's)")  # fmt: skip
    return (
        f"Forward pruning: history predicted {total} generated groups dead before generation ({counts}): "
        f"s = {_f(share)} of the groups; precision 1 - {live}/{total} = "
        f"{_f(precision) if precision is not None else 'n/a'} ({random}). Each epoch would generate 1 - s = "
        f"{_f(1 - share)} of GRPO's rollouts, or as many with more live groups a step (the step refilled): {verdict}."
    )


def skip_line(prunable: dict[str, tuple[float, float]], share: float, dead_share: float | None, g: float | None,
              u: float | None) -> str:  # fmt: skip
    """Skip mode (`prune_refill=False`) projected from a shadow run, which generated every group, so the history's
    precision is exact: a step generates `1 - s` of GRPO's rollouts and loses the predicted groups that were live, as
    a share of the run's live groups (`1 - dead_share` of its groups); with the generation share `g` and LZE's update
    share `u`, its step is `g x (1 - s) + (1 - g) x u` of GRPO's (no exploration counted: it generates some of the
    predicted groups again, saving less and losing less)."""
    s = _r(share)
    total = sum(n for n, _ in prunable.values())
    live = round(sum(v for _, v in prunable.values()))
    line = f"Skip mode (prune_refill=False): each step would generate 1 - s = {_f(1 - s)} of GRPO's rollouts"
    if dead_share is not None and total and share:
        groups = round(total / share)  # the groups the shadow run generated
        live_groups = round(groups * (1 - dead_share))
        if live_groups:
            line += (
                f", losing {live}/{live_groups} = {_f(live / live_groups)} of its live groups (the history's exact "
            )
            line += "precision on this run, before exploration)"
    if g is not None and u is not None:  # from the terms as printed
        g, u, kept = _r(g), _r(u), _r(1 - s)
        step = _r(g * kept + _r(1 - g) * u)
        line += f"; with LZE's update its step is {_f(g)} x {_f(kept)} + {_f(1 - g)} x {_f(u)} = {_f(step)} of GRPO's"
    return line + "."


def pruned_run_line(pruned: Pruned, last_step: int | None, dead_share: float | None) -> str:
    """What forward pruning skipped on a run that prunes, from its own counts: the share `s` of GRPO's rollouts its
    epoch plans left out, and the precision of its prediction (the explored pruned prompts dead again) against a
    random choice's, GRPO's dead share, rebuilt as the run's dead share on the generated groups and the precision on
    the skipped ones (`d x (1 - s) + p x s`; the precision beats it exactly where it beats the run's dead share)."""
    skipped, generated = round(pruned.rollouts_skipped), round(pruned.rollouts_generated)
    s = _r(skipped / (skipped + generated)) if skipped + generated else 0.0
    by = f"by step {last_step} " if last_step is not None else ""
    plan = ", ".join(f"{side} {round(n)}" for side, (n, _, _) in pruned.sides.items())
    line = (
        f"Forward pruning, on in this run: {by}its epoch plans left out {skipped} rollouts and it generated "
        f"{generated}: s = {skipped} / ({skipped} + {generated}) = {_f(s)} of GRPO's rollouts (lze/rollouts_skipped: "
        f"a refilled epoch's skipped prompts count from its plan; the last plan skipped {plan} prompts). "
    )
    scored = sum(round(n) for _, n, _ in pruned.sides.values())
    live = sum(round(v) for _, _, v in pruned.sides.values())
    if not scored:
        return line + (
            "No explored pruned prompt was scored yet: its precision is not measured (train more epochs, so that "
            "pruned prompts are explored)."
        )
    p = _r(1 - live / scored)
    counts = ", ".join(f"{side} {round(n)} ({round(v)} live)" for side, (_, n, v) in pruned.sides.items())
    line += f"Its explored pruned prompts, {counts}: precision 1 - {live}/{scored} = {_f(p)}"
    if dead_share is None:
        return line + " (no dead share logged to compare with)."
    d = _r(dead_share)
    random = _r(d * _r(1 - s) + p * s)
    if p > d and s >= PRUNE_SHARE:
        verdict = f"worth keeping (the configuration tested: {PRUNE_SETTINGS})"
    else:
        verdict = (f"little gained here (it pays where it skips >= {PRUNE_SHARE} of the rollouts at a precision "
                   "above a random choice's)")  # fmt: skip
    return line + (
        f", against a random choice's {_f(random)}, GRPO's dead share rebuilt from the run's {_f(d)} on the generated "
        f"groups and the precision on the skipped ones: d x (1 - s) + p x s = {_f(d)} x {_f(1 - s)} + {_f(p)} x "
        f"{_f(s)} = {_f(random)}: {verdict}."
    )


def advice(signals: Signals) -> list[str]:
    """The lines `lze-trl advise` prints for a run's [`Signals`]."""
    s = signals
    lines = steps_lines(s)
    if s.dead_share is not None:
        lines.append(
            f"Dead share: {_f(s.dead_share)} of the groups had no reward spread ({s.dead_source}): GRPO learns "
            "nothing from them."
        )
    else:
        lines.append("Dead share: missing (the log has neither lze/dead_frac nor frac_reward_zero_std).")
    g, line = generation_line(s)
    lines.append(line)
    u, source = update_share(s)
    if g is not None and u is not None:
        lines.append(selection_line(g, u, source))
    if s.pruned is not None:
        lines.append(pruned_run_line(s.pruned, s.last_step, s.dead_share))
    elif s.prunable:
        lines.append(pruning_line(s.prunable, s.prunable_share or 0.0, s.dead_share))
        lines.append(skip_line(s.prunable, s.prunable_share or 0.0, s.dead_share, g, u))
    else:
        lines.append(
            "Forward pruning: not measured on this run (it needs each prompt's history over its visits: a shadow run, "
            "shadow=True, over more than one epoch, or a run that prunes). At most the dead share of the groups "
            "could be skipped."
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
