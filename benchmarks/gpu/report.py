"""The GPU timing script's results as a markdown table, one row per arm and backend:

    python benchmarks/gpu/report.py RESULTS.json                        # prints the report
    python benchmarks/gpu/report.py RESULTS.json --output REPORT.md     # writes it
    python benchmarks/gpu/report.py RESULTS.json --output REPORT.md --check   # fails (exit 1) when REPORT.md differs

RESULTS.json is what `benchmarks/gpu/run.py --output` wrote (also a partial one, from a run cut short); nothing is
trained here. Each ratio is over GRPO's with the same backend.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.gpu.arms import ARMS, BACKENDS  # noqa: E402


HEADER = [
    "arm",
    "backend",
    "s/step",
    "generation s/step",
    "generation calls/step",
    "rollouts/step",
    "update rows/step",
    "step / GRPO",
    "generation / GRPO",
    "note",
]


def number(value: float | None, ratio: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if ratio or abs(value) >= 1 else f"{value:.3f}"


def rows(result: dict[str, Any]) -> list[list[str]]:
    """The table's rows, arms in `ARMS` order and each with every backend in `BACKENDS` order."""
    records = {(r["arm"], r["backend"]): r for r in result["arms"]}
    table = []
    for arm in ARMS:
        for backend in BACKENDS:
            r = records.get((arm, backend))
            if r is None:
                continue
            base = records.get(("grpo", backend), {})
            ok = "s_per_step" in r

            def ratio(key: str, r=r, base=base) -> float | None:
                return r[key] / base[key] if key in r and base.get(key) else None

            note = {"ok": "", "cut": f"cut by the deadline: {r.get('timed_steps', 0)} timed steps"}.get(r["status"])
            if note is None:  # skipped (its reason) or error (the exception's line)
                why = r.get("reason") or (r.get("error") or "").strip().splitlines()[-1:]
                note = f"{r['status']}: {why if isinstance(why, str) else ''.join(why)[:100]}"
            table.append(
                [
                    arm,
                    backend,
                    number(r.get("s_per_step")),
                    number(r.get("generation_s_per_step")),
                    number(r["generation_calls_per_step"], ratio=True) if ok else "-",
                    f"{r['generated_rollouts_per_step']:.0f}" if ok else "-",
                    f"{r['update_rows_per_step']:.0f}" if ok else "-",
                    number(ratio("s_per_step"), ratio=True),
                    number(ratio("generation_s_per_step"), ratio=True),
                    note,
                ]
            )
    return table


def report(result: dict[str, Any]) -> str:
    """The markdown report: what ran where, then the table."""
    env, size = result["environment"], result["size"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    lines = [
        f"# GPU step times: {size['name']} size on {env['device_name']}",
        "",
        f"{env['date']}, commit {env.get('commit') or 'unknown'}; {versions}.",
        "",
        f"Model: Qwen2 shape, {size['num_layers']} layers, hidden {size['hidden_size']}, vocabulary "
        f"{size['vocab_size']}, {(result.get('parameters') or 0) / 1e6:.4g}M parameters, {size['dtype']} on "
        f"{size['device']}, random weights. A step: {size['prompts_per_step']} prompts x {size['num_generations']} "
        f"rollouts (GRPO), completions up to {size['max_completion_length']} tokens (EOS forced with probability "
        f"{size['hazard']:.4f} a token), micro-batches of {size['micro_batch']} rows; per arm "
        f"{size['warmup_steps']} step(s) not counted, then {size['timed_steps']} timed (medians of seconds, means of "
        f"counts). Run: {result.get('seconds', 0):.0f} s.",
        "",
        tabulate(rows(result), headers=HEADER, tablefmt="github", disable_numparse=True),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the JSON that benchmarks/gpu/run.py --output wrote")
    parser.add_argument("--output", type=Path, default=None, help="write the report here (else print it)")
    parser.add_argument("--check", action="store_true", help="fail when --output differs from the rebuilt report")
    args = parser.parse_args(argv)
    text = report(json.loads(args.results.read_text()))
    if args.check:
        if args.output is None:
            parser.error("--check needs --output")
        if not args.output.exists() or args.output.read_text() != text:
            print(f"{args.output} differs from the report rebuilt from {args.results}", file=sys.stderr)
            return 1
        return 0
    if args.output is None:
        print(text, end="")
    else:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
