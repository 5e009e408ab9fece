"""Round policies: how a generation batch's rollouts are generated, and which groups go on after each round.

A generation batch is generated in one round (as GRPO: every group's `num_generations` rollouts at once) or, with
`generation_rounds`, in several: every group gets the first round, then a [`RoundPolicy`] chooses after each round
which groups go on to the next; only the groups that reach the last round are complete and may reach the update. The
policy is chosen once from the config ([`make_round_policy`]) and sees the batch as a [`RoundsState`]. A new rule is
a new subclass, registered with [`register_round_policy`]. Plain numpy, no TRL import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from .checks import Registry
from .energy import expected_energy, fit_beta_prior, history_prior, learning_zone_probability
from .prompt_state import PromptState
from .selection import group_pass_rates, in_learning_zone, pass_counts
from .selectors import SELECTORS, GroupBatch
from .settings import LZESettings


class PolicyRun(Protocol):
    """What a round policy reads of the run ([`~lze_trl.method.run.LZERun`] is one, and calls the policy): its config,
    the per-prompt table, the generation batches recorded so far, the energy's settings and its selector."""

    args: LZESettings
    prompts: PromptState
    batches_recorded: int
    energy_kwargs: dict[str, Any]

    def select(self, batch: GroupBatch) -> np.ndarray: ...


PROBE_STREAM = 0x9B0BE
"""Seeds the choice of the groups the probe completes apart from the generation batch's selection."""


@dataclass
class RoundsState:
    """
    What is known of a generation batch while it is generated in rounds, every process's groups in order.

    Attributes:
        prompt_keys (`np.ndarray`):
            Each group's prompt key ([`~lze_trl.method.prompt_keys.PromptKeys`]).
        rewards (`np.ndarray`):
            Each rollout's rewards, shape `(groups, num_generations, reward functions)`, NaN where not generated (yet)
            or not scored.
        correctness_index (`int`):
            The correctness reward's column of `rewards`.
        going_on (`np.ndarray`):
            Whether each group was generated in the last round (after the last round: whether it is complete).
        rollouts_so_far (`int`):
            The rollouts a group that went on has so far.
        fresh (`list[int]`):
            The rollouts generated in each round so far, every process's.
    """

    prompt_keys: np.ndarray
    rewards: np.ndarray
    correctness_index: int
    going_on: np.ndarray
    rollouts_so_far: int = 0
    fresh: list[int] = field(default_factory=list)

    @property
    def correctness(self) -> np.ndarray:
        """The correctness reward of every group's rollouts so far, shape `(groups, rollouts_so_far)`."""
        return self.rewards[:, : self.rollouts_so_far, self.correctness_index]

    @property
    def remaining(self) -> int:
        """The rollouts a group that goes on still needs to be complete."""
        return self.rewards.shape[1] - self.rollouts_so_far


