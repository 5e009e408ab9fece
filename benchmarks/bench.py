"""The benchmarks' command line: the demo's runs with more steps and several seeds, the selector-sweep report and the
selection micro-benchmark (see `benchmarks/harness/cli.py` and BENCHMARKS.md for the commands behind its numbers).

    python benchmarks/bench.py train --seeds 0 1 2 --selectors grpo lze lze+prune uniform reinforce_rej softmax
    python benchmarks/bench.py train --selectors none lze --set selection_ratio=0.2 --steps 120
    python benchmarks/bench.py report outputs/sweep_seed0 outputs/sweep_seed1 --output-dir outputs/sweep
    python benchmarks/bench.py selection --pool-sizes 1000 100000 1000000
    python benchmarks/bench.py all --tiny
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `benchmarks.harness` from a checkout, whatever the working directory

# Read when transformers and the Hub client are imported: before the harness imports them.
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks.harness.cli import main  # noqa: E402


if __name__ == "__main__":
    sys.exit(main())
