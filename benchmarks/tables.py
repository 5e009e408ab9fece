"""The committed tables of `python benchmarks/bench.py train` and `selection`, rebuilt from the JSON beside each:

    python benchmarks/tables.py            # rewrites every table under benchmarks/results from its JSON
    python benchmarks/tables.py --check    # rebuilds them and fails if one differs from the committed

A table is a `.md` file under `benchmarks/results/` with a `.json` of the same name beside it that `bench.py` wrote:
`bench_train.md` of `bench.py train` (`bench_train.json`; also `arithmetic_task/bench240_train`, ...) and
`bench_selection.md` of `bench.py selection`. Both are built by `benchmarks.harness.markdown` from the JSON alone (no
training). The sweep reports that read per-seed `demo_results.json` files (`sweep.md`) are not among them: those
files were not committed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.harness.markdown import bench_markdown, selection_markdown  # noqa: E402


RESULTS = ROOT / "benchmarks" / "results"


def rebuild(path: Path) -> str | None:
    """The table of the `bench.py` JSON at `path`, or `None` if `bench.py train`/`selection` did not write it."""
    results = json.loads(path.read_text())
    if not isinstance(results, dict):
        return None
    if "aggregate" in results and "runs" in results:
        return bench_markdown(results)
    if "pools" in results and "groups" in results:
        return selection_markdown(results)
    return None


def tables(results: Path) -> dict[Path, str]:
    """Every table under `results` (a `.md` beside a `bench.py` JSON of the same name), rebuilt from its JSON."""
    found = {}
    for path in sorted(results.rglob("*.json")):
        if path.with_suffix(".md").is_file() and (text := rebuild(path)) is not None:
            found[path.with_suffix(".md")] = text
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder searched for the tables")
    parser.add_argument("--check", action="store_true", help="fail if a rebuilt table differs from the committed")
    cli = parser.parse_args(argv)
    rebuilt = tables(cli.results)
    if not rebuilt:
        print(f"no bench.py tables under {cli.results}", file=sys.stderr)
        return 2
    differ = [path for path, text in rebuilt.items() if path.read_text() != text]
    if cli.check:
        for path in differ:
            print(f"{path} differs from its rebuild from {path.with_suffix('.json').name}")
        print(f"{len(rebuilt) - len(differ)} of {len(rebuilt)} tables rebuild")
        return 1 if differ else 0
    for path in differ:
        path.write_text(rebuilt[path])
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
