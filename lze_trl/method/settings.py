"""[`LZESettings`]: every LZE setting of a run, defined once, for both trainers' configs.

Each setting is one statement of [`LZESettings`] ([`setting`]): its type, default, documentation (the `--help` of
`lze-trl grpo`, TRL's `TrlParser` reads it from the field's metadata, and the class docstring's entry, generated from
it) and its own check. [`~lze_trl.LZEGRPOConfig`] and [`~lze_trl.async_grpo.trainer.LZEAsyncGRPOConfig`] are TRL's
configs with these fields mixed in (`class LZEGRPOConfig(LZESettings, GRPOConfig)`); the method layer
([`~lze_trl.method.run.LZERun`], the selectors, the pruner) reads them as an `LZESettings`, so that a reader can
follow a setting such as `selection_ratio` from the config to the code that acts on it.
[`~lze_trl.method.validation.validate_lze_args`] runs the fields' checks ([`setting_errors`]) and the few that read
more than one setting or the selector registry, in both configs' `__post_init__`. Plain Python, no TRL.
"""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, fields
from typing import Any

from .checkpoint import RESUME_MODES
from .checks import is_finite_number as _finite
from .checks import is_integer_at_least, within
from .energy import ENERGY_TERMS, MOMENTUM_MODES
from .pruning import EXPLORATIONS


@dataclass(frozen=True)
class SettingSpec:
    """What [`setting`] knows of a field beyond what TRL's parser reads from its metadata (`help`, `choices`: the
    parser hands every metadata key to `argparse`): its documentation as written (`doc`), its check (`valid`, `fix`),
    the heading of the group it starts (`group`) and its documented type where it is not the annotation's
    (`doc_type`)."""

    doc: str
    valid: Callable[[Any], bool] | None
    fix: str
    group: str | None
    doc_type: str | None


SPECS: dict[dataclasses.Field, SettingSpec] = {}
"""Each [`setting`] field's [`SettingSpec`] (a field keeps its identity in the configs that inherit it)."""


def setting(
    default: Any = MISSING,
    *,
    help: str,
    valid: Callable[[Any], bool] | None = None,
    fix: str = "",
    choices: tuple[str, ...] | None = None,
    group: str | None = None,
    doc_type: str | None = None,
    default_factory: Callable[[], Any] | Any = MISSING,
) -> Any:
    """
    One LZE setting: a dataclass field with its documentation (its metadata's `help`, what `--help` prints) and its
    check, kept in [`SPECS`].

    Args:
        default, default_factory: The field's default.
        help (`str`): What it does (the `--help` text, and its entry of the class docstring, wrapped as written).
        valid (`Callable[[Any], bool]`, *optional*): Whether a value is valid; with `choices`, membership in them.
        fix (`str`, *optional*): What the error of an invalid value tells the user to do (after "use one of
            `choices`" where there are choices).
        choices (`tuple[str, ...]`, *optional*): The values a string setting takes (also `--help`'s choices).
        group (`str`, *optional*): The heading of the docstring's group of parameters that starts with this one.
        doc_type (`str`, *optional*): The type as documented, where it is not the annotation's.
    """
    metadata: dict[str, Any] = {"help": " ".join(help.split())}
    if choices is not None:
        valid, fix = (lambda v: v in choices), f"use one of {list(choices)}" + (f" ({fix})" if fix else "") + "."
        metadata["choices"] = list(choices)
    made = dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)
    SPECS[made] = SettingSpec(textwrap.dedent(help).strip(), valid, fix, group, doc_type)
    return made


def count_at_least(low: int) -> Callable[[Any], bool]:
    """The check that a value is an `int` (not a `bool`) `>= low`."""
    return lambda v: is_integer_at_least(v, low)


def _bool(value: Any) -> bool:
    return isinstance(value, bool)


def _terms(value: Any) -> bool:
    terms = [value] if isinstance(value, str) else list(value)
    return len(terms) > 0 and set(terms) <= set(ENERGY_TERMS)


