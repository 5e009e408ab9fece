"""Experimental parts of lze-trl: off by default, kept with their measurements (BENCHMARKS.md) until one wins or goes.

- `rollout_filter`: rollout-side selection, skipping prompts predicted dead before generation (`rollout_filter=`).
- `dead_prediction`: its Beta-binomial predictor and online calibration.
"""
