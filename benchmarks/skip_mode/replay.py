"""The skip rule replayed on the revisit study's committed GRPO and filter runs (BENCHMARKS.md section 13), before the
skip-mode study chose its rule: for each side and streak, the share of the groups generated after a prompt's first
visit that the rule would have skipped, and the share of those visits' live groups it would have lost.

    python benchmarks/skip_mode/replay.py          # writes benchmarks/results/skip_mode/replay.md
    python benchmarks/skip_mode/replay.py --check  # fails when the committed replay.md differs

A prompt's streak is its run of all-right (positive) or all-wrong (negative) groups up to its last visit, as the
pruner's `saturated_streak`; the replay skips no explored prompt (exploration lowers both shares alike), and reads
each run's selection log up to its 16th step (the study's equal steps).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "benchmarks" / "results" / "smollm2_revisits" / "runs"
OUT = ROOT / "benchmarks" / "results" / "skip_mode" / "replay.md"
RULES = [(None, 1), (None, 2), (None, 3), (1, None), (2, None), (1, 1), (1, 2), (2, 2)]
"""(solved side's streak, unsolved side's streak), `None` for a side not skipped."""
STEPS = 16


def runs(arm: str) -> list[dict]:
    return [json.loads(p.read_text())["selection_log"] for p in sorted((RUNS / arm).glob("seed_*.json"))]


def replay(log: dict, solved_after: int | None, unsolved_after: int | None) -> tuple[int, int, int, int]:
    """(later visits, skipped, live later visits, live skipped) of one run's log under the rule."""
    step, batch = np.asarray(log["step"]), np.asarray(log["batch"])
    keys, rates, live = np.asarray(log["prompt_key"]), np.asarray(log["pass_rate"]), np.asarray(log["live"], bool)
    streak: dict[int, int] = {}
    later = skipped = live_later = live_skipped = 0
    for b in np.unique(batch[step < STEPS]):
        for k, p, lv in zip(keys[batch == b], rates[batch == b], live[batch == b]):
            s = streak.get(int(k))
            if s is not None:
                predicted = (solved_after is not None and s >= solved_after) or (
                    unsolved_after is not None and -s >= unsolved_after
                )
                later, live_later = later + 1, live_later + int(lv)
                skipped, live_skipped = skipped + int(predicted), live_skipped + int(predicted and lv)
            s = s or 0
            streak[int(k)] = (max(s, 0) + 1) if p >= 1 else (min(s, 0) - 1) if p <= 0 else 0
    return later, skipped, live_later, live_skipped


def table() -> str:
    rows = []
    for arm in ("grpo", "filter"):
        logs = runs(arm)
        for solved, unsolved in RULES:
            later, skipped, live_later, live_skipped = np.sum([replay(g, solved, unsolved) for g in logs], axis=0)
            rows.append([arm, len(logs), solved or "-", unsolved or "-", int(later), f"{skipped / later:.3f}",
                         f"{live_skipped / live_later:.3f}", f"{1 - live_skipped / max(skipped, 1):.3f}",
                         f"{1 - live_later / later:.3f}"])  # fmt: skip
    headers = ["runs", "seeds", "solved after", "unsolved after", "later visits", "skipped share", "live lost",
               "precision", "random choice's precision"]  # fmt: skip
    return tabulate(rows, headers, tablefmt="github", disable_numparse=True)


def page() -> str:
    return (
        "# The skip rule replayed on the revisit study's runs\n\n"
        "Built by `python benchmarks/skip_mode/replay.py` from `benchmarks/results/smollm2_revisits/runs` (6 seeds "
        "of GRPO and of the dead-group filter, SmolLM2-135M-Instruct, 32 prompts, 8 a step, up to step 16). Of the "
        "groups generated after a prompt's first visit: the share the rule would have skipped, the share of their "
        "live groups it would have lost, its precision (the skipped groups that were dead) and a random choice's (the "
        "dead share of those visits). No exploration.\n\n## The replay\n\n" + table() + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} is out of date: run python benchmarks/skip_mode/replay.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