@dataclass
class LZESettings:
    """
    The settings of Learning-Zone Energy (LZE): which prompt groups of a generation batch take part in the policy
    update (backward selection) and which prompts are still rolled out (forward pruning, off by default). Defaults
    are those of the authors' release.
    """

    # Each setting's documentation is its `help`: the class docstring's `Parameters` are generated from them below.

    selector: str = setting(
        "lze",
        group="Parameters that control which groups take part in the update (backward selection)",
        help="""
            How prompt groups are chosen for the update, by the name of a registered selector (see
            `lze_trl.method.selectors`): `"lze"` (top `selection_ratio` by energy; restrict `energy_terms` for the
            paper's ablations), `"none"` (every group, exactly as `GRPOTrainer`), `"uniform_live"` (as many groups as
            `"lze"` keeps, at random among the live ones: the control of LZE's ranking), or a selector registered
            outside the package (`lze_trl.method.selectors.register_selector`).
        """,
    )
    selection_ratio: float = setting(
        0.4,
        valid=within(0, 1, closed_low=False),
        fix="use a fraction in (0, 1], e.g. 0.4 (1.0: every live group).",
        help="""
            Fraction of the generation batch's groups kept for the update, in (0, 1].
        """,
    )
    selection_noise: float = setting(
        0.05,
        valid=within(0, math.inf),
        fix="use a finite value >= 0 (0 disables the selection noise).",
        help="""
            Scale of the Gumbel selection noise added to the energies, relative to their range; 0 ranks by energy.
        """,
    )
    energy_ema_decay: float = setting(
        0.9,
        group="Parameters that control the energy",
        valid=within(0, 1, closed_high=False),
        fix="use a decay in [0, 1), e.g. 0.9.",
        help="""
            Decay of the per-prompt pass-rate EMA (`ema <- decay * ema + (1 - decay) * p`), in [0, 1): the one EMA of
            the per-prompt table, read by the energy and the selectors.
        """,
    )
    energy_momentum_weight: float = setting(
        0.3,
        valid=within(0, math.inf),
        fix="use a finite weight >= 0, e.g. 0.3.",
        help="""
            Weight of the momentum term of the energy, >= 0.
        """,
    )
    energy_momentum_mode: str = setting(
        "abs",
        choices=MOMENTUM_MODES,
        help="""
            `"abs"`: momentum `min(2|p - ema|, 1)` (the release); `"improve"`: `min(2 max(p - ema, 0), 1)` (the
            paper's wording).
        """,
    )
    energy_d_init_min: float = setting(
        0.05,
        valid=within(0, 1),
        fix="use a value in [0, 1], e.g. 0.05.",
        help="""
            Floor of the difficulty anchor `max(1 - p0, energy_d_init_min)`, in [0, 1].
        """,
    )
    energy_terms: list[str] = setting(
        default_factory=lambda: list(ENERGY_TERMS),
        valid=_terms,
        fix=f"use a non-empty subset of {list(ENERGY_TERMS)}.",
        help="""
            Terms of the energy to use; a term left out takes its neutral value (ablations of the paper's Fig. 3).
        """,
    )
    pass_threshold: float = setting(
        0.5,
        group="Parameters that control what counts as correct",
        valid=_finite,
        fix="use a finite reward threshold.",
        help="""
            A rollout is correct when the correctness reward is `>= pass_threshold`; one whose reward is `None` is left
            out of its group's pass rate (a group with none scorable has no pass rate and energy 0). With a non-binary
            correctness reward, a group all on one side of the threshold whose total rewards still differ is live,
            with a small energy below every learning-zone group (`lze_trl.method.selection.live_groups`).
        """,
    )
    correctness_reward: str | None = setting(
        None,
        doc_type="`str` or `int`",
        help="""
            Name or index of the reward function that defines correctness. Defaults to the first one.
        """,
    )
    max_unscorable_batches: int = setting(
        0,
        valid=count_at_least(0),
        fix="use an integer >= 0, e.g. 3 (0 trains on however long nothing is scored).",
        help="""
            Generation batches in a row in which every reward function returned `None` (or NaN) for every rollout
            after which training stops with an error naming them (their zero advantages teach nothing, and LZE then
            selects on nothing), e.g. 3; 0 never stops: the run says once which reward function scored nothing, logs
            `lze/unscorable_frac`, and trains on as stock `GRPOTrainer` does. With `selector="none"` it never stops.
        """,
    )
    prune_solved: bool = setting(
        False,
        group="Parameters that control forward pruning",
        valid=_bool,
        fix="use True or False.",
        help="""
            Stop rolling out prompts that stay fully solved (forward pruning), exploring a few of them again
            (`prune_exploration`). Needs a map-style train dataset. An epoch that pruning leaves without a generation
            batch (in the async trainer, without a prompt) ends training with a warning.
        """,
    )
    prune_solved_after: int = setting(
        2,
        valid=count_at_least(1),
        fix="use an integer >= 1, e.g. 2.",
        help="""
            Consecutive fully-solved observations of a prompt (one per epoch while it is rolled out) after which it is
            pruned, >= 1.
        """,
    )
    prune_unsolved: bool = setting(
        False,
        valid=_bool,
        fix="use True or False.",
        help="""
            Also stop rolling out prompts that stay fully unsolved (every rollout wrong): forward pruning on both
            sides, as GRESO skips predicted zero-variance prompts before generation. The step keeps its number of
            prompts: an epoch's plan leaves the pruned prompts out and the batches are filled from the rest.
        """,
    )
    prune_unsolved_after: int = setting(
        1,
        valid=count_at_least(1),
        fix="use an integer >= 1, e.g. 1.",
        help="""
            Consecutive fully-unsolved observations after which a prompt is pruned, >= 1.
        """,
    )
    prune_exploration: str = setting(
        "replay",
        choices=EXPLORATIONS,
        help="""
            How pruned prompts are rolled out again: `"replay"` (the paper's: `prune_explore_fraction` of each side's
            pool each epoch) or `"adaptive"` (GRESO's: each pruned prompt with probability `max(p ** depth, 0.01)`,
            `depth` the observations of its streak past the threshold plus one, `p` per side set when each epoch is
            planned from the dead share since the last plan, `p * target / share`, toward `prune_target_dead_frac`;
            `lze_trl.method.pruning.PromptPruner`).
        """,
    )
    prune_explore_fraction: float = setting(
        0.1,
        valid=within(0, 1),
        fix="use a fraction in [0, 1], e.g. 0.1.",
        help="""
            `"replay"`: fraction of each side's prune pool rolled out again at the start of each epoch (at least one
            prompt when > 0), in [0, 1].
        """,
    )
    prune_target_dead_frac: float = setting(
        0.25,
        valid=within(0, 1),
        fix="use a fraction in [0, 1], e.g. 0.25 (GRESO's).",
        help="""
            `"adaptive"`: the share of the generated groups that may be dead (GRESO's 0.25; a third of it on the
            solved side and two thirds on the unsolved side when both are pruned), in [0, 1].
        """,
    )
    prune_refill: bool = setting(
        True,
        valid=_bool,
        fix="use True (steps refilled from the epoch's other prompts) or False (skip, generating fewer rollouts).",
        help="""
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
        """,
    )
    shadow: bool = setting(
        False,
        group="Parameters that control shadow mode (measuring what LZE would save, changing nothing)",
        valid=_bool,
        fix="use True (measure, train as GRPO) or False.",
        help="""
            Train exactly as `GRPOTrainer` (every group of every rollout in the update, nothing skipped) while logging
            what LZE would have done on this run, as `lze/shadow_*` metrics: the groups `selector` would keep and the
            update rows and tokens that leaves, and the prompts forward pruning on either side
            (`prune_solved_after`, `prune_unsolved_after`) would have skipped before generation, with how many of
            them turned out live (the rule's precision on your run, which only a run that generates everything can
            measure). `lze-trl advise OUTPUT_DIR` reads it. Not with forward pruning, which changes what is
            generated.
        """,
    )
    selection_log_max_rows: int = setting(
        100_000,
        group="Parameters that control the logs and the saved state",
        valid=count_at_least(0),
        fix="use an integer >= 0 (0 disables the log).",
        help="""
            Rows (one per prompt group and generation batch) kept in the selection log, oldest dropped first; 0
            disables it. Saved as `lze_selection_log.parquet` with each checkpoint and at the end of training.
        """,
    )
    resume_lze_state: str = setting(
        "strict",
        choices=RESUME_MODES,
        fix="'fresh': a fresh state, on purpose.",
        help="""
            What a resumed run does when its checkpoint has no usable LZE state (`lze_state.npz` or the selection log
            missing or corrupt, or recorded on another train dataset): `"strict"` raises an error naming the cause, so
            per-prompt pass rates are never lost silently nor mapped onto other prompts; `"fresh"` resumes with a fresh
            LZE state after a warning. Where the state decides nothing (`selector="none"`, no pruning) it only warns.
        """,
    )
    thread_policy: bool = setting(
        True,
        valid=_bool,
        fix="use True or False.",
        help="""
            On a CPU of at most 2 cores, run torch on one thread unless `OMP_NUM_THREADS` is set (logged when the
            trainer changes them; larger CPUs and GPUs keep torch's default). Why on by default: torch's default of
            one thread per core competes with anything else the machine runs; the README's quick start beside one
            busy process took 8.6 s on one thread and 89 s on torch's two (2026-12-02). `False` leaves torch's
            threads as they are.
        """,
    )


