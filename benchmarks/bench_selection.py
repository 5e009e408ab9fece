"""Selection micro-benchmark: `EnergyScorer.score` + `select_top_k` per generation batch on pools of 1k-1M prompts.

Same as `lze-trl bench selection ...`: also reports the scorer's state bytes per prompt and the share of a real demo
training step. See `BENCHMARKS.md`.

    python benchmarks/bench_selection.py --pool-sizes 1000 100000 1000000 --groups 512
"""

from __future__ import annotations

import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from lze_trl.commands.bench import main  # noqa: E402


if __name__ == "__main__":
    sys.exit(main(["selection", *sys.argv[1:]]))
