"""Forward pruning: stop rolling out prompts whose history says their next group will be dead (every rollout right, or
every one wrong), and roll a few of them out again to catch the ones that came back to life."""

from __future__ import annotations

import numpy as np

from .errors import LZEStateError
from .prompt_state import PromptState


SIDES = ("solved", "unsolved")
"""The two sides a group can be dead on: every rollout right (`"solved"`), every rollout wrong (`"unsolved"`)."""
EXPLORATIONS = ("replay", "adaptive")
"""How pruned prompts are rolled out again: the paper's epoch replay, or GRESO's adaptive per-visit probability."""
KEEP_PROBABILITY_START, KEEP_PROBABILITY_RANGE, KEEP_PROBABILITY_FLOOR = 0.5, (0.05, 0.95), 0.01
"""GRESO's exploration probability: its start, the range it adapts in, and the floor of `p ** depth`."""


def dead_shares(pass_rates: np.ndarray) -> dict[str, float]:
    """The shares of a batch's scorable groups dead on each side, as `lze/dead_frac_<side>` (their sum is
    `lze/dead_frac` with a binary correctness reward, and TRL's `frac_reward_zero_std` where correctness is the only
    reward)."""
    p = np.asarray(pass_rates, dtype=np.float64)
    p = p[np.isfinite(p)]
    if len(p) == 0:
        return {f"lze/dead_frac_{side}": 0.0 for side in SIDES}
    return {"lze/dead_frac_solved": float((p >= 1).mean()), "lze/dead_frac_unsolved": float((p <= 0).mean())}


