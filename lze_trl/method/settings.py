"""[`LZESettings`]: every LZE setting of a run, defined once (its type, default, check and `--help`), for both
trainers' configs.

[`~lze_trl.LZEGRPOConfig`] and [`~lze_trl.async_grpo.trainer.LZEAsyncGRPOConfig`] are TRL's configs with these
fields mixed in (`class LZEGRPOConfig(LZESettings, GRPOConfig)`); the method layer ([`~lze_trl.method.run.LZERun`],
the selectors, the pruner) reads them as an `LZESettings`, so that a reader can follow a setting such as
`selection_ratio` from the config to the code that acts on it. Each setting's own check is here (`SETTING_CHECKS`);
[`~lze_trl.method.validation.validate_lze_args`], above the selector registry it also reads, runs them (both configs'
`__post_init__`), naming the setting and the fix; it also reads the TRL settings it depends on (`num_generations`,
`per_device_train_batch_size`, `steps_per_generation`), and the method reads the run's `seed`. Plain Python, no TRL.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from .checkpoint import RESUME_MODES
from .checks import is_finite_number as _finite
from .checks import is_integer_at_least, within
from .energy import ENERGY_TERMS, MOMENTUM_MODES
from .pruning import EXPLORATIONS


@dataclass
class LZESettings:
    r"""
    The settings of Learning-Zone Energy (LZE): which prompt groups of a generation batch take part in the policy
    update (backward selection) and which prompts are still rolled out (forward pruning, off by default). Defaults
    are those of the authors' release.

    Parameters:
        > Parameters that control which groups take part in the update (backward selection)

        selector (`str`, *optional*, defaults to `"lze"`):
            How prompt groups are chosen for the update, by the name of a registered selector (see
            `lze_trl.method.selectors`): `"lze"` (top `selection_ratio` by energy; restrict `energy_terms` for the
            paper's ablations), `"none"` (every group, exactly as `GRPOTrainer`), `"uniform_live"` (as many groups as
            `"lze"` keeps, at random among the live ones: the control of LZE's ranking), or a selector registered
            outside the package (`lze_trl.method.selectors.register_selector`).
        selection_ratio (`float`, *optional*, defaults to `0.4`):
            Fraction of the generation batch's groups kept for the update, in (0, 1].
        selection_noise (`float`, *optional*, defaults to `0.05`):
            Scale of the Gumbel exploration noise added to the energies, relative to their range; 0 ranks by energy.
        > Parameters that control the energy

        energy_ema_decay (`float`, *optional*, defaults to `0.9`):
            Decay of the per-prompt pass-rate EMA (`ema <- decay * ema + (1 - decay) * p`), in [0, 1): the one EMA of
            the per-prompt table, read by the energy and the selectors.
        energy_momentum_weight (`float`, *optional*, defaults to `0.3`):
            Weight of the momentum term of the energy, >= 0.
        energy_momentum_mode (`str`, *optional*, defaults to `"abs"`):
            `"abs"`: momentum `min(2|p - ema|, 1)` (the release); `"improve"`: `min(2 max(p - ema, 0), 1)` (the
            paper's wording).
        energy_d_init_min (`float`, *optional*, defaults to `0.05`):
            Floor of the difficulty anchor `max(1 - p0, energy_d_init_min)`, in [0, 1].
        energy_terms (`list[str]`, *optional*, defaults to `["anchor", "uncertainty", "momentum"]`):
            Terms of the energy to use; a term left out takes its neutral value (ablations of the paper's Fig. 3).
        > Parameters that control what counts as correct

        pass_threshold (`float`, *optional*, defaults to `0.5`):
            A rollout is correct when the correctness reward is `>= pass_threshold`; one whose reward is `None` is left
            out of its group's pass rate (a group with none scorable has no pass rate and energy 0). With a non-binary
            correctness reward, a group all on one side of the threshold whose total rewards still differ is live,
            with a small energy below every learning-zone group (`lze_trl.method.selection.live_groups`).
        correctness_reward (`str` or `int`, *optional*):
            Name or index of the reward function that defines correctness. Defaults to the first one.
        max_unscorable_batches (`int`, *optional*, defaults to `0`):
            Generation batches in a row in which every reward function returned `None` (or NaN) for every rollout
            after which training stops with an error naming them (their zero advantages teach nothing, and LZE then
            selects on nothing), e.g. 3; 0 never stops: the run says once which reward function scored nothing, logs
            `lze/unscorable_frac`, and trains on as stock `GRPOTrainer` does. With `selector="none"` it never stops.
        > Parameters that control forward pruning

        prune_solved (`bool`, *optional*, defaults to `False`):
            Stop rolling out prompts that stay fully solved (forward pruning), exploring a few of them again
            (`prune_exploration`). Needs a map-style train dataset. An epoch that pruning leaves without a generation
            batch (in the async trainer, without a prompt) ends training with a warning.
        prune_solved_after (`int`, *optional*, defaults to `2`):
            Consecutive fully-solved observations of a prompt (one per epoch while it is rolled out) after which it is
            pruned, >= 1.
        prune_unsolved (`bool`, *optional*, defaults to `False`):
            Also stop rolling out prompts that stay fully unsolved (every rollout wrong): forward pruning on both
            sides, as GRESO skips predicted zero-variance prompts before generation. The step keeps its number of
            prompts: an epoch's plan leaves the pruned prompts out and the batches are filled from the rest.
        prune_unsolved_after (`int`, *optional*, defaults to `1`):
            Consecutive fully-unsolved observations after which a prompt is pruned, >= 1.
        prune_exploration (`str`, *optional*, defaults to `"replay"`):
            How pruned prompts are rolled out again: `"replay"` (the paper's: `prune_revisit_fraction` of each side's
            pool each epoch) or `"adaptive"` (GRESO's: each pruned prompt with probability `max(p ** depth, 0.01)`,
            `depth` the observations of its streak past the threshold plus one, `p` per side set when each epoch is
            planned from the dead share since the last plan, `p * target / share`, toward `prune_target_dead_frac`;
            `lze_trl.method.pruning.PromptPruner`).
        prune_revisit_fraction (`float`, *optional*, defaults to `0.1`):
            `"replay"`: fraction of each side's prune pool rolled out again at the start of each epoch (at least one
            prompt when > 0), in [0, 1].
        prune_target_dead_frac (`float`, *optional*, defaults to `0.25`):
            `"adaptive"`: the share of the generated groups that may be dead (GRESO's 0.25; a third of it on the
            solved side and two thirds on the unsolved side when both are pruned), in [0, 1].
        prune_refill (`bool`, *optional*, defaults to `True`):
            What a step does with the prompts forward pruning skips. `True`: an epoch's plan leaves them out and the
            steps are filled from the rest, so a step generates as many rollouts as GRPO's and an epoch is shorter.
            `False` (skip mode): the epoch visits every prompt, and a step generates only its prompts that pruning
            does not skip (a prompt never seen and an explored one are generated), without replacing the others:
            fewer rollouts on every step, and a run reaches `max_steps`. A skipped prompt is a predicted-dead group,
            which adds nothing to GRPO's update (zero advantages), so the update is GRPO's up to the live groups
            mispredicted; it is normalised as every LZE update is, by the loss tokens of the rows it keeps (those of
            the generated groups, and with `selector="lze"` of the selected ones). Every process skips as many
            prompts of a step (TRL gathers equal rows from each), at least one prompt of each is generated.
            `lze/generated_share` is the step's generated rollouts over its prompts x `num_generations`. The default
            stays `True` until the skip mode's study on a real model has run (BENCHMARKS.md section 16). In the
            async trainer each generation batch of `window_groups` prompts skips them.
        > Parameters that control shadow mode (measuring what LZE would save, changing nothing)

        shadow (`bool`, *optional*, defaults to `False`):
            Train exactly as `GRPOTrainer` (every group of every rollout in the update, nothing skipped) while logging
            what LZE would have done on this run, as `lze/shadow_*` metrics: the groups `selector` would keep and the
            update rows and tokens that leaves, and the prompts forward pruning on either side
            (`prune_solved_after`, `prune_unsolved_after`) would have skipped before generation, with how many of
            them turned out live (the rule's precision on your run, which only a run that generates everything can
            measure). `lze-trl advise OUTPUT_DIR` reads it. Not with forward pruning, which changes what is
            generated.
        > Parameters that control the logs and the saved state

        selection_log_max_rows (`int`, *optional*, defaults to `100000`):
            Rows (one per prompt group and generation batch) kept in the selection log, oldest dropped first; 0
            disables it. Saved as `lze_selection_log.parquet` with each checkpoint and at the end of training.
        resume_lze_state (`str`, *optional*, defaults to `"strict"`):
            What a resumed run does when its checkpoint has no usable LZE state (`lze_state.npz` or the selection log
            missing or corrupt, or recorded on another train dataset): `"strict"` raises an error naming the cause, so
            per-prompt pass rates are never lost silently nor mapped onto other prompts; `"fresh"` resumes with a fresh
            LZE state after a warning. Where the state decides nothing (`selector="none"`, no pruning) it only warns.
        thread_policy (`bool`, *optional*, defaults to `True`):
            On a CPU of at most 2 cores, run torch on one thread unless `OMP_NUM_THREADS` is set (logged when the
            trainer changes them; larger CPUs and GPUs keep torch's default). Why on by default: torch's default of
            one thread per core competes with anything else the machine runs; the README's quick start beside one
            busy process took 8.6 s on one thread and 89 s on torch's two (2026-12-02). `False` leaves torch's
            threads as they are.
    """

    selector: str = "lze"
    selection_ratio: float = 0.4
    selection_noise: float = 0.05
    energy_ema_decay: float = 0.9
    energy_momentum_weight: float = 0.3
    energy_momentum_mode: str = field(default="abs", metadata={"choices": list(MOMENTUM_MODES)})
    energy_d_init_min: float = 0.05
    energy_terms: list[str] = field(default_factory=lambda: list(ENERGY_TERMS))
    pass_threshold: float = 0.5
    correctness_reward: str | None = None
    max_unscorable_batches: int = 0
    prune_solved: bool = False
    prune_solved_after: int = 2
    prune_unsolved: bool = False
    prune_unsolved_after: int = 1
    prune_exploration: str = field(default="replay", metadata={"choices": list(EXPLORATIONS)})
    prune_revisit_fraction: float = 0.1
    prune_target_dead_frac: float = 0.25
    prune_refill: bool = True
    shadow: bool = False
    selection_log_max_rows: int = 100_000
    resume_lze_state: str = field(default="strict", metadata={"choices": list(RESUME_MODES)})
    thread_policy: bool = True


LZE_FIELDS = tuple(f.name for f in fields(LZESettings))
"""The names of the LZE settings, in order."""

# Each field's `--help` (`lze-trl grpo --help`, TRL's `TrlParser`) is its entry of the class docstring, said once.
_ENTRY = re.compile(r"^        (\w+) \(.*\):\n((?:            .*\n)+)", re.MULTILINE)
for _name, _text in _ENTRY.findall(LZESettings.__doc__):
    _field = LZESettings.__dataclass_fields__[_name]
    _field.metadata = MappingProxyType({**_field.metadata, "help": " ".join(_text.split())})


def _count(low: int) -> Callable[[Any], bool]:
    return lambda v: is_integer_at_least(v, low)


SETTING_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    # (setting, whether a value is valid, the fix), checked in this order after `selector`
    ("selection_ratio", within(0, 1, closed_low=False), "use a fraction in (0, 1], e.g. 0.4 (1.0: every live group)."),
    ("selection_noise", within(0, math.inf), "use a finite value >= 0 (0 disables exploration noise)."),
    ("energy_ema_decay", within(0, 1, closed_high=False), "use a decay in [0, 1), e.g. 0.9."),
    ("energy_momentum_weight", within(0, math.inf), "use a finite weight >= 0, e.g. 0.3."),
    ("energy_momentum_mode", lambda v: v in MOMENTUM_MODES, f"use one of {list(MOMENTUM_MODES)}."),
    ("energy_d_init_min", within(0, 1), "use a value in [0, 1], e.g. 0.05."),
    ("pass_threshold", _finite, "use a finite reward threshold."),
    ("prune_solved_after", _count(1), "use an integer >= 1, e.g. 2."),
    ("max_unscorable_batches", _count(0), "use an integer >= 0, e.g. 3 (0 trains on however long nothing is scored)."),
    ("selection_log_max_rows", _count(0), "use an integer >= 0 (0 disables the log)."),
    ("prune_revisit_fraction", within(0, 1), "use a fraction in [0, 1], e.g. 0.1."),
    ("prune_unsolved_after", _count(1), "use an integer >= 1, e.g. 1."),
    ("prune_exploration", lambda v: v in EXPLORATIONS, f"use one of {list(EXPLORATIONS)}."),
    ("prune_target_dead_frac", within(0, 1), "use a fraction in [0, 1], e.g. 0.25 (GRESO's)."),
    (
        "resume_lze_state",
        lambda v: v in RESUME_MODES,
        f"use one of {list(RESUME_MODES)} ('fresh': a fresh state, on purpose).",
    ),
)


def prunes(args: LZESettings) -> bool:
    """Whether a run prunes forward (on either side: `prune_solved`, `prune_unsolved`)."""
    return bool(args.prune_solved or args.prune_unsolved)


def parse_lze_lists(args: LZESettings) -> None:
    """Parses the list settings given as text (a command line or a recipe: `energy_terms="anchor,uncertainty"`) into
    lists, as `TrainingArguments.__post_init__` parses its own: the one
    place that rewrites a config's LZE values (both configs' `__post_init__`)."""
    if isinstance(args.energy_terms, str):
        args.energy_terms = [t.strip() for t in args.energy_terms.split(",")]


def hint_misspelled_keywords(config_class: type) -> type:
    """Makes `config_class(...)` (a dataclass) answer a keyword it has no field for with the nearest field's name, as
    the recipe path does, instead of the dataclass's bare `TypeError`; the class, changed in place."""
    init = config_class.__init__
    names = sorted(f.name for f in fields(config_class))

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            close = difflib.get_close_matches(unknown[0], names, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            raise TypeError(f"{config_class.__name__} got an unexpected keyword argument {unknown[0]!r}{hint}.")
        init(self, *args, **kwargs)

    config_class.__init__ = __init__
    return config_class
