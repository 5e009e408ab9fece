"""The paper's peers and the paper's random control, outside the package (the peers lost their benchmarks,
BENCHMARKS.md section 2; the control only serves the benchmarks), kept working as selectors registered from outside
it: importing this package registers `"uniform"` (the paper's random control; LZE's, `"uniform_live"`, is built in),
`"dapo"` (DAPO's dynamic filtering, without its refill rounds), `"prefilter"` (Pre-Filter) and `"softmax"` (the skill
card's soft weighting) with [`~lze_trl.method.selectors.register_selector`]. Reinforce-Rej's online rejection is no
selector of its own: [`~benchmarks.peers.reinforce_rej.SETTINGS`] are the package's settings that make it (forward
pruning on both sides after one dead group, with no exploration, and `"dapo"`'s filter of the live groups).

The prefilter and softmax read their settings from `args.selector_kwargs` (e.g. `PeerConfig(selector="softmax",
selector_kwargs={"temperature": 0.2, "allocate_rollouts": True})`, or `{"mode": "remove_both", "cache_dir": ...}` for
the prefilter) and validates them in its `check_args`. The prefilter judges the prompts before training: call
[`prepare`]`(trainer)` on the built trainer before `trainer.train()`.
"""

from . import dapo, reinforce_rej, uniform  # noqa: F401  (dapo and uniform register their selectors)
from .judge import judge_pass_rates, prepare
from .prefilter import PREFILTER_MODES, PrefilterSelector
from .softmax import SoftmaxSelector


PEERS = {cls.name: cls for cls in (PrefilterSelector, SoftmaxSelector)}
"""The peer selectors by name."""


def needs_preparation(selector: str) -> bool:
    """Whether a run with `selector` must call [`prepare`] before training (the prefilter judges its prompts)."""
    return selector == PrefilterSelector.name


__all__ = [
    "PEERS",
    "PREFILTER_MODES",
    "PrefilterSelector",
    "SoftmaxSelector",
    "judge_pass_rates",
    "needs_preparation",
    "prepare",
]