class RoundPolicy:
    """
    Base class of round policies, built from the run's config `args` and its group size `num_generations`.

    A subclass sets `name` and implements [`~RoundPolicy.choose`]; [`~RoundPolicy.check_args`] validates its settings.
    The base class keeps the metrics and the guard of generating in rounds: it says once (through `warn`) when more
    than half of the completed groups came back dead for 3 generation batches in a row (the first rounds cannot tell
    which prompts are in the learning zone), and counts the rollouts the rounds did not generate. Every decision must
    be a deterministic function of what it is given and of the run's state, so that all processes take the same one.

    Attributes:
        schedule (`list[int]`):
            The rollouts a group has after each round (`generation_rounds`, or `[num_generations]`: one round).
    """

    name: ClassVar[str] = ""

    def __init__(self, args: LZESettings, num_generations: int, warn: Callable[[str], None] | None = None) -> None:
        self.args = args
        self.schedule = list(args.generation_rounds or [num_generations])
        self.warn = warn or (lambda message: None)
        self.bad_batches = 0  # generation batches in a row whose completed groups were mostly dead
        self.rollouts_skipped = 0  # rollouts of this run's groups that the rounds did not generate

    @classmethod
    def check_args(cls, args: LZESettings) -> None:
        """Validates the settings this policy reads in the config `args`, raising a `ValueError` naming the setting
        and the fix."""

    @property
    def setting(self) -> str:
        return f"generation_rounds={self.schedule}, round_policy={self.name!r}"

    def choose(self, run: PolicyRun, state: RoundsState) -> tuple[np.ndarray, np.ndarray]:
        """
        Which groups go on after a round, and their priority (the groups to keep first, or to add first, when the
        choice is evened out over the processes).

        Args:
            run ([`~lze_trl.method.run.LZERun`]):
                The run's LZE state (per-prompt table, selector, settings), not to be changed.
            state ([`RoundsState`]):
                The generation batch so far.

        Returns:
            `tuple[np.ndarray, np.ndarray]`: a boolean and a float array, one entry per group (only groups that are
            `state.going_on` may go on).
        """
        raise NotImplementedError

    def metrics(self, run: PolicyRun, state: RoundsState) -> dict[str, float]:
        """The policy's own metrics of a generation batch (logged as given, identical on every process)."""
        return {}

    def round_metrics(self, run: PolicyRun, state: RoundsState, groups: GroupBatch) -> dict[str, float]:
        """
        The metrics of a generation batch generated in rounds, once its groups are scored (`groups`, whose
        `eligible` groups are the live ones): the rollouts of each round, the completed groups and the share of the
        scorable ones that are dead, and how often the first round's learning-zone test agreed with the complete
        group's; warns when the rounds keep completing dead groups.
        """
        complete, fresh = state.going_on, state.fresh
        completed = int(complete.sum())
        scorable = complete & np.isfinite(groups.pass_rates)
        dead = float((~groups.eligible[scorable]).mean()) if scorable.any() else 0.0
        self.bad_batches = self.bad_batches + 1 if scorable.any() and dead > 0.5 else 0
        if self.bad_batches == 3:
            self.warn(
                f"{self.setting}: more than half of the completed groups came back dead for 3 generation batches in a "
                f"row ({dead:.0%} in the last): the first rounds cannot tell which prompts are in the learning zone. "
                f"{self.fix}"
            )
        self.rollouts_skipped += state.rewards.shape[0] * state.rewards.shape[1] - int(sum(fresh))
        k = self.schedule[0]
        first_round = group_pass_rates(state.rewards[:, :k, state.correctness_index], k, run.args.pass_threshold)
        agreement = in_learning_zone(first_round)[complete] == groups.eligible[complete]
        metrics = {
            "lze/fresh_rollouts": int(sum(fresh)),
            "lze/first_round_rollouts": int(fresh[0]),
            "lze/completed_groups": completed,
            "lze/completed_dead_frac": dead,
            "lze/first_round_agreement": float(agreement.mean()) if completed else 1.0,
        }
        return {**metrics, **self.metrics(run, state)}

    @property
    def fix(self) -> str:
        return "Change generation_rounds or history_prior_strength, or turn the rounds off (generation_rounds=None)."

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"bad_batches": np.asarray(self.bad_batches), "rollouts_skipped": np.asarray(self.rollouts_skipped)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.bad_batches = int(state["bad_batches"])
        self.rollouts_skipped = int(state["rollouts_skipped"])


ROUND_POLICIES: Registry[type[RoundPolicy]] = Registry("round_policy")
"""The round policies by name (what `round_policy` names)."""
register_round_policy = ROUND_POLICIES.register
"""Class decorator adding a round policy to [`ROUND_POLICIES`] under `cls.name`."""


def make_round_policy(
    args: LZESettings, num_generations: int, warn: Callable[[str], None] | None = None
) -> RoundPolicy:
    """The run's round policy: one round without `generation_rounds`, else the one `round_policy` names."""
    if not args.generation_rounds:
        return OneRound(args, num_generations, warn)
    return ROUND_POLICIES[args.round_policy](args, num_generations, warn)


class OneRound(RoundPolicy):
    """Every group's rollouts in one round, as GRPO generates them (no `generation_rounds`)."""

    name = "one"

    def choose(self, run: PolicyRun, state: RoundsState) -> tuple[np.ndarray, np.ndarray]:
        raise RuntimeError("One round has no choice to make.")


@register_round_policy
class ProbeRounds(RoundPolicy):
    """
    `"probe"`, probe-then-complete: after each round, the groups going on are the ones the selector would keep by the
    energy each is expected to have once complete ([`~lze_trl.method.energy.expected_energy`]: the posterior of its
    pass rate from its rollouts so far and a prior, its prompt's EMA weighed `history_prior_strength` rollouts, or for
    a new prompt the batch's pooled pass rate so far).
    """

    name = "probe"

    @classmethod
    def check_args(cls, args: LZESettings) -> None:
        if args.generation_rounds and args.round_policy == cls.name and args.selector == "none":
            raise ValueError(
                f"round_policy='probe' with generation_rounds={args.generation_rounds} cannot run: selector='none' "
                "keeps every group: there is nothing to leave uncompleted. Set generation_rounds=None, or choose a "
                "selector."
            )

    def candidates(self, run: PolicyRun, state: RoundsState) -> GroupBatch:
        """The groups going on as candidates for the selector, each with its expected energy (positive: eligible)."""
        args, keys = run.args, np.asarray(state.prompt_keys, dtype=np.int64)
        successes, trials = pass_counts(state.correctness, args.pass_threshold)
        known = run.prompts.get(keys)
        pooled = (successes.sum() + 1.0) / (trials.sum() + 2.0)
        prior = np.where(np.isnan(known["ema_pass_rate"]), pooled, known["ema_pass_rate"])
        prior_a, prior_b = history_prior(prior, args.history_prior_strength)
        known_rates = known["initial_pass_rate"], known["ema_pass_rate"]
        energies = expected_energy(
            successes, trials, state.remaining, prior_a, prior_b, *known_rates, **run.energy_kwargs
        )
        energies = np.where(state.going_on, energies, 0.0)
        stream = [args.seed, run.batches_recorded, PROBE_STREAM]  # the first choice's; a later one's also by its round
        stream += [state.rollouts_so_far] if state.rollouts_so_far != self.schedule[0] else []
        return GroupBatch(
            prompt_keys=keys,
            pass_rates=np.where(trials > 0, successes / np.maximum(trials, 1), np.nan),
            rewards=np.asarray(state.correctness, dtype=np.float64),
            energies=energies,
            eligible=energies > 0,
            ema_pass_rates=known["ema_pass_rate"],
            rng=np.random.default_rng(stream),
        )

    def choose(self, run: PolicyRun, state: RoundsState) -> tuple[np.ndarray, np.ndarray]:
        candidates = self.candidates(run, state)
        return run.select(candidates) > 0, candidates.energies


