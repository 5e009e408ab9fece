"""The method: Learning-Zone Energy, the per-prompt state, the selectors and forward pruning, in plain numpy (no
torch, no TRL)."""
