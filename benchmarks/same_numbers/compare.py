"""BENCHMARKS.md section 11: the same runs before and after the one-path change (issue #33), compared number by number.

`python benchmarks/same_numbers/compare.py` reads `benchmarks/results/same_numbers/{before,after}/` (each run's
`demo_results.json`, gzipped, and its per-prompt table and selection log) and prints, per run and method, whether
every stored number is equal; exits 1 on a difference other than the expected ones (times, the warm start's path, the
load average, and TRL's `completions/mean_length`, which the change logs for both generation rounds).
`--results benchmarks/results/same_numbers/smaller_core` compares the same runs before and after the core was cut to
2,700 lines (the landed main before it against the cut core).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import pandas as pd
from tabulate import tabulate


ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "same_numbers"
RUNS = {"demo": "`lze-trl demo`", "dead": "dead-mass probe", "carries": "`carries` probes"}
RENAMED = {"generation": "batch", "last_generation": "last_batch"}  # the change renamed these columns
EXPECTED = ("seconds", "share_of_step", "step_time", "load_average", "warm_start/path", "completions/mean_length")


def differences(before, after, path: str = "") -> list[str]:
    """The paths where two JSON values differ (a key on one side only counts)."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = sorted(set(before) | set(after))
        return [d for k in keys for d in differences(before.get(k), after.get(k), f"{path}/{k}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in differences(b, a, path)]
    return [] if before == after else [path]


def compare(root: Path = ROOT) -> tuple[list[list], bool]:
    """The table's rows and whether every difference is an expected one."""
    rows, ok = [], True
    for run, label in RUNS.items():
        load = {side: json.loads(gzip.open(root / side / f"{run}.json.gz").read()) for side in ("before", "after")}
        for method, before in load["before"]["methods"].items():
            found = sorted(set(differences(before, load["after"]["methods"][method])))
            unexpected = [d for d in found if not any(e in d for e in EXPECTED)]
            tables = sorted((root / "before" / "runs" / run / method).glob("*.parquet")) if run != "demo" else []
            same_tables = []
            for table in tables:
                old = pd.read_parquet(table).rename(columns=RENAMED)
                new = pd.read_parquet(root / "after" / "runs" / run / method / table.name).rename(columns=RENAMED)
                same_tables.append(f"{table.stem} ({len(old):,} rows): {'equal' if old.equals(new) else 'DIFFERS'}")
                ok &= old.equals(new)
            ok &= not unexpected
            expected = sorted({e for d in found for e in EXPECTED if e in d})
            rows.append([label, method, ", ".join(unexpected) or "none", ", ".join(expected), "; ".join(same_tables)])
    return rows, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT, help="The folder with before/ and after/.")
    args = parser.parse_args(argv)
    rows, ok = compare(args.results)
    headers = ["run (seed 0)", "method", "unexpected differences", "expected differences", "tables"]
    print(tabulate(rows, headers=headers, tablefmt="github"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
