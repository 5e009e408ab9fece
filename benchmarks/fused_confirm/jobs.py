"""The confirmatory test's runs not yet in `benchmarks/results/fused_confirm/runs`, one `REGIME SEED` a line, seeds
interleaved across regimes (each line runs the serial and the corrected fused probe in one process, from one warm
start: `benchmarks/stale_rollouts/run.sh`):

    python benchmarks/fused_confirm/jobs.py | xargs -L 1 bash -c \
        'bash benchmarks/stale_rollouts/run.sh "$0" "$1" benchmarks/results/fused_confirm/runs'
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.fused_confirm.power import RESULTS, seeds  # noqa: E402


def pending(results: Path = RESULTS, planned: dict[str, list[int]] | None = None) -> list[tuple[str, int]]:
    """`(regime, seed)` of the runs not yet written under `results/runs`, the `planned` seeds (default: this test's)
    interleaved across regimes (every regime's first seed first)."""
    planned = planned or seeds()
    order = itertools.zip_longest(*[[(regime, s) for s in planned[regime]] for regime in planned])
    done = lambda regime, s: (results / "runs" / f"{regime}_s{s}" / "bench_train.json").exists()  # noqa: E731
    return [job for row in order for job in row if job is not None and not done(*job)]


if __name__ == "__main__":
    for regime, seed in pending():
        print(regime, seed)
