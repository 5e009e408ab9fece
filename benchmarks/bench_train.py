"""Training benchmark: the demo's runs with more steps and several seeds (mean and spread), any selectors.

Same as `lze-trl bench train ...`; see `BENCHMARKS.md` for the commands that produced the published numbers.

    python benchmarks/bench_train.py --seeds 0 1 2 --selectors grpo lze lze+prune uniform reinforce_rej
    python benchmarks/bench_train.py --selectors none lze --set selection_ratio=0.2 --steps 120
"""

from __future__ import annotations

import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from lze_trl.commands.bench import main  # noqa: E402


if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