def _documented(field: dataclasses.Field) -> str:
    """A field's entry of the class docstring, in TRL's format: its name, type and default, then its `doc`."""
    if field.default is not MISSING:
        value = field.default
    else:
        value = field.default_factory()
    spec = SPECS[field]
    kind = spec.doc_type or f"`{field.type}`"
    if value is None:
        default = ""
    else:
        text = json.dumps(value) if isinstance(value, (str, list)) else repr(value)
        default = f", defaults to `{text}`"
    lines = [f"        {field.name} ({kind}, *optional*{default}):"]
    lines += [f"            {line}" if line else "" for line in spec.doc.splitlines()]
    return "\n".join(lines)


def documented(settings: type, names: tuple[str, ...] | None = None) -> str:
    """The `Parameters` of a docstring, in TRL's format, generated from the [`setting`] fields of `settings` (those
    `names`, by default all): each one's name, type, default and `help`, under its group's heading."""
    lines = ["    Parameters:"]
    for f in fields(settings):
        if f in SPECS and (names is None or f.name in names):
            group = SPECS[f].group
            lines += [f"        > {group}\n"] if group else []
            lines.append(_documented(f))
    return "\n".join(lines) + "\n    "


LZESettings.__doc__ = LZESettings.__doc__.rstrip() + "\n\n" + documented(LZESettings)

LZE_FIELDS = tuple(f.name for f in fields(LZESettings))
"""The names of the LZE settings, in order."""


def setting_errors(args: Any) -> Iterator[str]:
    """The error of each [`setting`] of the config `args` its own check refuses, in field order: `"<setting>=<value>
    is invalid: <fix>"`."""
    for f in fields(args):
        spec = SPECS.get(f)
        value = getattr(args, f.name)
        if spec is not None and spec.valid is not None and not spec.valid(value):
            yield f"{f.name}={value!r} is invalid: {spec.fix}"


def prunes(args: LZESettings) -> bool:
    """Whether a run prunes forward (on either side: `prune_solved`, `prune_unsolved`)."""
    return bool(args.prune_solved or args.prune_unsolved)
