"""`reinforce_rej`: Reinforce-Rej's online rejection of all-correct / all-wrong prompts, built on the package's public
settings rather than as a selector of its own.

Reinforce-Rej drops a group that is not live from the update and never rolls its prompt out again. The package does
both already: forward pruning on both sides after one dead observation, with no exploration, never rolls out again a
prompt whose group was all right or all wrong (its `saturated_streak` is then +-1 and stays so, since the prompt is
not observed again), and DAPO's filter (`"dapo"`, [`~benchmarks.peers.dapo.DAPOSelector`]) drops every group that is
not live from the update. [`SETTINGS`] are those config fields; the benchmark harness runs them as `reinforce_rej`
(`benchmarks/harness/specs.py`), and `LZEGRPOConfig(**SETTINGS, ...)` trains it after `import benchmarks.peers`
(which registers `"dapo"`).

Where it differs from the selector it replaces (which kept its own set of rejected prompts):

- Pruning reads the pass rate, the selector read liveness: under a non-binary correctness reward, a group all on
  one side of `pass_threshold` whose total rewards differ is live. Both keep it in the update; pruning then never
  rolls its prompt out again, the selector did not reject it. With a binary correctness reward the two agree.
- A prompt with several groups in one generation batch is pruned when their mean pass rate is 0 or 1 (the per-prompt
  table's one update per batch); the selector rejected it when any of them was dead.
- A pruned prompt that reaches a batch all the same (a duplicate row of the same epoch, or an epoch the async window
  planned before the dead group was recorded) is updated on when its group is live, and that live observation ends
  its streak, so the next epoch rolls it out again; the selector never updated on a rejected prompt again.
- Groups with no scorable rollout are neither pruned nor rejected (as before); the rejected prompts are the prune
  pools (`lze/pruned_prompts`, per side `lze/skipped_prompts_solved` / `_unsolved`), no longer
  `lze/rejected_prompts`, and are saved in checkpoints as the per-prompt table and the pruner's state.
- Skip mode (`prune_refill=False`) generates at least one group a process, pruned or not, so [`SETTINGS`] refill.

When fewer prompts than a generation batch remain, an epoch has no batch left and training stops (with a warning),
as before.
"""

from __future__ import annotations

from typing import Any


NAME = "reinforce_rej"
"""The arm's name in the benchmark harness and in the committed results."""

SETTINGS: dict[str, Any] = {
    "selector": "dapo",  # every live group kept, every other dropped (the built-in "lze" at selection_ratio=1.0 too)
    "prune_solved": True,
    "prune_solved_after": 1,
    "prune_unsolved": True,
    "prune_unsolved_after": 1,
    "prune_exploration": "replay",
    "prune_explore_fraction": 0.0,  # no pruned prompt is rolled out again
    "prune_refill": True,
}
"""Reinforce-Rej as [`LZEGRPOConfig`] fields: DAPO's filter of the live groups, and forward pruning on both sides after
one dead observation with no exploration."""