@register_round_policy
class AdaptiveRounds(RoundPolicy):
    """
    `"adaptive"`, the adaptive rollout budget: a group goes on while the probability that it ends in the learning zone
    once complete ([`~AdaptiveRounds.learning_zone_probability`]) is at least `learning_zone_threshold`.
    """

    name = "adaptive"

    @classmethod
    def check_args(cls, args: LZESettings) -> None:
        if args.generation_rounds and args.round_policy == cls.name and not SELECTORS[args.selector].needs_pass_rates:
            reason = (
                "keeps every group: there is nothing to leave uncompleted"
                if args.selector == "none"
                else "reads no pass rates: the budget could not tell its groups apart"
            )
            raise ValueError(
                f"round_policy='adaptive' with generation_rounds={args.generation_rounds} cannot run: "
                f"selector={args.selector!r} {reason}. Set generation_rounds=None, or choose a selector that reads "
                "pass rates."
            )

    @property
    def fix(self) -> str:
        return (
            "Raise learning_zone_threshold or history_prior_strength, or turn the rounds off (generation_rounds=None)."
        )

    def choose(self, run: PolicyRun, state: RoundsState) -> tuple[np.ndarray, np.ndarray]:
        probability = np.where(state.going_on, self.learning_zone_probability(run, state), -1.0)
        return probability >= run.args.learning_zone_threshold, probability

    def learning_zone_probability(self, run: PolicyRun, state: RoundsState) -> np.ndarray:
        """The probability that each group ends in the learning zone once complete
        ([`~lze_trl.method.energy.learning_zone_probability`]), from its rollouts so far and its
        [`~AdaptiveRounds.prior`]."""
        successes, trials = pass_counts(state.correctness, run.args.pass_threshold)
        return learning_zone_probability(successes, trials, state.remaining, *self.prior(run, state))

    def prior(self, run: PolicyRun, state: RoundsState) -> tuple[np.ndarray, np.ndarray]:
        """Each group's `Beta(a, b)` prior of its pass rate: its prompt's EMA weighed `history_prior_strength`
        rollouts ([`~lze_trl.method.energy.history_prior`]), or for a new prompt
        [`~AdaptiveRounds.new_prompt_prior`]."""
        ema = run.prompts.get(np.asarray(state.prompt_keys, dtype=np.int64))["ema_pass_rate"]
        known_a, known_b = history_prior(np.nan_to_num(ema), run.args.history_prior_strength)
        new_a, new_b = self.new_prompt_prior(run, state.correctness)
        return np.where(np.isnan(ema), new_a, known_a), np.where(np.isnan(ema), new_b, known_b)

    def new_prompt_prior(self, run: PolicyRun, correctness: np.ndarray) -> tuple[float, float]:
        """
        The `Beta(a, b)` prior of a new prompt's pass rate, fitted to every group's first round (the first
        `generation_rounds[0]` columns of `correctness`) by [`~lze_trl.method.energy.fit_beta_prior`]; where that
        cannot tell (a first round of one rollout), the pooled pass rate weighed `history_prior_strength` rollouts.
        """
        successes, trials = pass_counts(np.asarray(correctness)[:, : self.schedule[0]], run.args.pass_threshold)
        fitted = fit_beta_prior(successes, trials)
        if fitted is not None:
            return fitted
        a, b = history_prior((successes.sum() + 1.0) / (trials.sum() + 2.0), run.args.history_prior_strength)
        return float(a), float(b)

    def metrics(self, run: PolicyRun, state: RoundsState) -> dict[str, float]:
        """`lze/new_prompt_pass_rate_std`: the standard deviation of the new-prompt prior (how far apart the batch's
        new prompts are taken to be: 0 all alike, 0.5 each always or never solved)."""
        a, b = self.new_prompt_prior(run, state.rewards[:, :, state.correctness_index])
        return {"lze/new_prompt_pass_rate_std": float(np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0))))}
