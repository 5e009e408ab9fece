"""The ablation of fused rounds' pipeline fill (BENCHMARKS.md section 10): serial rounds whose first `R - 1` updates
train nothing, as a fused run's do (the optimizer steps on zero gradients: the schedule advances, AdamW's bias
correction shrinks the first real updates), with no stale rollout. Its difference to the serial probe is what the fill
alone costs. One regime and seed per call:

    python benchmarks/stale_rollouts/fill.py solved 0 benchmarks/results/stale_rollouts/fill_runs

writes `OUT/<regime>_s<seed>/seed_<seed>/demo_results.json.gz`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.adaptive.regimes import run_one_arm  # noqa: E402
from lze_examples.demo import MeteredLZEGRPOTrainer, MethodSpec  # noqa: E402
from lze_trl.rounds.batching import pad_rows  # noqa: E402


ARM = "lze:generation_rounds=2+8,round_policy=probe,selection_ratio=0.33,fuse_rounds=false,empty_fill"
SETTING = {"selector": "lze", "generation_rounds": [2, 8], "round_policy": "probe", "selection_ratio": 0.33}


class EmptyFillTrainer(MeteredLZEGRPOTrainer):
    """Serial rounds whose first `R - 1` training updates keep no row (the batch is generated and recorded, as a fused
    run records it, but not trained)."""

    def _generate_and_score_completions(self, inputs):
        rows = super()._generate_and_score_completions(inputs)
        fill = len(self.lze.round_policy.schedule) - 1
        if self.model.training and self.state.global_step < fill:
            keep = torch.zeros(len(rows["prompt_ids"]), dtype=torch.bool)
            rows = pad_rows(rows, keep, 0, self.args.steps_per_generation, self.accelerator)
        return rows


def main() -> None:
    run_one_arm(__doc__.split("\n\n")[0], MethodSpec(ARM, dict(SETTING, fuse_rounds=False), EmptyFillTrainer))


if __name__ == "__main__":
    main()