class PromptPruner:
    """
    Forward pruning as an epoch planner, on both sides.

    A prompt whose last `solved_after` observations were fully solved (the per-prompt table's `saturated_streak`), or,
    with `unsolved_after`, whose last `unsolved_after` were fully unsolved, is in that side's prune pool: it is
    predicted dead and is not rolled out on its visit, except when explored. [`~PromptPruner.plan_epoch`] decides each
    epoch's explored prompts (`explored_keys`) by `exploration`:

    - `"replay"` (the paper's): `explore_fraction` of each side's pool (at least one prompt) is drawn each epoch.
    - `"adaptive"` (GRESO's rule, adapted when it acts): each pooled prompt is rolled out with probability
      `max(p ** depth, 0.01)`, `depth` its streak beyond the side's threshold plus one, `p` the side's exploration
      probability (from 0.5, within [0.05, 0.95]). `p` acts once an epoch, when the epoch is planned, so it adapts
      then, from the groups recorded ([`~PromptPruner.observe`]) since the last plan: `p <- p * target / share`, the
      side's target dead share over the share of those groups dead on that side (a side whose last plan pooled no
      prompt keeps its `p`). With a dead share `f` that exploration does not cause, the share is about `f + c p` and
      the map has its fixed point where the share meets the target, approached without overshoot (slope `f / target`);
      where `f` alone exceeds the target, `p` settles at 0.05. GRESO moves `p` by a fixed step after every batch,
      which swings across its whole range within an epoch of tens of batches (BENCHMARKS.md section 14). The targets
      are `target_dead_frac` split as GRESO splits it, a third to the solved side and two thirds to the unsolved side
      where both are pruned, whole where one is.

    A prompt never observed is always rolled out. Every decision is a function of the per-prompt table, of the
    pruner's state and of `(seed, epoch)`: the same on every process and on resume.

    Args:
        solved_after (`int` or `None`, *optional*, defaults to `2`):
            Consecutive fully-solved observations after which a prompt is pruned; `None` prunes no solved prompt.
        explore_fraction (`float`, *optional*, defaults to `0.1`):
            `"replay"`'s fraction of each side's pool rolled out again each epoch, in [0, 1].
        seed (`int`, *optional*, defaults to `0`):
            Seed of the exploration draws.
        unsolved_after (`int` or `None`, *optional*):
            Consecutive fully-unsolved observations after which a prompt is pruned; `None` (the default) prunes none.
        exploration (`str`, *optional*, defaults to `"replay"`):
            One of [`EXPLORATIONS`].
        target_dead_frac (`float`, *optional*, defaults to `0.25`):
            `"adaptive"`'s target share of dead groups among the generated ones (GRESO's), in [0, 1].

    Attributes:
        explored_keys (`np.ndarray`):
            The pooled prompts the current epoch rolls out again (sorted), and `explored_sides` their sides.
        skipped (`np.ndarray`):
            Per side, the pooled prompts the current epoch's plan leaves out.
        explored_scored, explored_live (`np.ndarray`):
            Per side, over the run: explored groups scored, and those of them that were live (not dead).
        keep_probability (`np.ndarray`):
            `"adaptive"`'s `p`, per side.
        dead_since_plan, scored_since_plan (`np.ndarray`):
            Since the last plan: the recorded groups dead on each side, and those scored (`"adaptive"`'s next share).
    """

    def __init__(
        self,
        solved_after: int | None = 2,
        explore_fraction: float = 0.1,
        seed: int = 0,
        unsolved_after: int | None = None,
        exploration: str = "replay",
        target_dead_frac: float = 0.25,
    ) -> None:
        thresholds = [a for a in (solved_after, unsolved_after) if a is not None]
        fractions = (explore_fraction, target_dead_frac)
        if not thresholds or any(a < 1 for a in thresholds) or not all(0.0 <= f <= 1.0 for f in fractions):
            # a public class: checked here too, not only by LZEGRPOConfig (0 would prune every prompt)
            raise ValueError(
                "PromptPruner needs solved_after or unsolved_after >= 1 (the other may be None) and explore_fraction "
                f"and target_dead_frac in [0, 1]; got solved_after={solved_after}, "
                f"unsolved_after={unsolved_after}, {fractions}."
            )
        if exploration not in EXPLORATIONS:
            raise ValueError(f"PromptPruner's exploration must be one of {list(EXPLORATIONS)}; got {exploration!r}.")
        self.after = (solved_after, unsolved_after)
        self.explore_fraction = explore_fraction
        self.seed = seed
        self.exploration = exploration
        both = len(thresholds) == 2
        self.targets = np.array([target_dead_frac / 3 if both else target_dead_frac, 2 * target_dead_frac / 3 if both
                                 else target_dead_frac])  # fmt: skip
        self.explored_keys = np.empty(0, dtype=np.int64)
        self.explored_sides = np.empty(0, dtype=np.int64)
        self.pending_keys = np.empty(0, dtype=np.int64)  # explored, not scored yet (their batch may be in flight)
        self.pending_sides = np.empty(0, dtype=np.int64)
        self.skipped = np.zeros(2, dtype=np.int64)
        self.explored_scored = np.zeros(2, dtype=np.int64)
        self.explored_live = np.zeros(2, dtype=np.int64)
        self.keep_probability = np.full(2, KEEP_PROBABILITY_START)
        self.dead_since_plan = np.zeros(2, dtype=np.int64)
        self.scored_since_plan = np.zeros(1, dtype=np.int64)

    @property
    def sides(self) -> tuple[str, ...]:
        """The sides pruned."""
        return tuple(side for side, after in zip(SIDES, self.after) if after is not None)

    @property
    def num_explored(self) -> int:
        return len(self.explored_keys)

    def side_of(self, keys: np.ndarray, state: PromptState) -> tuple[np.ndarray, np.ndarray]:
        """Each prompt's prune side (0 solved, 1 unsolved, -1 not pruned) and its depth (streak beyond the side's
        threshold, plus one)."""
        streak = state.get(keys)["saturated_streak"]
        side, depth = np.full(len(streak), -1, dtype=np.int64), np.zeros(len(streak), dtype=np.int64)
        for s, (sign, after) in enumerate(zip((1, -1), self.after)):
            if after is not None:
                on = sign * streak >= after
                side[on], depth[on] = s, sign * streak[on] - after + 1
        return side, depth

    def num_pruned(self, state: PromptState) -> int:
        """Prompts in the prune pools now."""
        return int((self.side_of(state.index.to_numpy(), state)[0] >= 0).sum())

    def pruned(self, keys: np.ndarray, state: PromptState) -> np.ndarray:
        """Whether each prompt of `keys` is in a prune pool."""
        return self.side_of(np.asarray(keys, dtype=np.int64), state)[0] >= 0

    def plan_epoch(self, epoch: int, order: np.ndarray, keys: np.ndarray, state: PromptState) -> np.ndarray:
        """Draws `epoch`'s explored prompts and returns its dataset indices: `order` (in sampling order, with their
        prompt `keys`) without the pruned prompts but the explored ones."""
        side, depth = self.side_of(keys, state)
        pool, where = np.unique(keys[side >= 0], return_index=True)
        pool_side, pool_depth = side[side >= 0][where], depth[side >= 0][where]
        rng = np.random.default_rng([self.seed, epoch])
        if self.exploration == "adaptive":
            self._adapt()
        if self.exploration == "replay":
            chosen = np.zeros(len(pool), dtype=bool)
            for s in range(2):
                members = np.flatnonzero(pool_side == s)
                if len(members) > 0 and self.explore_fraction > 0:
                    num = max(1, int(self.explore_fraction * len(members)))
                    chosen[rng.choice(members, size=num, replace=False)] = True
        else:
            keep = np.maximum(self.keep_probability[pool_side] ** pool_depth, KEEP_PROBABILITY_FLOOR)
            chosen = rng.random(len(pool)) < keep
        self.explored_keys, self.explored_sides = pool[chosen], pool_side[chosen]
        self.skipped = np.bincount(pool_side[~chosen], minlength=2).astype(np.int64)
        self.pending_keys = np.concatenate([self.pending_keys, self.explored_keys])
        self.pending_sides = np.concatenate([self.pending_sides, self.explored_sides])
        return order[(side < 0) | np.isin(keys, self.explored_keys)]

    def explore(self, keys: np.ndarray, sides: np.ndarray) -> None:
        """Counts the pooled prompts of `keys` (their `sides`) that are generated though not drawn for exploration
        (skip mode's balance between processes) with the explored ones."""
        self.pending_keys = np.concatenate([self.pending_keys, np.asarray(keys, dtype=np.int64)])
        self.pending_sides = np.concatenate([self.pending_sides, np.asarray(sides, dtype=np.int64)])

    def _adapt(self) -> None:
        """`"adaptive"`'s move of `p`, per pruned side whose last plan pooled prompts, from the groups recorded since
        that plan; the count then starts again."""
        pooled = (self.skipped + np.bincount(self.explored_sides, minlength=2)) > 0
        acts = pooled & np.array([a is not None for a in self.after]) & (self.scored_since_plan[0] > 0)
        share = self.dead_since_plan / max(int(self.scored_since_plan[0]), 1)
        with np.errstate(divide="ignore"):
            moved = self.keep_probability * np.where(share > 0, self.targets / share, np.inf)
        self.keep_probability = np.where(acts, np.clip(moved, *KEEP_PROBABILITY_RANGE), self.keep_probability)
        self.dead_since_plan[:], self.scored_since_plan[:] = 0, 0

    def observe(self, keys: np.ndarray, pass_rates: np.ndarray) -> None:
        """Takes a recorded generation batch (all its groups: prompt keys and pass rates, NaN where unscorable): counts
        the explored groups it scored and which were live, and the groups dead on each side for `"adaptive"`'s next
        move."""
        keys, p = np.asarray(keys, dtype=np.int64), np.asarray(pass_rates, dtype=np.float64)
        scored = np.isfinite(p)
        dead = np.stack([scored & (p >= 1), scored & (p <= 0)])
        hit = np.isin(self.pending_keys, keys[scored])
        if hit.any():
            live_keys = keys[scored & ~dead.any(axis=0)]
            sides = self.pending_sides[hit]
            self.explored_scored += np.bincount(sides, minlength=2)
            self.explored_live += np.bincount(sides[np.isin(self.pending_keys[hit], live_keys)], minlength=2)
            self.pending_keys, self.pending_sides = self.pending_keys[~hit], self.pending_sides[~hit]
        self.dead_since_plan += dead.sum(axis=1)
        self.scored_since_plan += int(scored.sum())

    def metrics(self, state: PromptState) -> dict[str, float]:
        """The pruner's `lze/` metrics: the pools, the current epoch's skipped and explored prompts per side, and over
        the run the explored groups scored, those live, and the rule's precision (the share of scored explored groups
        that were dead again, as predicted)."""
        out = {"pruned_prompts": float(self.num_pruned(state)), "explored_prompts": float(self.num_explored)}
        for s, side in enumerate(SIDES):
            if self.after[s] is None:
                continue
            out[f"skipped_prompts_{side}"] = float(self.skipped[s])
            out[f"explored_prompts_{side}"] = float((self.explored_sides == s).sum())
            out[f"explored_scored_{side}"] = float(self.explored_scored[s])
            out[f"explored_live_{side}"] = float(self.explored_live[s])
            if self.exploration == "adaptive":
                out[f"keep_probability_{side}"] = float(self.keep_probability[s])
        if self.explored_scored.sum() > 0:
            out["prune_precision"] = float(1 - self.explored_live.sum() / self.explored_scored.sum())
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        names = ("explored_keys", "explored_sides", "pending_keys", "pending_sides", "skipped", "explored_scored",
                 "explored_live", "keep_probability", "dead_since_plan", "scored_since_plan")  # fmt: skip
        return {name: getattr(self, name).copy() for name in names}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        missing = sorted(set(self.state_dict()) - set(state))
        if missing:
            raise LZEStateError(f"The saved forward-pruning state lacks {missing}: it was written by another pruner.")
        for name, value in state.items():
            dtype = np.float64 if name == "keep_probability" else np.int64
            setattr(self, name, np.asarray(value, dtype=dtype).copy())
