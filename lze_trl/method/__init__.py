"""The method: Learning-Zone Energy, the per-prompt state, the selectors and the round policies, in plain numpy
(no torch, no TRL)."""
